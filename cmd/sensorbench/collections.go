package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sensordata/sensorapi/cmd/internal/benchharness"
	"github.com/sensordata/sensorapi/pkg/loadgen"
)

// The bulk collection workload (issue 26): gateways post what they buffered for many
// variables to POST /api/v1.6/collections/values, by variable ID: each request holds
// collectionsPoints consecutive dots of each of collectionsBlock variables.
const (
	collectionsDevices = 1000 // two variables each
	collectionsBlock   = 100  // variables per request
	collectionsPoints  = 10   // dots per variable per request
	collectionsDots    = collectionsBlock * collectionsPoints
	collectionsClients = 16
)

// naiveBulkSchema is what a user would write for the same requests: a plain hypertable
// with a unique (variable_id, ts) index and a plain table of last values.
const naiveBulkSchema = `
CREATE TABLE naive_bulk_values (variable_id bigint NOT NULL, ts timestamptz NOT NULL,
    value double precision NOT NULL, context jsonb, created_at timestamptz NOT NULL DEFAULT now());
SELECT create_hypertable('naive_bulk_values', by_range('ts', INTERVAL '7 days'), create_default_indexes => false);
CREATE UNIQUE INDEX ON naive_bulk_values (variable_id, ts DESC);
CREATE TABLE naive_bulk_variables (id bigint PRIMARY KEY, last_value double precision, last_ts timestamptz);
INSERT INTO naive_bulk_variables (id) SELECT generate_series(1, %d);`

// benchCollections measures bulk collections through HTTP next to its naive floor:
// collectionsClients pgx connections, one transaction per request holding one INSERT
// of its dots and one UPDATE of their variables' last values.
func benchCollections(ctx context.Context, h *benchharness.Harness, d time.Duration) error {
	n := collectionsDevices * len(fleetVariables)
	floor, err := naiveBulkFloor(ctx, h, d, n)
	if err != nil {
		return fmt.Errorf("collections naive floor: %w", err)
	}
	acct, ids, client, err := collectionAccount(ctx, h, "collections")
	if err != nil {
		return err
	}
	rss := h.SampleRSS()
	send := func(ctx context.Context, first int, ts int64) error {
		return client.Do(ctx, http.MethodPost, "/api/v1.6/collections/values", collectionBody(ids, first, ts))
	}
	// current data (what a gateway buffered a moment ago: past the rollup marks, so no
	// tile is written), then late data, ten minutes old: before the marks, so the write
	// keeps its tiles too
	current := runRequests(ctx, collectionsClients, d, len(ids), time.Now(), send)
	late := runRequests(ctx, collectionsClients, d, len(ids), time.Now().Add(-10*time.Minute), send)
	// and history, three months old: before every mark, on days the packer may have
	// packed, so the write looks for packed days (once per batch) before it upserts
	old := runRequests(ctx, collectionsClients, d, len(ids), time.Now().AddDate(0, -3, 0), send)
	peak := rss.Stop()
	stored, err := storedDots(ctx, h, acct)
	if err != nil {
		return err
	}
	stored -= int64(n) // the dots that created the variables
	acked := (current.messages + late.messages + old.messages) * collectionsDots
	fmt.Printf("bulk collections: %d variables, %d dots per request (%d variables × %d), %v per side\n",
		n, collectionsDots, collectionsBlock, collectionsPoints, d)
	printDots(fmt.Sprintf("naive floor (%d pgx conns, INSERT+UPDATE/request)", collectionsClients), floor)
	printDots(fmt.Sprintf("HTTP, current data (%d clients, POST …/collections/values)", collectionsClients), current)
	printDots("HTTP, the same ten minutes late (tiles kept by the write)", late)
	printDots("HTTP, the same three months old (packed days probed)", old)
	fmt.Printf("  http / naive floor: %.2f× current, %.2f× late, %.2f× three months old (target ≥ 1.5×)   dots stored %d, acknowledged %d   server peak RSS %.0f MiB\n\n",
		current.rate()/floor.rate(), late.rate()/floor.rate(), old.rate()/floor.rate(), stored, acked, peak)
	if stored != acked {
		return fmt.Errorf("collections: %d dots stored but %d acknowledged", stored, acked)
	}
	return nil
}

func printDots(name string, r *fleetResult) {
	fmt.Printf("  %-54s %8.0f dots/s  p50 %6.1f ms  p99 %6.1f ms  max %6.1f ms  errors %d\n", name,
		r.rate()*collectionsDots, ms(r.quantile(0.5)), ms(r.quantile(0.99)), ms(r.quantile(1)), r.errors)
}

// naiveBulkFloor runs the collection requests against naiveBulkSchema.
func naiveBulkFloor(ctx context.Context, h *benchharness.Harness, d time.Duration, n int) (*fleetResult, error) {
	if _, err := h.DB.Pool.Exec(ctx, fmt.Sprintf(naiveBulkSchema, n)); err != nil {
		return nil, fmt.Errorf("naive schema: %w", err)
	}
	conf, err := pgxpool.ParseConfig(h.DSN)
	if err != nil {
		return nil, err
	}
	conf.MaxConns, conf.MinConns = collectionsClients, collectionsClients
	pool, err := pgxpool.NewWithConfig(ctx, conf)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	return runRequests(ctx, collectionsClients, d, n, time.Now(), func(ctx context.Context, first int, ts int64) error {
		ids, tss, vals := make([]int64, 0, collectionsDots), make([]time.Time, 0, collectionsDots), make([]float64, 0, collectionsDots)
		lastIDs, lastVals := make([]int64, collectionsBlock), make([]float64, collectionsBlock)
		last := time.UnixMilli(ts + collectionsPoints - 1)
		for i := range collectionsBlock {
			for p := range collectionsPoints {
				ids, tss, vals = append(ids, int64(first+i+1)), append(tss, time.UnixMilli(ts+int64(p))), append(vals, collectionValue(ts+int64(p), i))
			}
			lastIDs[i], lastVals[i] = int64(first+i+1), collectionValue(ts+collectionsPoints-1, i)
		}
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO naive_bulk_values (variable_id, ts, value)
				SELECT * FROM unnest($1::bigint[], $2::timestamptz[], $3::float8[])`, ids, tss, vals); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `UPDATE naive_bulk_variables n SET last_value = u.v, last_ts = $2
				FROM unnest($1::bigint[], $3::float8[]) AS u(id, v)
				WHERE n.id = u.id AND (n.last_ts IS NULL OR n.last_ts <= $2)`, lastIDs, last, lastVals)
			return err
		})
	}), nil
}

// collectionAccount creates an account with collectionVariables, and a client of it
// for collectionsClients workers.
func collectionAccount(ctx context.Context, h *benchharness.Harness, name string) (int64, []string, *loadgen.Client, error) {
	acct, tok, err := h.NewAccount(ctx, name)
	if err != nil {
		return 0, nil, nil, err
	}
	ids, err := collectionVariables(ctx, h, acct, tok)
	if err != nil {
		return 0, nil, nil, err
	}
	return acct, ids, &loadgen.Client{HTTP: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: collectionsClients}},
		URL: h.URL, Token: tok}, nil
}

// collectionVariables creates the account's devices and variables (one dot each, in
// 1970) and returns the variables' IDs.
func collectionVariables(ctx context.Context, h *benchharness.Harness, acct int64, tok string) ([]string, error) {
	c := &loadgen.Client{HTTP: &http.Client{}, URL: h.URL, Token: tok}
	for dev := range collectionsDevices {
		if err := c.Do(ctx, http.MethodPost, fmt.Sprintf("/api/v1.6/devices/bulk-%d/", dev), fleetMessage(0)); err != nil {
			return nil, err
		}
	}
	rows, err := h.DB.Pool.Query(ctx, `SELECT public_id FROM variables WHERE account_id = $1 ORDER BY id`, acct)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// collectionBody is one request: collectionsPoints dots from ts on (a millisecond
// apart) of each of the collectionsBlock variables from ids[first] on.
func collectionBody(ids []string, first int, ts int64) []byte {
	b := []byte{'['}
	for i := range collectionsBlock {
		for p := range int64(collectionsPoints) {
			b = appendCollectionDot(b, ids[first+i], collectionValue(ts+p, i), ts+p)
		}
	}
	return append(b, ']')
}

// appendCollectionDot appends one dot of a collection body (b starts with its '[').
func appendCollectionDot(b []byte, id string, v float64, ts int64) []byte {
	if len(b) > 1 {
		b = append(b, ',')
	}
	b = append(b, `{"variable":"`...)
	b = append(b, id...)
	b = append(b, `","value":`...)
	b = strconv.AppendFloat(b, v, 'g', -1, 64)
	b = append(b, `,"timestamp":`...)
	b = strconv.AppendInt(b, ts, 10)
	return append(b, '}')
}

func collectionValue(ts int64, i int) float64 { return float64((ts+int64(i))%1000) / 10 }

// runRequests sends requests from workers for d. Request k writes
// the block k mod (n / collectionsBlock) of collectionsBlock consecutive variables, so
// that requests in flight together rarely share a variable (and when they do, share
// all of them, in the same order: no deadlock in the floor), at timestamps of its own:
// collectionsPoints milliseconds from base + k·collectionsPoints.
func runRequests(ctx context.Context, workers int, d time.Duration, n int, from time.Time, send func(ctx context.Context, first int, ts int64) error) *fleetResult {
	var k atomic.Int64
	base := from.UnixMilli()
	return runTimed(ctx, workers, d, func(int) func(context.Context) error {
		return func(ctx context.Context) error {
			i := k.Add(1)
			return send(ctx, int(i%int64(n/collectionsBlock))*collectionsBlock, base+i*collectionsPoints)
		}
	})
}
