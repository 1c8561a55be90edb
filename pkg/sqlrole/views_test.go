package sqlrole_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sensordata/sensorapi/pkg/auth"
	"github.com/sensordata/sensorapi/pkg/sqlrole"
	"github.com/sensordata/sensorapi/pkg/values"
)

const day = 24 * time.Hour

// dot is one value as an account wrote it.
type dot struct {
	TS      int64 // ms
	Value   float64
	Context string // JSON text, "" for none
}

// tenant is an account with one device "probe", one variable "t", its dots, and a
// connection of its SQL role.
type tenant struct {
	Name, Token        string
	DeviceID, VarID    string // public ids
	Dots               []dot  // in timestamp order
	Role, RolePassword string
	Conn               *pgx.Conn
}

// newTenant creates an account and writes, through the HTTP API, two old days (to be
// packed) and the last 50 minutes of dots; salt makes its values its own.
func newTenant(t *testing.T, salt float64) *tenant {
	t.Helper()
	return newTenantWith(t, salt, 30*time.Second)
}

// newTenantWith is newTenant with the role's statement timeout.
func newTenantWith(t *testing.T, salt float64, timeout time.Duration) *tenant {
	t.Helper()
	ctx := context.Background()
	tn := &tenant{Name: fmt.Sprintf("sqlrole_%s_%d", t.Name(), int(salt))}
	var err error
	if tn.Token, err = auth.CreateAccount(ctx, env.DB, tn.Name); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	old := now.Add(-10 * day).Truncate(day)
	var body []map[string]any
	add := func(ts time.Time, i int) {
		d := dot{TS: ts.UnixMilli(), Value: salt + float64(i%97)*1.25 - float64(i%13)*0.5}
		m := map[string]any{"timestamp": d.TS, "value": d.Value}
		if i%50 == 0 {
			d.Context = fmt.Sprintf(`{"i": %d}`, i)
			m["context"] = map[string]any{"i": i}
		}
		tn.Dots = append(tn.Dots, d)
		body = append(body, m)
	}
	for i := range 2 * 24 * 60 / 7 { // two days, every 7 minutes and a few seconds
		add(old.Add(time.Duration(i)*7*time.Minute+time.Duration(i%11)*time.Second), i)
	}
	for i := range 150 { // the last 50 minutes, every 20 s
		add(now.Add(-50*time.Minute+time.Duration(i)*20*time.Second).Truncate(time.Millisecond), i)
	}
	c := env.Client(t).As(tn.Token)
	if r := c.Post("/api/v1.6/devices/probe/t/values", body); r.Status != 200 && r.Status != 201 {
		t.Fatalf("post: %d %s", r.Status, r.Body)
	}
	err = env.DB.NewRaw(`SELECT d.public_id, v.public_id FROM variables v JOIN devices d ON d.id = v.device_id
		JOIN accounts a ON a.id = v.account_id WHERE a.name = ? AND d.label = 'probe' AND v.label = 't'`, tn.Name).
		Scan(ctx, &tn.DeviceID, &tn.VarID)
	if err != nil {
		t.Fatal(err)
	}
	tn.connect(t, sqlrole.Spec{Account: tn.Name, StatementTimeout: timeout, Connections: 3})
	return tn
}

// connect creates the tenant's SQL role and connects with it.
func (tn *tenant) connect(t *testing.T, s sqlrole.Spec) {
	t.Helper()
	ctx := context.Background()
	var err error
	if tn.Role, tn.RolePassword, err = sqlrole.Create(ctx, env.DB.Pool, s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sqlrole.Drop(context.Background(), env.DB.Pool, tn.Role) })
	dsn, err := sqlrole.ConnString(env.DSN, tn.Role, tn.RolePassword)
	if err != nil {
		t.Fatal(err)
	}
	if tn.Conn, err = pgx.Connect(ctx, dsn); err != nil {
		t.Fatalf("connect as %s: %v", tn.Role, err)
	}
	t.Cleanup(func() { _ = tn.Conn.Close(context.Background()) })
}

// pack packs every day past two days (the tenants' old days) and says how many it packed.
func pack(t *testing.T) int {
	t.Helper()
	res, err := (&values.Packer{Store: &values.Store{Pool: env.DB.Pool}, After: 2 * day, Log: env.Log}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res.Days
}

// TestViewsShowEachRoleItsOwnAccount: two accounts with the same labels, their old days
// packed, each role sees exactly its own account's devices, variables, values (rows and
// packed days, contexts included) and tier buckets (tiles, packed days rolled up, and
// the raw buckets past the rollup mark, before and after the catch-up job builds them).
func TestViewsShowEachRoleItsOwnAccount(t *testing.T) {
	a, b := newTenant(t, 1), newTenant(t, 5000)
	if n := pack(t); n < 4 {
		t.Fatalf("packed %d days, want the 2 old days of both accounts", n)
	}
	for _, step := range []string{"before catch-up", "after catch-up"} {
		for _, tn := range []*tenant{a, b} {
			checkDevicesAndVariables(t, tn)
			checkValues(t, step, tn)
			for _, tier := range []struct {
				view  string
				width time.Duration
			}{{"values_1m", time.Minute}, {"values_15m", 15 * time.Minute}, {"values_1d", day}} {
				checkTier(t, step, tn, tier.view, tier.width)
			}
		}
		if _, err := (&values.Store{Pool: env.DB.Pool}).CatchUpNow(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

func checkDevicesAndVariables(t *testing.T, tn *tenant) {
	t.Helper()
	ctx := context.Background()
	var ids []string
	rows, _ := tn.Conn.Query(ctx, `SELECT id || '/' || label FROM sensor.devices ORDER BY 1`)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || !slices.Equal(ids, []string{tn.DeviceID + "/probe"}) {
		t.Fatalf("%s: sensor.devices: %v %v, want only %s/probe", tn.Name, ids, err, tn.DeviceID)
	}
	last := tn.Dots[len(tn.Dots)-1]
	var id, dev, devLabel string
	var lv float64
	var lts time.Time
	err = tn.Conn.QueryRow(ctx, `SELECT id, device_id, device_label, last_value, last_timestamp FROM sensor.variables`).
		Scan(&id, &dev, &devLabel, &lv, &lts)
	if err != nil || id != tn.VarID || dev != tn.DeviceID || devLabel != "probe" || lv != last.Value || lts.UnixMilli() != last.TS {
		t.Fatalf("%s: sensor.variables: %s %s %s %v %v (%v), want %s %s probe %v %v",
			tn.Name, id, dev, devLabel, lv, lts, err, tn.VarID, tn.DeviceID, last.Value, last.TS)
	}
	var n int
	if err := tn.Conn.QueryRow(ctx, `SELECT count(*) FROM sensor.variables`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%s: %d variables (%v), want its own one", tn.Name, n, err)
	}
}

func checkValues(t *testing.T, step string, tn *tenant) {
	t.Helper()
	rows, _ := tn.Conn.Query(context.Background(), `SELECT variable_id, device_label, variable_label, ts, value,
		coalesce(context::text, '') FROM sensor.values ORDER BY ts`)
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (dot, error) {
		var v, dl, vl string
		var ts time.Time
		var d dot
		err := r.Scan(&v, &dl, &vl, &ts, &d.Value, &d.Context)
		if err == nil && (v != tn.VarID || dl != "probe" || vl != "t") {
			err = fmt.Errorf("row of %s/%s/%s", v, dl, vl)
		}
		d.TS = ts.UnixMilli()
		return d, err
	})
	if err != nil {
		t.Fatalf("%s %s: sensor.values: %v", tn.Name, step, err)
	}
	if len(got) != len(tn.Dots) {
		t.Fatalf("%s %s: sensor.values has %d rows, the account wrote %d", tn.Name, step, len(got), len(tn.Dots))
	}
	for i := range got {
		if got[i] != tn.Dots[i] {
			t.Fatalf("%s %s: sensor.values row %d: %+v, written %+v", tn.Name, step, i, got[i], tn.Dots[i])
		}
	}
}

// bucket is one row of a tier view.
type bucket struct {
	Start                            int64
	Count                            int64
	Sum, Min, Max, Mean, First, Last float64
}

// model rolls the tenant's dots up into buckets of width w (UTC-aligned).
func (tn *tenant) model(w time.Duration) []bucket {
	var out []bucket
	for _, d := range tn.Dots {
		s := d.TS - d.TS%w.Milliseconds()
		if len(out) == 0 || out[len(out)-1].Start != s {
			out = append(out, bucket{Start: s, Min: d.Value, Max: d.Value, First: d.Value})
		}
		b := &out[len(out)-1]
		b.Count++
		b.Sum += d.Value
		b.Min, b.Max, b.Last = min(b.Min, d.Value), max(b.Max, d.Value), d.Value
		b.Mean = b.Sum / float64(b.Count)
	}
	return out
}

func checkTier(t *testing.T, step string, tn *tenant, view string, w time.Duration) {
	t.Helper()
	rows, _ := tn.Conn.Query(context.Background(), `SELECT variable_id, bucket, count, sum, min, max, mean, first, last
		FROM sensor.`+view+` ORDER BY bucket`)
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (bucket, error) {
		var b bucket
		var id string
		var start time.Time
		err := r.Scan(&id, &start, &b.Count, &b.Sum, &b.Min, &b.Max, &b.Mean, &b.First, &b.Last)
		if err == nil && id != tn.VarID {
			err = fmt.Errorf("a bucket of variable %s", id)
		}
		b.Start = start.UnixMilli()
		return b, err
	})
	want := tn.model(w)
	if err != nil || len(got) != len(want) {
		t.Fatalf("%s %s: sensor.%s: %d buckets (%v), the dots make %d", tn.Name, step, view, len(got), err, len(want))
	}
	near := func(x, y float64) bool { return math.Abs(x-y) <= 1e-9*max(1, math.Abs(y)) }
	for i, g := range got {
		m := want[i]
		if g.Start != m.Start || g.Count != m.Count || !near(g.Sum, m.Sum) || g.Min != m.Min || g.Max != m.Max ||
			!near(g.Mean, m.Mean) || g.First != m.First || g.Last != m.Last {
			t.Fatalf("%s %s: sensor.%s bucket %d: %+v, the dots make %+v", tn.Name, step, view, i, g, m)
		}
	}
}

// TestGrafanaMacrosMatchResample: the queries Grafana's PostgreSQL data source sends for
// a time-series panel ($__timeGroupAlias(ts, 1h), $__timeFilter(ts), expanded as Grafana
// expands them) give the hourly means that E8 (resample, 1H mean) answers, over packed
// days and rows.
func TestGrafanaMacrosMatchResample(t *testing.T) {
	tn := newTenant(t, 3)
	pack(t)
	from, to := tn.Dots[0].TS+3_600_000, tn.Dots[len(tn.Dots)-1].TS
	r := env.Client(t).As(tn.Token).Post("/api/v1.6/data/stats/resample/", map[string]any{
		"variables": []string{tn.VarID}, "aggregation": "mean", "period": "1H", "start": from, "end": to})
	if r.Status != 200 {
		t.Fatalf("resample: %d %s", r.Status, r.Body)
	}
	var body struct {
		Results [][][2]*float64 `json:"results"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil || len(body.Results) != 1 {
		t.Fatalf("resample: %v %s", err, r.Body)
	}
	api := map[int64]float64{}
	for _, b := range body.Results[0] {
		if b[1] != nil {
			api[int64(*b[0])] = *b[1]
		}
	}
	rfc := func(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z") }
	// $__timeFilter(ts) on the view, and $__timeFrom(), $__timeTo() as the range function's bounds
	for _, q := range []string{
		fmt.Sprintf(`SELECT floor(extract(epoch from ts)/3600)*3600 AS "time", avg(value) AS "t"
		FROM sensor.values
		WHERE ts BETWEEN '%s' AND '%s' AND variable_id = '%s'
		GROUP BY 1 ORDER BY 1`, rfc(from), rfc(to), tn.VarID),
		fmt.Sprintf(`SELECT floor(extract(epoch from ts)/3600)*3600 AS "time", avg(value) AS "t"
		FROM sensor.values_between('%s', '%s')
		WHERE variable_id = '%s'
		GROUP BY 1 ORDER BY 1`, rfc(from), rfc(to), tn.VarID),
	} {
		checkHours(t, tn, q, api)
	}
}

// checkHours runs q (an hour's epoch seconds and its mean) as the tenant's role and
// compares it with resample's answer (hour's epoch ms → mean).
func checkHours(t *testing.T, tn *tenant, q string, api map[int64]float64) {
	t.Helper()
	rows, _ := tn.Conn.Query(context.Background(), q)
	type point struct {
		T    float64
		Mean float64
	}
	sql, err := pgx.CollectRows(rows, pgx.RowToStructByPos[point])
	if err != nil {
		t.Fatal(err)
	}
	if len(sql) != len(api) || len(sql) < 40 {
		t.Fatalf("Grafana's query gives %d hours, resample %d (want the same, ≥ 40): %s", len(sql), len(api), q)
	}
	for _, p := range sql {
		want, ok := api[int64(p.T)*1000]
		if !ok || math.Abs(p.Mean-want) > 1e-9*max(1, math.Abs(want)) {
			t.Fatalf("hour %v: Grafana's query %v, resample %v (%v): %s", p.T, p.Mean, want, ok, q)
		}
	}
}

// grafana is what the time-series and stat panels of docs/sql.md send; the test above
// checks the first one's numbers, this one that every documented query runs as a role.
var grafana = []string{
	`SELECT floor(extract(epoch from ts)/3600)*3600 AS "time", device_label || '/' || variable_label AS metric, avg(value)
	 FROM sensor.values WHERE ts BETWEEN now() - interval '30 days' AND now() GROUP BY 1, 2 ORDER BY 1`,
	`SELECT device_label, label, last_value, last_timestamp FROM sensor.variables ORDER BY last_timestamp DESC NULLS LAST`,
	`SELECT last_value FROM sensor.variables WHERE device_label = 'probe' AND label = 't'`,
	`SELECT time_bucket('1 hour', ts) AS "time", avg(value) FROM sensor.values
	 WHERE variable_id = (SELECT id FROM sensor.variables LIMIT 1) AND ts > now() - interval '30 days' GROUP BY 1 ORDER BY 1`,
	`SELECT bucket AS "time", mean FROM sensor.values_1d WHERE device_label = 'probe' AND variable_label = 't'
	 AND bucket BETWEEN now() - interval '1 year' AND now() ORDER BY 1`,
	`SELECT time_bucket('3600s', ts) AS "time", avg(value) AS "t"
	 FROM sensor.values_between('2026-11-20T10:00:00Z', '2026-11-27T10:00:00Z')
	 WHERE device_label = 'probe' AND variable_label = 't' GROUP BY 1 ORDER BY 1`,
	`SELECT avg(value) FROM sensor.values_between(now() - interval '6 hours', now())
	 WHERE device_label = 'probe' AND variable_label = 't'`,
}

func TestDocumentedQueriesRunAsARole(t *testing.T) {
	tn := newTenant(t, 7)
	for _, q := range grafana {
		rows, err := tn.Conn.Query(context.Background(), q)
		if err == nil {
			for rows.Next() {
			}
			err = rows.Err()
		}
		if err != nil {
			t.Errorf("%s\n%v", q, err)
		}
	}
}
