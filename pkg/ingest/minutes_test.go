package ingest

import (
	"testing"
	"time"
)

func TestMinuteOfFloorsAlsoBeforeEpoch(t *testing.T) {
	for _, c := range []struct{ ms, want int64 }{
		{0, 0}, {59_999, 0}, {60_000, 60_000}, {-1, -60_000}, {-60_000, -60_000}, {-60_001, -120_000},
	} {
		if got := minuteOf(c.ms); got != c.want {
			t.Errorf("minuteOf(%d) = %d, want %d", c.ms, got, c.want)
		}
	}
}

func TestSumMinutesGroupsByVariableAndMinute(t *testing.T) {
	rows := []row{
		{variable: 1, ts: 1_000, value: 3}, {variable: 1, ts: 59_999, value: -2}, {variable: 1, ts: 60_000, value: 7},
		{variable: 2, ts: 30_000, value: 5},
	}
	s := sumMinutes(rows)
	if len(s.vars) != 3 {
		t.Fatalf("%d rollups, want 3: %+v", len(s.vars), s)
	}
	first := []any{s.vars[0], s.minutes[0], s.n[0], s.sum[0], s.min[0], s.max[0]}
	want := []any{int64(1), time.UnixMilli(0).UTC(), int32(2), 1.0, -2.0, 3.0}
	for i := range want {
		if first[i] != want[i] {
			t.Fatalf("first rollup %v, want %v", first, want)
		}
	}
	if s.ks[0] != 5 || s.m2[0] != 12.5 || s.ks[1] != 0 || s.m2[1] != 0 { // 3 and -2: shifted by -2, mean 2.5
		t.Fatalf("spread ks %v m2 %v", s.ks, s.m2)
	}
	if s.vars[1] != 1 || s.n[1] != 1 || s.minutes[1] != time.UnixMilli(60_000).UTC() || s.vars[2] != 2 || s.sum[2] != 5 {
		t.Fatalf("rollups %+v", s)
	}
}
