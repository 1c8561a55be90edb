package querybuilder

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestSummariesSplitTheRange: whole minutes come from value_minutes, the partial minutes
// at both ends and everything before rollupEpoch from raw values.
func TestSummariesSplitTheRange(t *testing.T) {
	at := func(s string) *time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return &v
	}
	for _, tc := range []struct {
		name       string
		start, end *time.Time
		lo, hi     *time.Time // the rollup minutes [lo, hi): none when hi <= lo
	}{
		{"ends inside minutes", at("2026-03-01T10:00:12.345Z"), at("2026-03-01T12:30:59.998Z"),
			at("2026-03-01T10:01:00Z"), at("2026-03-01T12:30:00Z")},
		{"ends on minutes", at("2026-03-01T10:00:00Z"), at("2026-03-01T12:30:59.999Z"),
			at("2026-03-01T10:00:00Z"), at("2026-03-01T12:31:00Z")},
		{"before the epoch", at("1960-01-01T00:00:00Z"), at("2026-03-01T00:00:00Z"),
			&rollupEpoch, at("2026-03-01T00:00:00Z")},
		{"no start", nil, at("2026-03-01T00:00:00Z"), &rollupEpoch, at("2026-03-01T00:00:00Z")},
		{"within one minute", at("2026-03-01T10:00:01Z"), at("2026-03-01T10:00:58Z"),
			at("2026-03-01T10:01:00Z"), at("2026-03-01T10:00:00Z")},
		{"all before the epoch", at("1960-01-01T00:00:00Z"), at("1970-03-01T00:00:00Z"),
			&rollupEpoch, at("1970-03-01T00:00:00Z")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sql, args, err := summaries("k", tc.start, tc.end).ToSql()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(sql, "value_minutes") || strings.Count(sql, `"values"`) != 2 {
				t.Fatalf("want a rollup branch and two raw branches:\n%s", sql)
			}
			if !reflect.DeepEqual(args[:2], []any{*tc.lo, *tc.hi}) {
				t.Fatalf("rollup minutes [%v, %v), want [%v, %v)", args[0], args[1], *tc.lo, *tc.hi)
			}
			// the raw branches end and start at lo
			if args[len(args)-2] != *tc.lo {
				t.Fatalf("raw values from %v on, want from lo %v on", args[len(args)-2], *tc.lo)
			}
		})
	}
}
