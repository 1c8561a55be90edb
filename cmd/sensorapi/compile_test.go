package main_test

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// TestCompilePrintsRunnableSQL: the printed statement runs as is and resolves the
// account and labels itself.
func TestCompilePrintsRunnableSQL(t *testing.T) {
	bin := buildBinary(t)
	env.Seed(t, env.AdminToken, "boiler", "temp'x", []testenv.Point{{TS: 1000, Value: 2}, {TS: 2000, Value: 4}, {TS: 3000, Value: 9}})
	cmd := exec.Command(bin, "compile", "--endpoint", "statistics")
	cmd.Stdin = strings.NewReader(`{"start":0,"end":2000,"variables":[{"variable":"~temp'x","device":"~boiler"}],"aggregations":["mean","count"]}`)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	sql := string(out)
	if strings.Contains(sql, "?") && !strings.Contains(sql, "'?'") {
		t.Fatalf("placeholders left in:\n%s", sql)
	}
	row := map[string]any{}
	if err := env.DB.NewRaw(strings.TrimSuffix(strings.TrimSpace(sql), ";")).Scan(context.Background(), &row); err != nil {
		t.Fatalf("run compiled SQL: %v\n%s", err, sql)
	}
	if row["n"] != int64(2) || row["mean_value"] != float64(3) {
		t.Fatalf("compiled SQL answered %v, want n=2 mean=3", row)
	}

	// explain answers carry the same text, for the console's SQL panel
	body := `{"start":0,"end":2000,"variables":[{"variable":"~temp'x","device":"~boiler"}],"aggregations":["mean","count"]}`
	r := env.Client(t).Post("/api/v2.0/data/statistics/?explain=sql", body)
	if got, _ := r.Object(t)["psql"].(string); got != strings.TrimSuffix(sql, "\n") {
		t.Fatalf("explain=sql psql:\n%s\nwant what compile prints:\n%s", got, sql)
	}

	bad := exec.Command(bin, "compile", "--endpoint", "statistics")
	bad.Stdin = strings.NewReader(`{"start":5,"end":1,"variables":[]}`)
	if msg, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(msg), "400001") {
		t.Fatalf("invalid request: %v %s", err, msg)
	}
}

// TestCompileResampleAndAggregation: the printed E8/E9 statements run as is and answer
// what the endpoints answer.
func TestCompileResampleAndAggregation(t *testing.T) {
	bin := buildBinary(t)
	s := env.Seed(t, env.AdminToken, "rs", "v", []testenv.Point{{TS: 0, Value: 1}, {TS: 30 * 60_000, Value: 3}, {TS: 3 * 3600_000, Value: 5}})
	cases := []struct{ endpoint, body string }{
		{"resample", `{"variables":["` + s.VariableID + `"],"aggregation":"mean","period":"1H","start":0,"end":86400000,"tz":"Europe/Berlin"}`},
		{"aggregation", `{"variables":["` + s.VariableID + `"],"aggregation":"max","start":0,"end":86400000}`},
	}
	for _, c := range cases {
		cmd := exec.Command(bin, "compile", "--endpoint", c.endpoint)
		cmd.Stdin = strings.NewReader(c.body)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", c.endpoint, err)
		}
		var rows []map[string]any
		if err := env.DB.NewRaw(strings.TrimSuffix(strings.TrimSpace(string(out)), ";")).Scan(context.Background(), &rows); err != nil {
			t.Fatalf("%s: run compiled SQL: %v\n%s", c.endpoint, err, out)
		}
		var got []float64
		for _, r := range rows {
			if v, ok := r["value"].(float64); ok {
				got = append(got, v)
			}
		}
		want := map[string][]float64{"resample": {5, 2}, "aggregation": {5}}[c.endpoint]
		if len(got) < len(want) {
			t.Fatalf("%s: rows %v", c.endpoint, rows)
		}
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Fatalf("%s: values %v lack %v", c.endpoint, got, w)
			}
		}
	}
}
