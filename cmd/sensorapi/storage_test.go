package main_test

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// TestStoragePack: `sensorapi storage pack` packs the days past the window and says
// how many; `storage report` then counts the points in the packed layout and its bytes
// per point; the values read back the same through the API.
func TestStoragePack(t *testing.T) {
	bin := buildBinary(t)
	t0 := time.Date(1985, 1, 1, 0, 0, 0, 0, time.UTC)
	var points []testenv.Point
	for ts := t0; ts.Before(t0.Add(3 * 24 * time.Hour)); ts = ts.Add(10 * time.Second) {
		points = append(points, testenv.Point{TS: ts.UnixMilli(), Value: float64(ts.Unix()%977) / 10})
	}
	s := env.Seed(t, env.AdminToken, "storage-cli", "v", points)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "DATABASE_URL="+env.DSN)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("sensorapi %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	out := run("storage", "pack", "--after", "2d")
	m := regexp.MustCompile(`packed (\d+) days`).FindStringSubmatch(out)
	if n, _ := strconv.Atoi(m[1]); m == nil || n < 3 {
		t.Fatalf("storage pack: want ≥ 3 days packed:\n%s", out)
	}
	var packed int64
	if err := env.DB.Pool.QueryRow(context.Background(), `SELECT coalesce(sum(n), 0) FROM values_packed WHERE variable_id = $1`,
		s.VariableKey).Scan(&packed); err != nil || packed != int64(len(points)) {
		t.Fatalf("%d of %d points packed (%v)", packed, len(points), err)
	}
	report := run("storage", "report")
	if !regexp.MustCompile(`values_packed\s+\d+\s+\d+`).MatchString(report) || !strings.Contains(report, "total B/pt") {
		t.Fatalf("storage report:\n%s", report)
	}
	c := env.Client(t).As(env.AdminToken)
	r := c.Get("/api/v1.6/devices/storage-cli/v/values?page_size=3&start=" + strconv.FormatInt(t0.UnixMilli(), 10) +
		"&end=" + strconv.FormatInt(t0.Add(time.Minute).UnixMilli(), 10))
	if r.Status != 200 || !strings.Contains(string(r.Body), `"timestamp":`+strconv.FormatInt(t0.Add(time.Minute).UnixMilli(), 10)) {
		t.Fatalf("values list after packing: %d %s", r.Status, r.Body)
	}
}
