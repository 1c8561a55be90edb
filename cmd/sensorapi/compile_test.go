package main_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/sensordata/sensorapi/pkg/testenv"
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

	bad := exec.Command(bin, "compile", "--endpoint", "statistics")
	bad.Stdin = strings.NewReader(`{"start":5,"end":1,"variables":[]}`)
	if msg, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(msg), "400001") {
		t.Fatalf("invalid request: %v %s", err, msg)
	}
}
