package tiers

import (
	"testing"
	"time"
)

func TestFloorAndCeilAlsoBeforeEpoch(t *testing.T) {
	for _, c := range []struct{ ms, floor, ceil int64 }{
		{0, 0, 0}, {59_999, 0, 60_000}, {60_000, 60_000, 60_000}, {-1, -60_000, 0}, {-60_001, -120_000, -60_000},
	} {
		if f, cl := Minutes.Floor(c.ms), Minutes.Ceil(c.ms); f != c.floor || cl != c.ceil {
			t.Errorf("%d: floor %d ceil %d, want %d %d", c.ms, f, cl, c.floor, c.ceil)
		}
	}
}

// TestChangesPastGoZoneBoundsArtifact: Go's ZoneBounds reports a period end at or before
// the instant asked on the last day of leap years past the explicit tz data (Berlin,
// 2040-12-31); the scan still ends, finds the two real changes of 2040 and 2041, and
// plans a range to the year 9999.
func TestChangesPastGoZoneBoundsArtifact(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	got := Changes(berlin, time.Date(2040, 6, 1, 0, 0, 0, 0, time.UTC), time.Date(2041, 6, 1, 0, 0, 0, 0, time.UTC))
	if len(got) != 2 || got[0].At != time.Date(2040, 10, 28, 1, 0, 0, 0, time.UTC).In(got[0].At.Location()) ||
		got[0].Before != 7200 || got[1].After != 7200 {
		t.Fatalf("changes %+v, want 2040-10-28T01:00Z (+2h → +1h) and 2041-03-31T01:00Z (+1h → +2h)", got)
	}
	// the scan used to loop forever from 2040-12-31 on: a hang detector, not a speed check
	done := make(chan bool)
	go func() {
		done <- FitZone(berlin, time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC), time.UnixMilli(253402300799999), Quarters.Width)
	}()
	select {
	case fits := <-done:
		if !fits {
			t.Error("quarters do not fit Berlin")
		}
	case <-time.After(time.Minute):
		t.Fatal("FitZone to the year 9999 does not end")
	}
}
