package ingest

import (
	"slices"
	"testing"

	"github.com/sensordata/sensorapi/pkg/values"
)

// TestChangesOfWatched: one change per variable; the watched ones (in prev) carry
// their rows, oldest first, and the newest timestamp before the write.
func TestChangesOfWatched(t *testing.T) {
	rows := []values.Row{{Variable: 1, TS: 10, Value: 1}, {Variable: 1, TS: 20, Value: 2},
		{Variable: 2, TS: 5, Value: 3}, {Variable: 3, TS: 7, Value: 4}, {Variable: 3, TS: 8, Value: 5}}
	last := int64(9)
	got := changesOf(rows, map[int64]*int64{1: &last, 3: nil})
	if len(got) != 3 {
		t.Fatalf("%d changes", len(got))
	}
	if c := got[0]; c.Variable != 1 || c.From != 10 || c.To != 20 || !c.HasPrev || c.Prev != 9 ||
		!slices.Equal(c.Values, []Point{{10, 1}, {20, 2}}) {
		t.Fatalf("variable 1: %+v", c)
	}
	if c := got[1]; c.Variable != 2 || c.Values != nil || c.HasPrev {
		t.Fatalf("variable 2 (not watched): %+v", c)
	}
	if c := got[2]; c.Variable != 3 || c.HasPrev || !slices.Equal(c.Values, []Point{{7, 4}, {8, 5}}) {
		t.Fatalf("variable 3 (no value before): %+v", c)
	}
	if cap(got[0].Values) != 2 {
		t.Fatal("a change's values may be appended over the next one's")
	}
	if plain := changesOf(rows, nil); plain[0].Values != nil || len(plain) != 3 {
		t.Fatalf("unwatched: %+v", plain)
	}
}
