package store

import (
	"database/sql"
	"net/url"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
)

var testFields = map[string]Field{
	"id":        {Column: "d.public_id", Kind: ID},
	"label":     {Column: "d.label", Kind: Text, Sortable: true, Searchable: true},
	"name":      {Column: "d.name", Kind: Text, Sortable: true, Searchable: true},
	"isActive":  {Column: "d.is_active", Kind: Bool},
	"createdAt": {Column: "d.created_at", Kind: Time, Sortable: true},
	"tags":      {Column: "d.tags", Kind: Array},
	"count":     {Column: "d.variables_number", Kind: Int},
	"vars__id":  {Column: "v.public_id", Kind: ID, Via: "d.id IN (SELECT v.device_id FROM variables v WHERE %s)"},
}

func compileList(t *testing.T, query string) string {
	t.Helper()
	q, err := url.ParseQuery(query)
	if err != nil {
		t.Fatal(err)
	}
	sqldb, err := sql.Open("pgx", "postgres://unused")
	if err != nil {
		t.Fatal(err)
	}
	db := bun.NewDB(sqldb, pgdialect.New())
	p := ParseList(q, testFields, "-createdAt", "d.id")
	return p.Apply(db.NewSelect().TableExpr("devices AS d").Column("d.id")).String()
}

func TestParseList(t *testing.T) {
	const base = `SELECT "d"."id" FROM devices AS d`
	cases := []struct{ query, want string }{
		{"", base + ` ORDER BY d.created_at DESC NULLS LAST, d.id DESC LIMIT 50`},
		{"page=3&page_size=5000&sort_by=label", base + ` ORDER BY d.label ASC NULLS FIRST, d.id ASC LIMIT 1000 OFFSET 2000`},
		{"page=9223372036854775807&page_size=1000", base + ` ORDER BY d.created_at DESC NULLS LAST, d.id DESC LIMIT 1000 OFFSET 9223372036854774000`},
		{"sort_by=-nosuch&page=-1&page_size=x", base + ` ORDER BY d.created_at DESC NULLS LAST, d.id DESC LIMIT 50`},
		{"id=0123456789abcdef01234567", base + ` WHERE (d.public_id = '0123456789abcdef01234567') ORDER BY d.created_at DESC NULLS LAST, d.id DESC LIMIT 50`},
		{"id=not-an-id", base + ` WHERE (FALSE) ORDER BY d.created_at DESC NULLS LAST, d.id DESC LIMIT 50`},
		{"id__in=0123456789abcdef01234567,abcdefabcdefabcdefabcdef", base + ` WHERE (d.public_id IN ('0123456789abcdef01234567', 'abcdefabcdefabcdefabcdef')) ORDER BY d.created_at DESC NULLS LAST, d.id DESC LIMIT 50`},
		// in every __in list each item stands alone (API.md §3): a malformed one drops out
		{"id__in=0123456789abcdef01234567,zzz", base + ` WHERE (d.public_id IN ('0123456789abcdef01234567')) ORDER BY d.created_at DESC NULLS LAST, d.id DESC LIMIT 50`},
		{"id__in=zzz,", base + ` WHERE (FALSE) ORDER BY d.created_at DESC NULLS LAST, d.id DESC LIMIT 50`},
		{"isActive__in=maybe,true", base + ` WHERE (d.is_active IN (TRUE)) ORDER BY d.created_at DESC NULLS LAST, d.id DESC LIMIT 50`},
		{"count__in=2,two", base + ` WHERE (d.variables_number IN (2)) ORDER BY d.created_at DESC NULLS LAST, d.id DESC LIMIT 50`},
		{"createdAt__in=yesterday,0", base + ` WHERE (d.created_at IN ('1970-01-01 00:00:00+00:00')) ORDER BY d.created_at DESC NULLS LAST, d.id DESC LIMIT 50`},
		{"vars__id__in=zzz,0123456789abcdef01234567", base + ` WHERE (d.id IN (SELECT v.device_id FROM variables v WHERE v.public_id IN ('0123456789abcdef01234567'))) ORDER BY d.created_at DESC NULLS LAST, d.id DESC LIMIT 50`},
		{"label__in=a%00b,c", base + ` WHERE (d.label IN ('c')) ORDER BY d.created_at DESC NULLS LAST, d.id DESC LIMIT 50`},
		{"tags__in=a%00b,c", base + ` WHERE (d.tags && '{"c"}') ORDER BY d.created_at DESC NULLS LAST, d.id DESC LIMIT 50`},
		{"label__startswith!=tmp_", base + ` WHERE ((d.label LIKE 'tmp\_%') IS NOT TRUE) ORDER BY d.created_at DESC NULLS LAST, d.id DESC LIMIT 50`},
		{"label__icontains=o'brien", base + ` WHERE (d.label ILIKE '%o''brien%') ORDER BY d.created_at DESC NULLS LAST, d.id DESC LIMIT 50`},
		{"isActive=false", base + ` WHERE (d.is_active = FALSE) ORDER BY d.created_at DESC NULLS LAST, d.id DESC LIMIT 50`},
		{"tags__contains=a,b", base + ` WHERE (d.tags @> '{"a","b"}') ORDER BY d.created_at DESC NULLS LAST, d.id DESC LIMIT 50`},
		{"createdAt__gte=0", base + ` WHERE (d.created_at >= '1970-01-01 00:00:00+00:00') ORDER BY d.created_at DESC NULLS LAST, d.id DESC LIMIT 50`},
		{"count__gte=2", base + ` WHERE (d.variables_number >= 2) ORDER BY d.created_at DESC NULLS LAST, d.id DESC LIMIT 50`},
		{"count=two", base + ` WHERE (FALSE) ORDER BY d.created_at DESC NULLS LAST, d.id DESC LIMIT 50`},
		{"vars__id__in=0123456789abcdef01234567", base + ` WHERE (d.id IN (SELECT v.device_id FROM variables v WHERE v.public_id IN ('0123456789abcdef01234567'))) ORDER BY d.created_at DESC NULLS LAST, d.id DESC LIMIT 50`},
		{"vars__id!=0123456789abcdef01234567", base + ` WHERE ((d.id IN (SELECT v.device_id FROM variables v WHERE v.public_id = '0123456789abcdef01234567')) IS NOT TRUE) ORDER BY d.created_at DESC NULLS LAST, d.id DESC LIMIT 50`},
		{"label=a%00b", base + ` WHERE (FALSE) ORDER BY d.created_at DESC NULLS LAST, d.id DESC LIMIT 50`},
		{"search=%00", base + ` WHERE (FALSE) ORDER BY d.created_at DESC NULLS LAST, d.id DESC LIMIT 50`},
		{"label__isnull=maybe&unknown=1", base + ` WHERE (FALSE) ORDER BY d.created_at DESC NULLS LAST, d.id DESC LIMIT 50`},
	}
	for _, c := range cases {
		if got := compileList(t, c.query); got != c.want {
			t.Errorf("%s\n got %s\nwant %s", c.query, got, c.want)
		}
	}
	// search matches label or name, in either order of the map
	got := compileList(t, "search=Kitchen")
	if !strings.Contains(got, "d.label ILIKE '%Kitchen%'") || !strings.Contains(got, "d.name ILIKE '%Kitchen%'") {
		t.Errorf("search: %s", got)
	}
}
