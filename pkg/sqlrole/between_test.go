package sqlrole_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// span is a range [From, To] of sensor.values_between, as SQL literals.
type span struct {
	name, From, To string
}

// tsLit is ms as a timestamptz literal.
func tsLit(ms int64) string {
	return "'" + time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z") + "'::timestamptz"
}

// spans are the ranges checked over the tenant's dots: both packed days whole and cut
// mid-day, bounds on dots (both included), one instant, rows only, an empty range.
func (tn *tenant) spans() []span {
	d := tn.Dots
	first := time.UnixMilli(d[0].TS).UTC().Truncate(day).UnixMilli()
	return []span{
		{"everything", "'-infinity'", "'infinity'"},
		{"packed days cut mid-day", tsLit(first + 13*3_600_000 + 180_000), tsLit(first + 26*3_600_000)},
		{"bounds on dots", tsLit(d[10].TS), tsLit(d[300].TS)},
		{"one instant", tsLit(d[42].TS), tsLit(d[42].TS)},
		{"rows only", tsLit(d[len(d)-60].TS), "now()"},
		{"nothing", tsLit(first - 5*day.Milliseconds()), tsLit(first - 4*day.Milliseconds())},
	}
}

// inSpan is the model: the tenant's dots with from <= ts <= to (bounds as ms).
func (tn *tenant) inSpan(from, to int64) []dot {
	var out []dot
	for _, d := range tn.Dots {
		if d.TS >= from && d.TS <= to {
			out = append(out, d)
		}
	}
	return out
}

// readDots runs q (columns variable_id, ts, value, context text) as the tenant's role
// and checks every row is of its variable.
func (tn *tenant) readDots(t *testing.T, q string) []dot {
	t.Helper()
	rows, _ := tn.Conn.Query(context.Background(), q)
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (dot, error) {
		var id string
		var ts time.Time
		var d dot
		err := r.Scan(&id, &ts, &d.Value, &d.Context)
		if err == nil && id != tn.VarID {
			err = fmt.Errorf("a row of variable %s", id)
		}
		d.TS = ts.UnixMilli()
		return d, err
	})
	if err != nil {
		t.Fatalf("%s: %s: %v", tn.Name, q, err)
	}
	return got
}

// TestValuesBetweenIsTheViewsRange: two accounts with the same labels, their old days
// packed; for every span, each role's sensor.values_between(from, to) answers exactly
// its own dots in [from, to] (packed days and rows, contexts included), the same rows
// as sensor.values with ts BETWEEN from AND to; another account's variable id gives no
// row; sensor.values_by_day's day is each value's UTC day; the service (no account
// role) reads no row through it.
func TestValuesBetweenIsTheViewsRange(t *testing.T) {
	a, b := newTenant(t, 21), newTenant(t, 7000)
	if n := pack(t); n < 4 {
		t.Fatalf("packed %d days, want the 2 old days of both accounts", n)
	}
	ctx := context.Background()
	for _, tn := range []*tenant{a, b} {
		for _, s := range tn.spans() {
			fn := tn.readDots(t, fmt.Sprintf(`SELECT variable_id, ts, value, coalesce(context::text, '')
				FROM sensor.values_between(%s, %s) ORDER BY ts`, s.From, s.To))
			view := tn.readDots(t, fmt.Sprintf(`SELECT variable_id, ts, value, coalesce(context::text, '')
				FROM sensor.values WHERE ts BETWEEN %s AND %s ORDER BY ts`, s.From, s.To))
			want := tn.Dots // ±infinity
			if s.name != "everything" {
				var from, to time.Time
				if err := tn.Conn.QueryRow(ctx, `SELECT `+s.From+`, `+s.To).Scan(&from, &to); err != nil {
					t.Fatal(err)
				}
				want = tn.inSpan(from.UnixMilli(), to.UnixMilli())
			}
			if !equalDots(fn, want) || !equalDots(view, want) {
				t.Fatalf("%s, %s: values_between %d rows, sensor.values %d, the account wrote %d in the span",
					tn.Name, s.name, len(fn), len(view), len(want))
			}
			if s.name == "packed days cut mid-day" && len(want) < 100 {
				t.Fatalf("%s: the span holds %d packed dots, want the old days' dots", tn.Name, len(want))
			}
		}
	}
	var n int
	q := `SELECT count(*) FROM sensor.values_between('-infinity', 'infinity') WHERE variable_id = $1`
	if err := a.Conn.QueryRow(ctx, q, b.VarID).Scan(&n); err != nil || n != 0 {
		t.Errorf("%s reads %d rows of %s's variable (%v)", a.Name, n, b.Name, err)
	}
	if err := env.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM sensor.values_between('-infinity', 'infinity')`).Scan(&n); err != nil || n != 0 {
		t.Errorf("the service reads %d rows through values_between (%v), want none: it is no account's role", n, err)
	}
	q = `SELECT count(*) FROM sensor.values_by_day WHERE day <> time_bucket('1 day', ts)`
	if err := a.Conn.QueryRow(ctx, q).Scan(&n); err != nil || n != 0 {
		t.Errorf("sensor.values_by_day: %d values outside their day (%v)", n, err)
	}
}

func equalDots(got, want []dot) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// TestValuesBetweenPrunesPackedDays: PostgreSQL inlines the function into the calling
// statement (no Function Scan of it), so that the range reaches values_packed's
// (variable_id, day) index as bounds on day and a caller's variable_id reaches it too:
// packed days outside the range are not read. (A SECURITY DEFINER, STRICT or VOLATILE
// function would not be inlined.)
func TestValuesBetweenPrunesPackedDays(t *testing.T) {
	tn := newTenant(t, 23)
	pack(t)
	from := time.UnixMilli(tn.Dots[0].TS).UTC().Truncate(day)
	q := fmt.Sprintf(`EXPLAIN (COSTS OFF) SELECT time_bucket('1 hour', ts), avg(value)
		FROM sensor.values_between(%s, %s) WHERE variable_id = '%s' GROUP BY 1`,
		tsLit(from.UnixMilli()), tsLit(from.Add(day).UnixMilli()), tn.VarID)
	rows, _ := tn.Conn.Query(context.Background(), q)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	if strings.Contains(plan, "Function Scan on values_between") {
		t.Fatalf("values_between was not inlined:\n%s", plan)
	}
	pruned := false
	for i, l := range lines {
		if strings.Contains(l, "values_packed_variable_day_idx") && i+1 < len(lines) {
			c := lines[i+1]
			pruned = strings.Contains(c, "Index Cond") && strings.Contains(c, "(day >=") && strings.Contains(c, "(day <=") &&
				strings.Contains(c, "variable_id =")
		}
	}
	if !pruned {
		t.Fatalf("values_packed is not read by variable and day bounds:\n%s", plan)
	}
}

// TestValuesBetweenRefusals: NULL and inverted bounds are refused naming the bound,
// before any row is read, whether the bounds are constants or computed (now()); only
// the account roles' group may execute the functions of schema sensor.
func TestValuesBetweenRefusals(t *testing.T) {
	tn := newTenant(t, 29)
	ctx := context.Background()
	for _, c := range []struct{ from, to, code, says string }{
		{"NULL", "now()", "22004", `"from" and "to" must be timestamps, not NULL`},
		{"now()", "NULL", "22004", `not NULL`},
		{"NULL", "NULL", "22004", `not NULL`},
		{"'2026-01-02'", "'2026-01-01'", "22023", `"from" (2026-01-02 00:00:00+00) is after "to" (2026-01-01 00:00:00+00)`},
		{"now()", "now() - interval '1 day'", "22023", `is after "to"`},
	} {
		_, err := tn.Conn.Exec(ctx, fmt.Sprintf(`SELECT count(*) FROM sensor.values_between(%s, %s)`, c.from, c.to))
		if code := sqlstate(err); code != c.code || !strings.Contains(err.Error(), c.says) {
			t.Errorf("values_between(%s, %s): %v (SQLSTATE %q), want %s saying %s", c.from, c.to, err, code, c.code, c.says)
		}
	}
	var grantees []string
	err := env.DB.Pool.QueryRow(ctx, `SELECT array_agg(g ORDER BY g) FROM (
		SELECT p.proname || ' ' || a.grantee::regrole::text AS g
		FROM pg_proc p CROSS JOIN LATERAL aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
		WHERE p.pronamespace = 'sensor'::regnamespace AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner) x`).
		Scan(&grantees)
	want := []string{"values_between sensor_reader", "values_range_checked sensor_reader"}
	if err != nil || strings.Join(grantees, ",") != strings.Join(want, ",") {
		t.Errorf("EXECUTE on schema sensor's functions: %v (%v), want %v", grantees, err, want)
	}
}
