package events

import (
	"context"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sensordata/sensorapi/pkg/ingest"
)

// memoryService is a service with one evaluator and no database: enough for writes
// that move no state (a transition or a database path would need the pool).
func memoryService(variable int64, e *entry) (*Service, *shard) {
	s := &Service{log: slog.Default(), metrics: newMetrics(prometheus.NewRegistry(), func() float64 { return 0 }),
		shards: []*shard{newShard()}}
	s.watched.Store(&map[int64][]int64{variable: {e.ev.ID}})
	s.shards[0].entries[e.ev.ID] = e
	return s, s.shards[0]
}

func ptr(v int64) *int64 { return &v }

func write(variable, prev int64, points ...ingest.Point) item {
	c := &ingest.Change{Variable: variable, Prev: prev, HasPrev: true, From: points[0].TS,
		To: points[len(points)-1].TS, Values: points}
	return item{variable: variable, change: c}
}

// TestMemoryChain: writes that continue the chain from the entry's last evaluated value
// are evaluated in memory, in chain order whatever order they were handed over in; a
// write after a gap waits one round for the missing one; a write entirely older than
// the last evaluated value moves nothing.
func TestMemoryChain(t *testing.T) {
	e := &entry{ev: Event{ID: 1, VariableID: 7, Operator: ">", Threshold: 50, DurationMS: 100},
		st: State{State: Normal, LastTS: ptr(10)}, version: "1"}
	s, sh := memoryService(7, e)
	ctx := context.Background()

	s.process(ctx, sh, []item{write(7, 20, ingest.Point{TS: 30, Value: 60})}) // 20 not seen yet
	if *e.st.LastTS != 10 || e.dirty || len(sh.held[7]) != 1 {
		t.Fatalf("after a gap: state %+v dirty %v held %d", e.st, e.dirty, len(sh.held[7]))
	}
	s.process(ctx, sh, []item{write(7, 10, ingest.Point{TS: 15, Value: 1}, ingest.Point{TS: 20, Value: 60})})
	if *e.st.LastTS != 30 || e.st.RunSince == nil || *e.st.RunSince != 20 || e.st.State != Normal || !e.dirty || len(sh.held) != 0 {
		t.Fatalf("after the missing write: state %+v (run since %v) dirty %v held %d", e.st, e.st.RunSince, e.dirty, len(sh.held))
	}
	s.process(ctx, sh, []item{write(7, 30, ingest.Point{TS: 5, Value: 99}, ingest.Point{TS: 25, Value: 0})}) // late
	if *e.st.LastTS != 30 || *e.st.RunSince != 20 {
		t.Fatalf("late values moved the state: %+v", e.st)
	}
	var m dto.Metric
	if err := s.metrics.evaluations.WithLabelValues("memory").Write(&m); err != nil || m.GetCounter().GetValue() != 1 {
		t.Fatalf("%v evaluations in memory, want 1 (%v)", m.GetCounter().GetValue(), err)
	}
}
