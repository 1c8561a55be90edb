package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/sensordata/sensorapi/cmd/internal/benchharness"
	"github.com/sensordata/sensorapi/pkg/loadgen"
	"github.com/sensordata/sensorapi/pkg/values"
)

// The bulk of old data (issue 46): benchCollections' requests (collectionsBlock
// variables × collectionsPoints dots by id, from collectionsClients clients) with
// timestamps months old, next to the floor the issue sets: ONE connection upserting the
// same dots, one request's worth per statement, into a plain hypertable with the same
// unique index; then the same upserts from collectionsClients connections, the
// database's ceiling (what PostgreSQL alone does with every core: on a machine where a
// commit is cheap, the floor is CPU-bound and this stays under 2× it). Two sides
// through the server:
//   - days that are not packed, three months old, for variables a quarter of which hold
//     packed days (bulkOldPackedDays of them, four months old, and one a day a week
//     for two years before): the write must still tell which;
//   - days that are packed: each request the first to write into its variables' day,
//     each of those days packed (bulkOldHistoryStep dots), so every request unpacks
//     collectionsBlock days before it writes.
const (
	bulkOldPackedDays  = 2
	bulkOldPackedVars  = 5 * collectionsBlock // the variables that have them
	bulkOldHistoryStep = time.Hour
	bulkOldHistoryVars = 50 // variables per request that writes the history
	// one variable also has a packed day a week for the two years before: packed days
	// in 104 chunks, as a database that has packed for two years holds
	bulkOldSpreadWeeks = 104
)

const bulkOldFloorSchema = `
CREATE TABLE floor_old_values (variable_id bigint NOT NULL, ts timestamptz NOT NULL, value double precision NOT NULL);
SELECT create_hypertable('floor_old_values', by_range('ts', INTERVAL '7 days'), create_default_indexes => false);
CREATE UNIQUE INDEX ON floor_old_values (variable_id, ts DESC);`

const bulkOldFloorSQL = `INSERT INTO floor_old_values (variable_id, ts, value)
SELECT * FROM unnest($1::bigint[], $2::timestamptz[], $3::float8[])
ON CONFLICT (variable_id, ts) DO UPDATE SET value = EXCLUDED.value`

// benchBulkOld runs the floor, then the two sides, and checks that every acknowledged
// dot is stored (and every packed day written into is rows again).
func benchBulkOld(ctx context.Context, h *benchharness.Harness, d time.Duration) error {
	acct, ids, client, err := collectionAccount(ctx, h, "bulkold")
	if err != nil {
		return err
	}
	history := values.Day(time.Now().AddDate(0, -4, 0))
	if err := packedHistory(ctx, h, client, ids, history); err != nil {
		return err
	}
	old := time.Now().AddDate(0, -3, 0)
	if _, err := h.DB.Pool.Exec(ctx, bulkOldFloorSchema); err != nil {
		return fmt.Errorf("floor schema: %w", err)
	}
	floor, err := bulkOldFloor(ctx, h, d, 1, len(ids), old)
	if err != nil {
		return fmt.Errorf("bulk old floor: %w", err)
	}
	// the same upserts from as many connections as the service's clients: what the
	// database alone does with every core, the ceiling of any write path that stores
	// these rows (later timestamps than the floor's, so no conflict between them)
	ceiling, err := bulkOldFloor(ctx, h, d, collectionsClients, len(ids), old.Add(24*time.Hour))
	if err != nil {
		return fmt.Errorf("bulk old ceiling: %w", err)
	}
	rss := h.SampleRSS()
	unpacked := runRequests(ctx, collectionsClients, d, len(ids), old, func(ctx context.Context, first int, ts int64) error {
		return client.Do(ctx, http.MethodPost, "/api/v1.6/collections/values", collectionBody(ids, first, ts))
	})
	blocks := bulkOldPackedVars / collectionsBlock
	packed := runCount(ctx, collectionsClients, blocks*bulkOldPackedDays, func(ctx context.Context, k int) error {
		ts := history.Add(time.Duration(k/blocks)*24*time.Hour + time.Second).UnixMilli()
		return client.Do(ctx, http.MethodPost, "/api/v1.6/collections/values", collectionBody(ids, k%blocks*collectionsBlock, ts))
	})
	peak := rss.Stop()
	stored, err := storedDots(ctx, h, acct)
	if err != nil {
		return err
	}
	// every history day was written into, so unpacked: rows again, as the dots that
	// created the variables
	want := int64(len(ids)) + bulkOldPackedVars*bulkOldPackedDays*int64(24*time.Hour/bulkOldHistoryStep) +
		(unpacked.messages+packed.messages)*collectionsDots
	fmt.Printf("bulk of old data: %d variables, %d dots per request (%d variables × %d), %d clients\n",
		len(ids), collectionsDots, collectionsBlock, collectionsPoints, collectionsClients)
	printDots("1-connection floor (unnest upsert, plain hypertable)", floor)
	printDots(fmt.Sprintf("the same upserts from %d connections (database ceiling)", collectionsClients), ceiling)
	printDots("HTTP, three months old, days not packed", unpacked)
	printDots(fmt.Sprintf("HTTP, into packed days (%d days unpacked/request)", collectionsBlock), packed)
	fmt.Printf("  http / 1-connection floor: %.2f× days not packed (target ≥ 1.8×), %.2f× into packed days; ceiling / floor %.2f×   rows stored %d, expected %d   server peak RSS %.0f MiB\n\n",
		unpacked.rate()/floor.rate(), packed.rate()/floor.rate(), ceiling.rate()/floor.rate(), stored, want, peak)
	if errs := unpacked.errors + packed.errors; errs > 0 { // a failed request may have been written or not
		return fmt.Errorf("bulk old: %d requests failed", errs)
	}
	if stored != want {
		return fmt.Errorf("bulk old: %d rows stored, %d expected", stored, want)
	}
	return nil
}

// packedHistory writes bulkOldPackedDays days from day on of the first
// bulkOldPackedVars variables, a dot
// every bulkOldHistoryStep, and a dot a week of ids[0] for bulkOldSpreadWeeks weeks
// before, and packs each (variable, day).
func packedHistory(ctx context.Context, h *benchharness.Harness, c *loadgen.Client, ids []string, day time.Time) error {
	perDay := int(24 * time.Hour / bulkOldHistoryStep)
	spread := []byte{'['}
	for w := 1; w <= bulkOldSpreadWeeks; w++ {
		spread = appendCollectionDot(spread, ids[0], float64(w), day.AddDate(0, 0, -7*w).UnixMilli())
	}
	if err := c.Do(ctx, http.MethodPost, "/api/v1.6/collections/values", append(spread, ']')); err != nil {
		return fmt.Errorf("bulk old spread: %w", err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(collectionsClients)
	for first := 0; first < bulkOldPackedVars; first += bulkOldHistoryVars {
		for dd := range bulkOldPackedDays {
			g.Go(func() error {
				b := []byte{'['}
				for _, id := range ids[first:min(first+bulkOldHistoryVars, len(ids))] {
					for p := range perDay {
						ts := day.Add(time.Duration(dd)*24*time.Hour + time.Duration(p)*bulkOldHistoryStep).UnixMilli()
						b = appendCollectionDot(b, id, collectionValue(ts, p), ts)
					}
				}
				return c.Do(gctx, http.MethodPost, "/api/v1.6/collections/values", append(b, ']'))
			})
		}
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("bulk old history: %w", err)
	}
	rows, err := h.DB.Pool.Query(ctx, `SELECT id FROM variables WHERE public_id = ANY($1)`, ids[:bulkOldPackedVars])
	if err != nil {
		return err
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return err
	}
	st := &values.Store{Pool: h.DB.Pool}
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(values.DefaultWorkers)
	var first int64
	if err := h.DB.Pool.QueryRow(ctx, `SELECT id FROM variables WHERE public_id = $1`, ids[0]).Scan(&first); err != nil {
		return err
	}
	for w := 1; w <= bulkOldSpreadWeeks; w++ {
		g.Go(func() error {
			_, err := st.PackDay(gctx, first, day.AddDate(0, 0, -7*w))
			return err
		})
	}
	for _, k := range keys {
		for dd := range bulkOldPackedDays {
			g.Go(func() error {
				n, err := st.PackDay(gctx, k, day.Add(time.Duration(dd)*24*time.Hour))
				if err == nil && n != perDay {
					err = fmt.Errorf("variable %d day %d: %d dots packed, want %d", k, dd, n, perDay)
				}
				return err
			})
		}
	}
	return g.Wait()
}

// bulkOldFloor upserts the requests' dots into floor_old_values on conns connections
// for d.
func bulkOldFloor(ctx context.Context, h *benchharness.Harness, d time.Duration, conns, n int, from time.Time) (*fleetResult, error) {
	conf, err := pgxpool.ParseConfig(h.DSN)
	if err != nil {
		return nil, err
	}
	conf.MaxConns, conf.MinConns = int32(conns), int32(conns)
	pool, err := pgxpool.NewWithConfig(ctx, conf)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	return runRequests(ctx, conns, d, n, from, func(ctx context.Context, first int, ts int64) error {
		ids, tss, vals := make([]int64, 0, collectionsDots), make([]time.Time, 0, collectionsDots), make([]float64, 0, collectionsDots)
		for i := range collectionsBlock {
			for p := range int64(collectionsPoints) {
				ids, tss, vals = append(ids, int64(first+i+1)), append(tss, time.UnixMilli(ts+p)), append(vals, collectionValue(ts+p, i))
			}
		}
		_, err := pool.Exec(ctx, bulkOldFloorSQL, ids, tss, vals)
		return err
	}), nil
}

// runCount sends requests 0..n-1 from workers, each once.
func runCount(ctx context.Context, workers, n int, send func(ctx context.Context, k int) error) *fleetResult {
	var (
		res  fleetResult
		next atomic.Int64
		mu   sync.Mutex
		wg   sync.WaitGroup
	)
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := int(next.Add(1) - 1); k < n && ctx.Err() == nil; k = int(next.Add(1) - 1) {
				t0 := time.Now()
				err := send(ctx, k)
				mu.Lock()
				if err != nil {
					res.errors++
				} else {
					res.latencies = append(res.latencies, time.Since(t0))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return res.done(start)
}
