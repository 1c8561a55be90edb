package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sensordata/sensorapi/pkg/config"
	"github.com/sensordata/sensorapi/pkg/loadgen"
	"github.com/sensordata/sensorapi/pkg/progress"
	"github.com/sensordata/sensorapi/pkg/server"
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

In-process, the writes go through the same pipeline and followers as serve's: a write
to a synthetic variable is refused, and synthetic variables and events follow the
values. Before it exits, load recomputes the synthetic variables its values made due
(chains included) and evaluates the events behind their variables' last values; their
deliveries stay queued for the serving instances, which run them.

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
	dst, err := loadTarget(ctx, *url, *token, *acct)
	if err != nil {
		return err
	}
	err = runLoad(ctx, spec, *conc, dst.send, os.Stderr)
	return errors.Join(err, dst.finish(ctx, os.Stderr))
}

type sender func(ctx context.Context, b loadgen.Batch) error

// target is where load writes: send writes a batch, finish (called once, after the
// last) waits for what the writes left to do and lets go of the connections.
type target struct {
	send   sender
	finish func(ctx context.Context, out io.Writer) error
}

// loadTarget writes batches over HTTP, or in-process through an instance's pipeline
// and followers (server.StartWriter), as `serve` writes them: a batch of
// SENSORAPI_INGEST_BATCH_DOTS dots or more (--batch: 5000) in a transaction of its
// own, smaller ones queued together.
func loadTarget(ctx context.Context, url, token, acct string) (target, error) {
	if url != "" {
		if token == "" {
			return target{}, errors.New("load: --url needs --token (or SENSORAPI_TOKEN)")
		}
		client := &loadgen.Client{HTTP: &http.Client{Timeout: 5 * time.Minute}, URL: url, Token: token}
		return target{send: client.PostBatch, finish: func(context.Context, io.Writer) error { return nil }}, nil
	}
	cfg, err := config.FromEnv()
	if err != nil {
		return target{}, err
	}
	cfg.ReplicaURLs = nil // load reads nothing that a replica would serve
	db, err := openMigrated(ctx)
	if err != nil {
		return target{}, err
	}
	var account int64
	if err := db.NewRaw("SELECT id FROM accounts WHERE name = ?", acct).Scan(ctx, &account); err != nil {
		_ = db.Close()
		return target{}, fmt.Errorf("load: account %q: %w", acct, err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// the instance outlives ctx until the last send has returned (finish stops it)
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	in, err := server.StartWriter(bg, db, cfg, log)
	if err != nil {
		stop()
		_ = db.Close()
		return target{}, fmt.Errorf("load: %w", err)
	}
	send := func(ctx context.Context, b loadgen.Batch) error {
		if err := in.Ingest.ToDevice(ctx, account, b.Device, b.Dots); err != nil {
			return fmt.Errorf("device %s: %w", b.Device, err)
		}
		return nil
	}
	finish := func(ctx context.Context, out io.Writer) error {
		stop()
		<-in.Done()
		defer func() { _ = db.Close() }()
		return settle(ctx, in, out)
	}
	return target{send: send, finish: finish}, nil
}

// settle waits, unless load was interrupted, for the synthetic recomputes and event
// evaluations its writes queued (server.Instance.Settle); deliveries stay queued for
// the serving instances.
func settle(ctx context.Context, in *server.Instance, out io.Writer) error {
	if ctx.Err() != nil {
		return nil
	}
	rep := progress.New(out, "load", 2*time.Second)
	rep.Begin("recomputing synthetic variables and evaluating events", nil)
	defer rep.End()
	if err := in.Settle(ctx); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	return nil
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
