package store

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/sensordata/sensorapi/pkg/validate"
)

// Kind tells how a list field's filter values are read (API.md §3 "Filters").
type Kind int

// Field kinds.
const (
	Text  Kind = iota // labels, names, e-mails
	ID                // public ids: a value that is not 24 hex matches nothing
	Bool              // true/false
	Time              // ms since the epoch, or RFC 3339
	Array             // text[] (tags; related ids): exact/contains = has all, in = has any
	Int               // integer counters
)

// Field is a filterable, sortable field of a list: its API name maps to a SQL
// expression the code chose (never user text).
type Field struct {
	Column     string
	Kind       Kind
	Sortable   bool
	Searchable bool // matched by search=text
	// Via filters through a related table: Column is the related table's column and
	// the condition is spliced into Via's %s, e.g.
	// "d.id IN (SELECT v.device_id FROM variables v WHERE %s)".
	Via string
}

// ListParams is a parsed DRF-style list request.
type ListParams struct {
	Page, PageSize int // 1-based page; page_size clamped to 1..1000
	order          string
	conds          []cond
}

type cond struct {
	sql  string
	args []any
}

const (
	defaultPageSize = 50
	maxPageSize     = 1000
	// maxPage keeps (page-1)*page_size within an int64 OFFSET; any such page is
	// past the end of every list.
	maxPage = math.MaxInt64 / maxPageSize
)

var lookups = map[string]bool{"exact": true, "iexact": true, "in": true, "contains": true, "icontains": true,
	"startswith": true, "istartswith": true, "endswith": true, "iendswith": true, "isnull": true,
	"gt": true, "gte": true, "lt": true, "lte": true, "range": true}

// ParseList reads page, page_size, sort_by, search and FIELD[__LOOKUP][!]=value filters.
// Unknown parameters are ignored; a malformed filter value matches nothing.
// tiebreak is the unique column (e.g. "d.id") that orders rows with equal sort keys,
// so pages never overlap.
func ParseList(q url.Values, fields map[string]Field, defaultSort, tiebreak string) ListParams {
	p := ListParams{Page: 1, PageSize: defaultPageSize}
	if n, err := strconv.Atoi(q.Get("page")); err == nil && n >= 1 {
		p.Page = min(n, maxPage)
	}
	if n, err := strconv.Atoi(q.Get("page_size")); err == nil && n >= 1 {
		p.PageSize = min(n, maxPageSize)
	}
	p.order = orderBy(q.Get("sort_by"), fields, defaultSort, tiebreak)
	if s := q.Get("search"); strings.ContainsRune(s, 0) {
		p.conds = append(p.conds, nothing)
	} else if s != "" {
		p.conds = append(p.conds, searchCond(s, fields))
	}
	for key, vals := range q {
		name, lookup, negate := splitFilter(key)
		f, ok := fields[name]
		if !ok || !lookups[lookup] {
			continue
		}
		for _, v := range vals {
			// PostgreSQL text cannot hold NUL: such a value matches nothing (in an
			// __in list, such an item: inCond drops it)
			c := nothing
			if lookup == "in" || !strings.ContainsRune(v, 0) {
				c = filterCond(f, lookup, v)
			}
			if f.Via != "" {
				c.sql = fmt.Sprintf(f.Via, c.sql)
			}
			if negate {
				c.sql = "(" + c.sql + ") IS NOT TRUE"
			}
			p.conds = append(p.conds, c)
		}
	}
	return p
}

// Apply adds the filters, order and page to a select.
func (p ListParams) Apply(sel *bun.SelectQuery) *bun.SelectQuery {
	return p.Order(p.Filter(sel)).Limit(int64(p.PageSize)).Offset(int64(p.Page-1) * int64(p.PageSize))
}

// Filter adds only the filters (for the count of all matches).
func (p ListParams) Filter(sel *bun.SelectQuery) *bun.SelectQuery {
	for _, c := range p.conds {
		sel = sel.Where(c.sql, c.args...)
	}
	return sel
}

// Order adds only the order.
func (p ListParams) Order(sel *bun.SelectQuery) *bun.SelectQuery { return sel.OrderExpr(p.order) }

// ScanPage reads page p into full's model and returns the count of all matches. base
// selects the scoped, joined rows without columns; the page's keys (idCol) are chosen
// from it first, so an index-only scan can skip the rows before a deep page instead of
// fetching and sorting them all (a deferred join).
func ScanPage(ctx context.Context, p ListParams, base func() *bun.SelectQuery, idCol string, full *bun.SelectQuery) (int, error) {
	ids := p.Apply(base().ColumnExpr(idCol))
	if err := p.Order(full.Where(idCol+" IN (?)", ids)).Scan(ctx); err != nil {
		return 0, fmt.Errorf("read page: %w", err)
	}
	n, err := p.Filter(base()).Count(ctx)
	if err != nil {
		return 0, fmt.Errorf("count: %w", err)
	}
	return int(n), nil
}

func splitFilter(key string) (name, lookup string, negate bool) {
	key, negate = strings.CutSuffix(key, "!")
	lookup = "exact"
	if i := strings.LastIndex(key, "__"); i > 0 && lookups[key[i+2:]] {
		key, lookup = key[:i], key[i+2:]
	}
	return key, lookup, negate
}

func orderBy(sortBy string, fields map[string]Field, def, tiebreak string) string {
	name, desc := strings.CutPrefix(sortBy, "-")
	f, ok := fields[name]
	if !ok || !f.Sortable {
		name, desc = strings.CutPrefix(def, "-")
		f = fields[name]
	}
	if desc {
		return f.Column + " DESC NULLS LAST, " + tiebreak + " DESC"
	}
	return f.Column + " ASC NULLS FIRST, " + tiebreak + " ASC"
}

func searchCond(s string, fields map[string]Field) cond {
	var parts []string
	var args []any
	for _, f := range fields {
		if f.Searchable {
			parts = append(parts, f.Column+" ILIKE ?")
			args = append(args, "%"+escapeLike(s)+"%")
		}
	}
	if len(parts) == 0 {
		return cond{sql: "TRUE"}
	}
	return cond{sql: strings.Join(parts, " OR "), args: args}
}

var nothing = cond{sql: "FALSE"}

func filterCond(f Field, lookup, v string) cond {
	col := f.Column
	if lookup == "isnull" {
		switch v {
		case "true":
			return cond{sql: col + " IS NULL"}
		case "false":
			return cond{sql: col + " IS NOT NULL"}
		}
		return nothing
	}
	if lookup == "in" {
		return inCond(f, v)
	}
	if f.Kind == Array {
		return cond{sql: col + " @> ?", args: []any{pgdialect.Array(splitList(v))}}
	}
	switch lookup {
	case "range":
		parts := splitList(v)
		vals, ok := filterArgs(f.Kind, parts)
		if !ok || len(vals) != 2 {
			return nothing
		}
		return cond{sql: col + " BETWEEN ? AND ?", args: vals}
	case "iexact":
		return cond{sql: "lower(" + col + ") = lower(?)", args: []any{v}}
	case "contains", "icontains", "startswith", "istartswith", "endswith", "iendswith":
		return likeCond(col, lookup, v)
	}
	vals, ok := filterArgs(f.Kind, []string{v})
	if !ok {
		return nothing
	}
	op := map[string]string{"exact": "=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}[lookup]
	return cond{sql: fmt.Sprintf("%s %s ?", col, op), args: vals}
}

// inCond matches any item of a comma-separated list. Each item stands alone (API.md
// §3): a malformed one (not 24 hex for an id, holding NUL, ...) matches nothing and
// spoils nothing, so id__in=GOOD,zzz still finds GOOD.
func inCond(f Field, v string) cond {
	var items []string
	var vals []any
	for _, item := range splitList(v) {
		if strings.ContainsRune(item, 0) {
			continue
		}
		if one, ok := filterArgs(f.Kind, []string{item}); ok {
			items, vals = append(items, item), append(vals, one...)
		}
	}
	switch {
	case len(vals) == 0:
		return nothing
	case f.Kind == Array: // has any of the items
		return cond{sql: f.Column + " && ?", args: []any{pgdialect.Array(items)}}
	}
	return cond{sql: f.Column + " IN (?)", args: []any{bun.List(vals)}}
}

func likeCond(col, lookup, v string) cond {
	op := " LIKE "
	if strings.HasPrefix(lookup, "i") {
		op = " ILIKE "
		lookup = lookup[1:]
	}
	pat := escapeLike(v)
	switch lookup {
	case "contains":
		pat = "%" + pat + "%"
	case "startswith":
		pat += "%"
	case "endswith":
		pat = "%" + pat
	}
	return cond{sql: col + op + "?", args: []any{pat}}
}

func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// filterArgs converts filter text to typed arguments; ok is false when one cannot match.
func filterArgs(k Kind, in []string) ([]any, bool) {
	out := make([]any, 0, len(in))
	for _, s := range in {
		switch k {
		case ID:
			if !validate.IsID(s) {
				return nil, false
			}
			out = append(out, s)
		case Bool:
			b, err := strconv.ParseBool(s)
			if err != nil {
				return nil, false
			}
			out = append(out, b)
		case Int:
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, false
			}
			out = append(out, n)
		case Time:
			t, ok := parseTime(s)
			if !ok {
				return nil, false
			}
			out = append(out, t)
		default:
			out = append(out, s)
		}
	}
	return out, true
}

func parseTime(s string) (time.Time, bool) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms).UTC(), true
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}
