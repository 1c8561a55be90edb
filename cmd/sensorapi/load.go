package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sensordata/sensorapi/pkg/ingest"
	"github.com/sensordata/sensorapi/pkg/loadgen"
	"github.com/sensordata/sensorapi/pkg/progress"
)

func loadCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	spec := loadgen.Spec{}
	fs.IntVar(&spec.Devices, "devices", 1, "number of devices (device-0, device-1, ...)")
	fs.IntVar(&spec.Variables, "variables", 1, "variables per device (var-0, var-1, ...)")
	fs.IntVar(&spec.Points, "points", 1000, "dots per variable")
	start := fs.String("start", "2025-01-01T00:00:00Z", "timestamp of the first dot (RFC 3339)")
	fs.DurationVar(&spec.Interval, "interval", 3*time.Second, "time between dots")
	fs.Uint64Var(&spec.Seed, "seed", 1, "random seed; the same flags give the same data")
	fs.IntVar(&spec.Batch, "batch", 5000, "dots per request")
	conc := fs.Int("concurrency", 4, "requests in flight")
	url := fs.String("url", "", "write over HTTP to this server (e.g. http://127.0.0.1:8080); default: straight to DATABASE_URL")
	token := fs.String("token", os.Getenv("SENSORAPI_TOKEN"), "token for --url (or SENSORAPI_TOKEN)")
	acct := fs.String("account", "admin", "account to write to without --url")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sensorapi load [flags]

Writes a reproducible data set through the ingestion code: over HTTP to a running
server (--url, --token), or in-process straight to DATABASE_URL. Prints progress lines.

Examples:
  sensorapi load --url http://127.0.0.1:8080 --token $TOKEN --devices 2 --variables 3 --points 10000
  DATABASE_URL=postgres://... sensorapi load --points 10512000 --interval 3s   # a year at 3 s

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	t0, err := time.Parse(time.RFC3339, *start)
	if err != nil {
		return fmt.Errorf("--start: %w", err)
	}
	spec.Start = t0
	send, closeFn, err := loadSender(ctx, *url, *token, *acct)
	if err != nil {
		return err
	}
	defer closeFn()
	return runLoad(ctx, spec, *conc, send, os.Stderr)
}

type sender func(ctx context.Context, b loadgen.Batch) error

// loadSender writes batches over HTTP or in-process through the ingestion pipeline,
// each batch in a transaction of its own (ingest.Direct).
func loadSender(ctx context.Context, url, token, acct string) (sender, func(), error) {
	if url != "" {
		if token == "" {
			return nil, nil, errors.New("load: --url needs --token (or SENSORAPI_TOKEN)")
		}
		client := &loadgen.Client{HTTP: &http.Client{Timeout: 5 * time.Minute}, URL: url, Token: token}
		return client.PostBatch, func() {}, nil
	}
	db, err := openMigrated(ctx)
	if err != nil {
		return nil, nil, err
	}
	var account int64
	if err := db.NewRaw("SELECT id FROM accounts WHERE name = ?", acct).Scan(ctx, &account); err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("load: account %q: %w", acct, err)
	}
	pipeline := ingest.Direct(&ingest.Store{Pool: db.Pool})
	return func(ctx context.Context, b loadgen.Batch) error {
			return pipeline.ToDevice(ctx, account, b.Device, b.Dots)
		},
		func() { _ = db.Close() }, nil
}

// runLoad sends batches with conc workers and prints a progress line every 2 s.
func runLoad(ctx context.Context, spec loadgen.Spec, conc int, send sender, out io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan loadgen.Batch, conc)
	var done atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range max(1, conc) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				if err := send(ctx, b); err != nil {
					once.Do(func() { firstErr = err; cancel() })
					continue
				}
				done.Add(int64(len(b.Dots)))
			}
		}()
	}
	start := time.Now()
	rep := progress.New(out, "load", 2*time.Second)
	rep.Begin(fmt.Sprintf("writing %d dots", spec.Total()), func() string {
		n := done.Load()
		return fmt.Sprintf("%d / %d dots (%.0f%%), %.0f dots/s", n, spec.Total(),
			100*float64(n)/float64(max(1, spec.Total())), float64(n)/time.Since(start).Seconds())
	})
	err := spec.Batches(func(b loadgen.Batch) error {
		select {
		case batches <- b:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	close(batches)
	wg.Wait()
	rep.End()
	if firstErr != nil {
		return fmt.Errorf("load: %w", firstErr)
	}
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	d := time.Since(start)
	fmt.Fprintf(out, "loaded %d dots in %.1fs (%.0f dots/s)\n", done.Load(), d.Seconds(), float64(done.Load())/d.Seconds())
	return nil
}
