package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/sensordata/sensorapi/cmd/internal/benchharness"
	"github.com/sensordata/sensorapi/pkg/ingest"
	"github.com/sensordata/sensorapi/pkg/loadgen"
	"github.com/sensordata/sensorapi/pkg/values"
)

const (
	ingestConcurrency = 4
	ingestBatch       = 5000
)

// benchIngest writes the same data set twice, into two fresh accounts: through HTTP
// (bulk device posts from concurrent clients) and through values.Store in-process —
// the same statements without HTTP, JSON or auth: the floor.
func benchIngest(ctx context.Context, h *benchharness.Harness, dots int) error {
	const variables = 10
	spec := loadgen.Spec{Devices: 4, Variables: variables, Points: max(1, dots/(4*variables)),
		Start: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), Interval: time.Second, Seed: 1, Batch: ingestBatch}

	floorAcct, _, err := h.NewAccount(ctx, "floor")
	if err != nil {
		return err
	}
	st := ingest.Direct(&values.Store{Pool: h.DB.Pool})
	floor, err := timeLoad(spec, func(b loadgen.Batch) error { return st.ToDevice(ctx, floorAcct, b.Device, b.Dots) })
	if err != nil {
		return fmt.Errorf("floor: %w", err)
	}

	_, tok, err := h.NewAccount(ctx, "http")
	if err != nil {
		return err
	}
	client := &loadgen.Client{HTTP: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: ingestConcurrency}},
		URL: h.URL, Token: tok}
	rss := h.SampleRSS()
	viaHTTP, err := timeLoad(spec, func(b loadgen.Batch) error { return client.PostBatch(ctx, b) })
	peak := rss.Stop()
	if err != nil {
		return fmt.Errorf("http: %w", err)
	}
	n := float64(spec.Total())
	fmt.Printf("ingestion: %d dots, %d per request, %d concurrent clients\n", spec.Total(), ingestBatch, ingestConcurrency)
	fmt.Printf("  floor (values.Store, no HTTP)  %10.0f dots/s\n", n/floor.Seconds())
	fmt.Printf("  HTTP  (POST /api/v1.6/devices) %10.0f dots/s   %.2f × floor   (targets: ≥ 100000 dots/s, ≥ 0.5 × floor)\n",
		n/viaHTTP.Seconds(), floor.Seconds()/viaHTTP.Seconds())
	fmt.Printf("  server peak RSS %.0f MiB (target < 256 MiB)\n\n", peak)
	return nil
}

// timeLoad sends every batch from ingestConcurrency workers and returns the wall time.
func timeLoad(spec loadgen.Spec, send func(loadgen.Batch) error) (time.Duration, error) {
	batches := make(chan loadgen.Batch, ingestConcurrency)
	errc := make(chan error, ingestConcurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for range ingestConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				if err := send(b); err != nil {
					errc <- err
					for range batches { // drain so the producer ends
					}
					return
				}
			}
		}()
	}
	_ = spec.Batches(func(b loadgen.Batch) error { batches <- b; return nil })
	close(batches)
	wg.Wait()
	select {
	case err := <-errc:
		return 0, err
	default:
	}
	return time.Since(start), nil
}
