package store

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzParseList: no query string makes filter text reach the SQL; values only travel
// as arguments.
func FuzzParseList(f *testing.F) {
	for _, s := range []string{"label=x", "label__in=a,b", "id__in=0123456789abcdef01234567", "sort_by=-name&page=2",
		"label__startswith!=o'brien", "tags__contains=a,b", "createdAt__range=0,1", "search=%_\\", "name=1);DROP TABLE x;--"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		p := ParseList(q, testFields, "-createdAt", "d.id")
		if p.PageSize < 1 || p.PageSize > maxPageSize || p.Page < 1 {
			t.Fatalf("page %d size %d", p.Page, p.PageSize)
		}
		for _, c := range p.conds {
			for _, vals := range q {
				for _, v := range vals {
					if len(v) >= 4 && strings.Contains(c.sql, v) && !isColumnText(v) {
						t.Fatalf("filter value %q reached the SQL %q", v, c.sql)
					}
				}
			}
		}
	})
}

// isColumnText tells whether s occurs in the fixed SQL the code writes itself.
func isColumnText(s string) bool {
	fixed := "d.public_id d.label d.name d.is_active d.created_at d.tags IS NULL IS NOT NULL IS NOT TRUE ILIKE LIKE BETWEEN AND FALSE TRUE lower( IN (?) @> && >= <= "
	return strings.Contains(fixed, s)
}
