package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sensordata/sensorapi/cmd/internal/benchharness"
	"github.com/sensordata/sensorapi/pkg/config"
	"github.com/sensordata/sensorapi/pkg/store"
	"github.com/sensordata/sensorapi/pkg/values"
	"github.com/sensordata/sensorapi/querybuilder"
)

// The rollup tiers the tiers benchmark reports on, finest first. Only those that exist
// in the migrated schema are used (the set grows with the query compiler), and any other
// hypertable but "values" is reported too.
var rollupTiers = []string{"value_minutes", "value_quarters", "value_days"}

// tierSet is one of issue 17's data sets, written by `sensorapi load` into an account of
// its own: Variables series of Points values 10 s apart from start.
type tierSet struct {
	account    int64
	token      string
	ids        []string // public ids, var-0, var-1, ... (the request order)
	keys       []int64  // the same variables' internal keys, for the naive SQL
	start, end time.Time
	variables  int
	points     int // per variable
}

// tierCase is one of issue 17's cases: a request through HTTP next to the SQL an
// operator would write by hand over the raw values for the same answer.
type tierCase struct {
	name   string
	set    *tierSet
	path   string
	body   string
	naive  string  // ? placeholders: the variables' keys, start, end
	target float64 // naive / service, at least
	// answer normalizes the HTTP response to one list of numbers per variable, in the
	// order the naive statement's columns (after variable_id) and rows give them.
	answer func([]byte) ([][]float64, error)
}

// benchTiers is issue 17's benchmark: the week of 100 variables and the year of one,
// written with `sensorapi load`; cases A-E through HTTP against the naive SQL over raw
// values; the tiers' size on disk per raw point. scale < 1 loads that fraction of each
// series (a quick trial; the targets are for 1).
func benchTiers(ctx context.Context, h *benchharness.Harness, scale float64) error {
	tables, err := tierTables(ctx, h)
	if err != nil {
		return err
	}
	fmt.Printf("tiers (issue 17): rollup tables %s\n", strings.Join(tables, ", "))
	all := append([]string{`"values"`}, tables...)
	before, err := tableSizes(ctx, h, all)
	if err != nil {
		return err
	}
	week, err := loadTierSet(ctx, h, "tiers_week", 100, scaled(7*24*360, scale), time.Date(2025, 3, 3, 0, 0, 0, 0, time.UTC))
	if err != nil {
		return err
	}
	year, err := loadTierSet(ctx, h, "tiers_year", 1, scaled(365*24*360, scale), time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		return err
	}
	t0 := time.Now()
	if _, err := h.DB.ExecContext(ctx, "VACUUM ANALYZE "+strings.Join(all, ", ")); err != nil {
		return err
	}
	fmt.Printf("  VACUUM ANALYZE %s: %.0fs\n", strings.Join(all, ", "), time.Since(t0).Seconds())
	after, err := tableSizes(ctx, h, all)
	if err != nil {
		return err
	}

	if err := runTierCases(ctx, h, tierCases(&week, &year, rowsWhere), 1); err != nil {
		return err
	}
	raw := float64(week.variables*week.points + year.variables*year.points)
	fmt.Printf("  size on disk per raw point (hypertable_size growth over the %.0f points loaded, after VACUUM):\n", raw)
	for i, t := range all {
		grown := after[i] - before[i]
		fmt.Printf("    %-16s %8.1f MiB %7.2f bytes/point (%5.1f%% of raw)\n", strings.Trim(t, `"`),
			float64(grown)/(1<<20), float64(grown)/raw, 100*float64(grown)/float64(after[0]-before[0]))
	}
	return benchPacked(ctx, h, week, year)
}

// benchPacked packs every loaded day (issue 32) and runs the cases again, next to the
// naive SQL over both layouts, then reports the bytes per point of every table.
func benchPacked(ctx context.Context, h *benchharness.Harness, week, year tierSet) error {
	t0 := time.Now()
	p := &values.Packer{Store: &values.Store{Pool: h.DB.Pool}, After: config.DefaultPackAfter, Log: slog.Default(),
		Workers: values.DefaultWorkers}
	res, err := p.Run(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("  packed (issue 32): %d days in %.0fs, %d emptied chunks dropped; the cases again, the naive SQL\n"+
		"  now reading both layouts (rows UNION ALL packed_values):\n", res.Days, time.Since(t0).Seconds(), len(res.Chunks))
	if err := runTierCases(ctx, h, tierCases(&week, &year, bothWhere), 2); err != nil {
		return err
	}
	r, err := values.Measure(ctx, h.DB.Pool)
	if err != nil {
		return err
	}
	fmt.Println("  bytes per raw point after packing (sensorapi storage report, every point in the database):")
	if err := r.Print(os.Stdout); err != nil {
		return err
	}
	fmt.Println()
	return nil
}

// The naive statements' FROM: what an operator would write in psql over "values"
// (three placeholders: the variables' keys, start, end), and over both layouts once
// days are packed (the same three twice).
const (
	rowsWhere = `FROM "values" WHERE variable_id = ANY(?) AND ts BETWEEN ? AND ? `
	bothWhere = `FROM (SELECT variable_id, ts, value FROM "values" WHERE variable_id = ANY(?) AND ts BETWEEN ? AND ?
		UNION ALL SELECT variable_id, ts, value FROM packed_values(?, ?, ?)) x `
)

// tierCases are issue 17's cases A-E on the week and the year sets.
func tierCases(week, year *tierSet, where string) []tierCase {
	return append([]tierCase{
		{name: "A. E8 1H mean, Asia/Kathmandu, 100 var × week", set: week, target: 20,
			path: "/api/v1.6/data/stats/resample", body: resampleBody(*week, "mean", "1H"), answer: resampleAnswer,
			naive: `SELECT variable_id, time_bucket('1 hour', ts, 'Asia/Kathmandu') AS hour, avg(value) ` + where +
				`GROUP BY variable_id, hour ORDER BY variable_id, hour DESC`},
		{name: "B. E7 count…max+std, 1 var × year", set: year, target: 50,
			path: "/api/v2.0/data/statistics", answer: statisticsAnswer("count", "sum", "mean", "min", "max", "std"),
			body: statisticsBody(*year, `,"aggregations":["count","sum","mean","min","max","std"]`),
			naive: `SELECT variable_id, count(*), sum(value), avg(value), min(value), max(value), stddev_samp(value) ` + where +
				`GROUP BY variable_id`},
		{name: "C. E8 1D max, Asia/Kathmandu, 1 var × year", set: year, target: 20,
			path: "/api/v1.6/data/stats/resample", body: resampleBody(*year, "max", "1D"), answer: resampleAnswer,
			naive: `SELECT variable_id, time_bucket('1 day', ts, 'Asia/Kathmandu') AS day, max(value) ` + where +
				`GROUP BY variable_id, day ORDER BY variable_id, day DESC`},
		{name: "D. E9 mean, 1 var × year", set: year, target: 50,
			path: "/api/v1.6/data/stats/aggregation", answer: resampleAnswer,
			body: fmt.Sprintf(`{"variables":%s,"aggregation":"mean","start":%d,"end":%d}`,
				jsonIDs(*year), year.start.UnixMilli(), year.end.UnixMilli()),
			naive: `SELECT variable_id, max(ts), avg(value) ` + where + `GROUP BY variable_id`},
		{name: "E. E7 all 11, 100 var × week", set: week, target: 1.5,
			path: "/api/v2.0/data/statistics", body: statisticsBody(*week, ""),
			answer: statisticsAnswer("first", "last", "min", "max", "count", "sum", "mean", "std", "p25", "p50", "p75"),
			naive: `SELECT variable_id, first(value, ts), last(value, ts), min(value), max(value), count(*), sum(value), avg(value),
				stddev_samp(value), percentile_cont(array[.25, .5, .75]) WITHIN GROUP (ORDER BY value) ` + where +
				`GROUP BY variable_id`},
	}, signalCases(week, year, where)...)
}

// signalCases are the time-aware aggregations (API.md §20; issue 42's targets) next to
// the same answers written by hand with lead() and lag() over the raw values: each
// interval split at the local day (or hour) edges it crosses, or each value's
// contribution to a counter's increase. The ranges run from the first value to the
// last, so no value outside them shapes an edge.
func signalCases(week, year *tierSet, where string) []tierCase {
	// the instant a bucket key starts: local midnight of a Europe/Berlin day, or the hour
	berlin := func(key string) string { return "((" + key + ") AT TIME ZONE 'Europe/Berlin')" }
	hour := func(key string) string { return key }
	twa := func(edge func(string) string, step string) string {
		return `WITH x AS (SELECT variable_id, ts, value, lead(ts) OVER w AS ts1 ` + where +
			`WINDOW w AS (PARTITION BY variable_id ORDER BY ts)),
			p AS (SELECT x.variable_id, g.b, x.value, date_part('epoch', least(x.ts1, ` + edge("g.b + interval '"+step+"'") + `)
			        - greatest(x.ts, ` + edge("g.b") + `)) AS dur
			  FROM x CROSS JOIN LATERAL generate_series(` + keyOf("x.ts", step) + `, ` + keyOf("x.ts1 - interval '1 microsecond'", step) +
			`, interval '` + step + `') g(b)
			  WHERE x.ts1 IS NOT NULL)
			SELECT variable_id, ` + edge("b") + `, sum(value * dur) / sum(dur) FROM p GROUP BY variable_id, b ORDER BY variable_id, b DESC`
	}
	return []tierCase{
		{name: "F. E8 1D twa, Europe/Berlin, 1 var × year", set: year, target: 20,
			path: "/api/v1.6/data/stats/resample", body: signalBody(*year, "twa", "1D"), answer: resampleAnswer,
			naive: twa(berlin, "1 day")},
		{name: "G. E8 1D increase, Europe/Berlin, 1 var × year", set: year, target: 20,
			path: "/api/v1.6/data/stats/resample", body: signalBody(*year, "increase", "1D"), answer: resampleAnswer,
			naive: `SELECT variable_id, ` + berlin(keyOf("ts", "1 day")) + ` AS day,
				sum(CASE WHEN pv IS NULL THEN 0 WHEN value >= pv THEN value - pv ELSE value END)
				FROM (SELECT variable_id, ts, value, lag(value) OVER w AS pv ` + where +
				`WINDOW w AS (PARTITION BY variable_id ORDER BY ts)) x GROUP BY 1, 2 ORDER BY 1, 2 DESC`},
		{name: "H. E8 1H twa, Europe/Berlin, 100 var × week", set: week, target: 10,
			path: "/api/v1.6/data/stats/resample", body: signalBody(*week, "twa", "1H"), answer: resampleAnswer,
			naive: twa(hour, "1 hour")},
	}
}

// keyOf is the bucket key of a timestamptz expression: its Europe/Berlin day (a local
// timestamp) or its hour.
func keyOf(ts, step string) string {
	if step == "1 day" {
		return "date_trunc('day', (" + ts + ") AT TIME ZONE 'Europe/Berlin')"
	}
	return "time_bucket('1 hour', " + ts + ")"
}

func signalBody(s tierSet, agg, period string) string {
	return fmt.Sprintf(`{"variables":%s,"aggregation":"%s","period":"%s","start":%d,"end":%d,"tz":"Europe/Berlin"}`,
		jsonIDs(s), agg, period, s.start.UnixMilli(), s.end.UnixMilli())
}

// runTierCases checks and times each case; the naive statement's placeholders are the
// set's keys, start and end, repeated.
func runTierCases(ctx context.Context, h *benchharness.Harness, cases []tierCase, repeat int) error {
	fmt.Printf("  median of ≥ %d runs after a warm-up, HTTP and naive SQL alternated; the naive SQL runs on the\n"+
		"  harness's own pool (jit off, as the server's) and its answer is checked against the server's first\n", queryRuns)
	fmt.Printf("  %-46s %10s %10s %8s %7s\n", "case", "service", "naive SQL", "ratio", "target")
	for _, c := range cases {
		var args []any
		for range repeat {
			args = append(args, c.set.keys, c.set.start, c.set.end)
		}
		naive := querybuilder.Query{SQL: c.naive, Args: args}
		if err := checkTierCase(ctx, h, c, naive); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		viaHTTP, floor, err := benchQuery(ctx, h, c.set.token, queryCase{name: c.name, path: c.path, body: c.body,
			compile: func() (querybuilder.Query, error) { return naive, nil }})
		if err != nil {
			return err
		}
		ratio := ms(floor) / ms(viaHTTP)
		verdict := "PASS"
		if ratio < c.target {
			verdict = "MISS"
		}
		fmt.Printf("  %-46s %7.1f ms %7.1f ms %7.1f× %6.1f× %s\n", c.name, ms(viaHTTP), ms(floor), ratio, c.target, verdict)
	}

	return nil
}

// tierTables lists the rollup tiers that exist: rollupTiers in their order (to_regclass),
// then any other hypertable but "values".
func tierTables(ctx context.Context, h *benchharness.Harness) ([]string, error) {
	var out []string
	for _, t := range rollupTiers {
		var exists bool
		if err := h.DB.NewRaw(`SELECT to_regclass(?) IS NOT NULL`, t).Scan(ctx, &exists); err != nil {
			return nil, err
		}
		if exists {
			out = append(out, t)
		}
	}
	var others []string
	if err := h.DB.NewRaw(`SELECT hypertable_name FROM timescaledb_information.hypertables
		WHERE hypertable_schema = current_schema() AND hypertable_name <> 'values' ORDER BY 1`).Scan(ctx, &others); err != nil {
		return nil, err
	}
	for _, t := range others {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// tableSizes is hypertable_size of each table (names as SQL identifiers).
func tableSizes(ctx context.Context, h *benchharness.Harness, tables []string) ([]int64, error) {
	out := make([]int64, len(tables))
	for i, t := range tables {
		if err := h.DB.NewRaw(`SELECT coalesce(hypertable_size(?::regclass), 0)`, t).Scan(ctx, &out[i]); err != nil {
			return nil, fmt.Errorf("size of %s: %w", t, err)
		}
	}
	return out, nil
}

// loadTierSet creates account bench_<name> and fills it by running `sensorapi load` (the
// server's binary) against the harness's database: one device of variables series.
func loadTierSet(ctx context.Context, h *benchharness.Harness, name string, variables, points int, start time.Time) (tierSet, error) {
	acct, tok, err := h.NewAccount(ctx, name)
	if err != nil {
		return tierSet{}, err
	}
	const interval = 10 * time.Second
	s := tierSet{account: acct, token: tok, start: start, end: start.Add(time.Duration(points-1) * interval),
		variables: variables, points: points}
	args := []string{"load", "--account", "bench_" + name, "--devices", "1", "--variables", strconv.Itoa(variables),
		"--points", strconv.Itoa(points), "--interval", interval.String(), "--start", start.Format(time.RFC3339)}
	fmt.Printf("  sensorapi %s\n", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, h.Bin, args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+h.DSN, "SENSORAPI_LOG_LEVEL=warn")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr // progress lines; the report stays on stdout
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		return s, fmt.Errorf("sensorapi load: %w", err)
	}
	fmt.Printf("    %d points in %.0fs (%.0f points/s)\n", variables*points, time.Since(t0).Seconds(),
		float64(variables*points)/time.Since(t0).Seconds())
	rows, err := h.DB.QueryContext(ctx, `SELECT public_id, id FROM variables WHERE account_id = ?
		ORDER BY substring(label FROM '[0-9]+$')::int`, acct)
	if err != nil {
		return s, err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var id string
		var key int64
		if err := rows.Scan(&id, &key); err != nil {
			return s, err
		}
		s.ids, s.keys = append(s.ids, id), append(s.keys, key)
	}
	if err := rows.Err(); err != nil {
		return s, err
	}
	if len(s.ids) != variables {
		return s, fmt.Errorf("sensorapi load made %d variables, want %d", len(s.ids), variables)
	}
	return s, nil
}

func scaled(points int, scale float64) int { return max(2, int(math.Round(float64(points)*scale))) }

func jsonIDs(s tierSet) string {
	b, _ := json.Marshal(s.ids)
	return string(b)
}

func resampleBody(s tierSet, agg, period string) string {
	return fmt.Sprintf(`{"variables":%s,"aggregation":"%s","period":"%s","start":%d,"end":%d,"tz":"Asia/Kathmandu"}`,
		jsonIDs(s), agg, period, s.start.UnixMilli(), s.end.UnixMilli())
}

func statisticsBody(s tierSet, aggs string) string {
	vars := make([]string, len(s.ids))
	for i, id := range s.ids {
		vars[i] = fmt.Sprintf(`{"variable":%q}`, id)
	}
	return fmt.Sprintf(`{"start":%d,"end":%d,"variables":[%s]%s}`, s.start.UnixMilli(), s.end.UnixMilli(), strings.Join(vars, ","), aggs)
}

// resampleAnswer flattens E8 and E9 answers (join_dataframes false): per variable,
// ts, value, ts, value, ... in the answer's (descending) order.
func resampleAnswer(body []byte) ([][]float64, error) {
	var r struct{ Results [][][2]*float64 }
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, err
	}
	out := make([][]float64, len(r.Results))
	for i, series := range r.Results {
		for _, p := range series {
			out[i] = append(out[i], num(p[0]), num(p[1]))
		}
	}
	return out, nil
}

// statisticsAnswer flattens E7 answers: per variable, the values of aggs in that order
// (p25, p50 and p75 are one array column on the naive side: the same three numbers).
func statisticsAnswer(aggs ...string) func([]byte) ([][]float64, error) {
	return func(body []byte) ([][]float64, error) {
		var r struct {
			Results []struct {
				Code    int
				Results map[string]struct{ Value *float64 }
			}
		}
		if err := json.Unmarshal(body, &r); err != nil {
			return nil, err
		}
		out := make([][]float64, len(r.Results))
		for i, v := range r.Results {
			if v.Code != 200 {
				return nil, fmt.Errorf("variable %d: code %d", i, v.Code)
			}
			for _, a := range aggs {
				out[i] = append(out[i], num(v.Results[a].Value))
			}
		}
		return out, nil
	}
}

func num(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

// checkTierCase runs both sides once and compares their answers (relative 1e-9): the
// naive statement must be the same question, or its time means nothing.
func checkTierCase(ctx context.Context, h *benchharness.Harness, c tierCase, naive querybuilder.Query) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL+c.path, bytes.NewReader([]byte(c.body)))
	if err != nil {
		return err
	}
	req.Header.Set("X-Auth-Token", c.set.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return fmt.Errorf("read the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d %.300s", resp.StatusCode, body)
	}
	got, err := c.answer(body)
	if err != nil {
		return fmt.Errorf("decode the answer: %w", err)
	}
	want, err := naiveAnswer(ctx, h, c.set, naive)
	if err != nil {
		return fmt.Errorf("naive SQL: %w", err)
	}
	if len(got) != len(want) {
		return fmt.Errorf("answer for %d variables, naive SQL for %d", len(got), len(want))
	}
	for i := range got {
		if len(got[i]) != len(want[i]) {
			return fmt.Errorf("variable %d: %d numbers in the answer, %d from the naive SQL", i, len(got[i]), len(want[i]))
		}
		for j := range got[i] {
			if g, w := got[i][j], want[i][j]; !(g == w || math.IsNaN(g) && math.IsNaN(w) || math.Abs(g-w) <= 1e-9*math.Max(math.Abs(g), math.Abs(w))) {
				return fmt.Errorf("variable %d, number %d: answer %v, naive SQL %v", i, j, g, w)
			}
		}
	}
	return nil
}

// naiveAnswer runs the naive statement and gives, per variable in the set's order,
// the numbers of its rows after variable_id (timestamps as epoch ms, arrays spread).
func naiveAnswer(ctx context.Context, h *benchharness.Harness, s *tierSet, q querybuilder.Query) ([][]float64, error) {
	rows, err := h.DB.QueryContext(ctx, q.SQL, store.BindArgs(q.Args)...)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	out := make([][]float64, len(s.keys))
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		k := slices.Index(s.keys, vals[0].(int64))
		if k < 0 {
			return nil, fmt.Errorf("variable_id %v not requested", vals[0])
		}
		for _, v := range vals[1:] {
			switch v := v.(type) {
			case int64:
				out[k] = append(out[k], float64(v))
			case float64:
				out[k] = append(out[k], v)
			case time.Time:
				out[k] = append(out[k], float64(v.UnixMilli()))
			case nil:
				out[k] = append(out[k], math.NaN())
			case string, []byte: // a float8[] in its text form: {1.5,2,3}
				for _, f := range strings.Split(strings.Trim(fmt.Sprintf("%s", v), "{}"), ",") {
					x, err := strconv.ParseFloat(f, 64)
					if err != nil {
						return nil, fmt.Errorf("array element %q: %w", f, err)
					}
					out[k] = append(out[k], x)
				}
			default:
				return nil, fmt.Errorf("column of type %T", v)
			}
		}
	}
	return out, rows.Err()
}
