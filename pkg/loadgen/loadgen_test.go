package loadgen

import (
	"encoding/json"
	"testing"
	"time"
)

func TestBatchesAreReproducibleAndComplete(t *testing.T) {
	spec := Spec{Devices: 2, Variables: 3, Points: 7, Start: time.Unix(0, 0), Interval: time.Second, Seed: 9, Batch: 6}
	collect := func() []Batch {
		var out []Batch
		_ = spec.Batches(func(b Batch) error { out = append(out, b); return nil })
		return out
	}
	a, b := collect(), collect()
	n := 0
	seen := map[string]bool{}
	for i := range a {
		for j, d := range a[i].Dots {
			if e := b[i].Dots[j]; d.TS != e.TS || d.Value != e.Value || d.Target != e.Target {
				t.Fatalf("batch %d dot %d differs between runs", i, j)
			}
			key := a[i].Device + d.Target + time.UnixMilli(d.TS).String()
			if seen[key] {
				t.Fatalf("duplicate dot %s", key)
			}
			seen[key] = true
			n++
		}
	}
	if n != spec.Total() {
		t.Fatalf("%d dots, want %d", n, spec.Total())
	}
	var body map[string][]struct {
		Value     float64 `json:"value"`
		Timestamp int64   `json:"timestamp"`
	}
	if err := json.Unmarshal(DeviceBody(a[0]), &body); err != nil || len(body) != 3 || len(body["var-0"]) != 2 ||
		body["var-0"][1].Timestamp != 1000 || body["var-0"][1].Value != a[0].Dots[3].Value {
		t.Fatalf("body %v %v", body, err)
	}
}
