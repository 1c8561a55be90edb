package querybuilder

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/querybuilder/tiers"
)

// TestCoverPartitionsTheRange: for random ranges with millisecond edges, the raw spans
// and every tier's spans of a cover are disjoint, tile-aligned, and together are
// exactly [start, end]; the coarsest usable tier holds every whole tile of its width
// (before the tiles' mark, when there is one); no tile span ends after it.
func TestCoverPartitionsTheRange(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 17))
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	for i := range 2000 {
		s := base + rng.Int64N(400*24*3600_000)
		e := s + []int64{0, 1, 59_999, 60_000, 899_999, 3600_000, 86_400_000, 400 * 86_400_000}[i%8] + rng.Int64N(3)
		start, end := time.UnixMilli(s).UTC(), time.UnixMilli(e).UTC()
		usable := i % (len(tiers.All) + 1)
		var b TierBounds
		mark := int64(math.MaxInt64)
		if i%3 > 0 { // a minute anywhere from before the range to after it
			mark = tiers.Minutes.Floor(s - 86_400_000 + rng.Int64N(e-s+2*86_400_000))
			at := time.UnixMilli(mark).UTC()
			b.RollupsUntil = &at
		}
		c := newCover(&start, &end, usable, b)
		type span struct {
			lo, hi int64
			w      int64 // 1: raw
		}
		spans := []span{{s, c.lo[0].UnixMilli(), 1}, {c.hi[0].UnixMilli(), e + 1, 1}}
		last := len(tiers.All) - 1
		for j, tr := range tiers.All {
			if j == last {
				spans = append(spans, span{c.lo[j].UnixMilli(), c.hi[j].UnixMilli(), tr.WidthMs()})
				continue
			}
			spans = append(spans, span{c.lo[j].UnixMilli(), c.lo[j+1].UnixMilli(), tr.WidthMs()},
				span{c.hi[j+1].UnixMilli(), c.hi[j].UnixMilli(), tr.WidthMs()})
		}
		covered := int64(0)
		for k, a := range spans {
			if a.hi == a.lo { // an empty span (a tier with no whole tile) may sit anywhere
				continue
			}
			if a.hi < a.lo || a.lo%a.w != 0 || a.hi%a.w != 0 || a.lo < s || a.hi > e+1 {
				t.Fatalf("range [%d, %d], usable %d: span %d %+v misplaced", s, e, usable, k, a)
			}
			for _, b := range spans[k+1:] {
				if a.lo < b.hi && b.lo < a.hi {
					t.Fatalf("range [%d, %d]: spans %+v and %+v overlap", s, e, a, b)
				}
			}
			if a.w > 1 && a.hi > mark {
				t.Fatalf("range [%d, %d]: tile span %+v ends after the mark %d", s, e, a, mark)
			}
			covered += a.hi - a.lo
		}
		if covered != e+1-s {
			t.Fatalf("range [%d, %d], usable %d: spans cover %d ms of %d: %+v", s, e, usable, covered, e+1-s, spans)
		}
		if usable > 0 {
			top := tiers.All[usable-1]
			if whole := top.Floor(min(e+1, mark)) - top.Ceil(s); whole > 0 && c.hi[usable-1].Sub(c.lo[usable-1]).Milliseconds() != whole {
				t.Fatalf("range [%d, %d]: %s spans %v, want every whole tile", s, e, top.Table, c.hi[usable-1].Sub(c.lo[usable-1]))
			}
		}
	}
}

// TestPlanZone: which tiers fit a resample request's zone and period over its range.
func TestPlanZone(t *testing.T) {
	at := func(s string) *time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return &v
	}
	for _, tc := range []struct {
		zone       string
		p          Period
		start, end *time.Time
		usable     int
		why        string
	}{
		{"UTC", Period{Day, 1}, at("2025-01-01T00:00:00Z"), at("2026-01-01T00:00:00Z"), 3, "every tier"},
		{"UTC", Period{Hour, 1}, at("2025-01-01T00:00:00Z"), at("2026-01-01T00:00:00Z"), 2, "value_days tiles do not divide 1H"},
		{"Asia/Kathmandu", Period{Hour, 1}, at("2026-03-02T00:00:00Z"), at("2026-03-09T00:00:00Z"), 2, "value_days"},
		{"Asia/Kathmandu", Period{Day, 1}, at("2025-01-01T00:00:00Z"), at("2026-01-01T00:00:00Z"), 2, "value_days tiles straddle"},
		{"Europe/Berlin", Period{Month, 1}, at("2025-01-01T00:00:00Z"), at("2026-01-01T00:00:00Z"), 2, "value_days tiles straddle"},
		{"Australia/Lord_Howe", Period{Week, 1}, at("2026-03-01T00:00:00Z"), at("2026-11-01T00:00:00Z"), 2, "value_days"},
		{"Pacific/Chatham", Period{Minute, 45}, at("2026-03-01T00:00:00Z"), at("2026-11-01T00:00:00Z"), 2, "value_days"},
		// 7-minute buckets: only minutes divide them
		{"UTC", Period{Minute, 7}, at("2026-03-01T00:00:00Z"), at("2026-11-01T00:00:00Z"), 1, "value_quarters tiles do not divide 7T"},
		// St. John's changed at 00:01 local time until 2011: its days started off the quarter-hour
		{"America/St_Johns", Period{Day, 1}, at("2005-01-01T00:00:00Z"), at("2006-01-01T00:00:00Z"), 1, "value_quarters tiles straddle"},
		{"America/St_Johns", Period{Day, 1}, at("2025-01-01T00:00:00Z"), at("2026-01-01T00:00:00Z"), 2, "value_days"},
		// Monrovia was −0:44:30 until 1972: not even minutes fit
		{"Africa/Monrovia", Period{Day, 1}, at("1970-01-01T00:00:00Z"), at("1971-01-01T00:00:00Z"), 0, "value_minutes tiles straddle"},
		// no start: from the epoch, Monrovia included
		{"Africa/Monrovia", Period{Day, 1}, nil, at("2026-01-01T00:00:00Z"), 0, "value_minutes"},
	} {
		zp := planZone(tc.p, tc.zone, tc.start, tc.end)
		if zp.usable != tc.usable || !strings.Contains(zp.why, tc.why) {
			t.Errorf("%s %s: %d tiers (%s), want %d (%s)", tc.zone, tc.p, zp.usable, zp.why, tc.usable, tc.why)
		}
	}
}
