package api_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sensordata/sensorapi/pkg/config"
	"github.com/sensordata/sensorapi/pkg/notify"
	"github.com/sensordata/sensorapi/pkg/values"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// batchStats reads the batch-size histogram: how many batches committed and how many
// messages they held.
func batchStats(t *testing.T, c *testenv.Client) (batches, messages uint64) {
	t.Helper()
	families, err := c.Server.Metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "sensorapi_ingest_batch_messages" {
			h := f.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), uint64(h.GetSampleSum())
		}
	}
	t.Fatal("no sensorapi_ingest_batch_messages metric")
	return 0, 0
}

// TestFleetConcurrentSingleDots: 500 concurrent one-dot messages to 50 devices are all
// readable afterwards, each variable's lastValue is its greatest timestamp, and they
// were committed in shared batches (fewer transactions than messages). The values
// table is locked until dozens of messages wait behind the committers, so that they
// must share batches on any machine, however the scheduler runs the writers.
func TestFleetConcurrentSingleDots(t *testing.T) {
	c := env.Client(t).As(env.NewAccount(t))
	const devices, messages = 50, 500
	for d := range devices { // created first: creators would wait for the lock too
		if r := c.Post(fmt.Sprintf("/api/v1.6/devices/fleet-%d/", d), map[string]any{"t": map[string]any{"value": -1, "timestamp": 1}}); r.Status != 200 {
			t.Fatalf("create fleet-%d: %d %s", d, r.Status, r.Body)
		}
	}
	batchesBefore, messagesBefore := batchStats(t, c)
	release := env.HoldValues(t)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 100)
	for i := range messages {
		wg.Add(1)
		go func() {
			sem <- struct{}{}
			defer func() { <-sem; wg.Done() }()
			dev := fmt.Sprintf("fleet-%d", i%devices)
			r := c.Post("/api/v1.6/devices/"+dev+"/", map[string]any{"t": map[string]any{"value": i, "timestamp": 1_000_000 + i}})
			if r.Status != 200 {
				t.Errorf("message %d: %d %s", i, r.Status, r.Body)
			}
		}()
	}
	c.WaitQueued(50, nil)
	release()
	wg.Wait()
	for d := range devices {
		dots := readValues(t, c, fmt.Sprintf("/api/v1.6/devices/fleet-%d/t/values?page_size=100", d))
		if len(dots) != messages/devices+1 {
			t.Fatalf("fleet-%d holds %d dots, want %d", d, len(dots), messages/devices+1)
		}
		last := messages - devices + d // the greatest i with i % devices == d
		r := c.Get(fmt.Sprintf("/api/v1.6/devices/fleet-%d/t/lv", d))
		if strings.TrimSpace(string(r.Body)) != fmt.Sprint(last) {
			t.Errorf("fleet-%d lv = %s, want %d", d, r.Body, last)
		}
	}
	batches, queued := batchStats(t, c)
	if batches, queued = batches-batchesBefore, queued-messagesBefore; batches == 0 || queued <= batches {
		t.Errorf("%d messages in %d batches: no group commit", queued, batches)
	}
}

// TestFleetFirstMessagesShareBatches: a new fleet's first messages, which create their
// devices and variables, are committed in shared batches too (one transaction per
// device made a fresh fleet a tenth as fast as an established one), and each device
// holds its value afterwards; a disabled device among them gets its 423 without
// failing the others.
func TestFleetFirstMessagesShareBatches(t *testing.T) {
	c := env.Client(t).As(env.NewAccount(t))
	const devices = 50
	if r := c.Post("/api/v1.6/devices/off/", map[string]any{"t": 1}); r.Status != 200 {
		t.Fatalf("create off: %d %s", r.Status, r.Body)
	}
	if r := c.Patch("/api/v2.0/devices/~off/", map[string]any{"isActive": false}); r.Status != 200 {
		t.Fatalf("disable off: %d %s", r.Status, r.Body)
	}
	batchesBefore, messagesBefore := batchStats(t, c)
	release := env.HoldValues(t)
	var wg sync.WaitGroup
	for d := range devices {
		wg.Go(func() {
			r := c.Post(fmt.Sprintf("/api/v1.6/devices/new-%d/", d), map[string]any{"t": map[string]any{"value": d, "timestamp": 1000 + d}})
			if r.Status != 200 {
				t.Errorf("new-%d: %d %s", d, r.Status, r.Body)
			}
		})
	}
	c.WaitQueued(devices, nil)
	if r := c.Post("/api/v1.6/devices/off/", map[string]any{"t": 2}); r.Status != 423 {
		t.Errorf("a disabled device: %d %s, want 423", r.Status, r.Body)
	}
	release()
	wg.Wait()
	for d := range devices {
		r := c.Get(fmt.Sprintf("/api/v1.6/devices/new-%d/t/lv", d))
		if strings.TrimSpace(string(r.Body)) != fmt.Sprint(d) {
			t.Errorf("new-%d lv = %d %s, want %d", d, r.Status, r.Body, d)
		}
	}
	batches, queued := batchStats(t, c)
	if batches, queued = batches-batchesBefore, queued-messagesBefore; queued < devices || queued <= batches {
		t.Errorf("%d first messages in %d batches: each created its device alone", queued, batches)
	}
}

// TestFleetInvalidMessageFailsAlone: one invalid message among 200 concurrent valid
// ones gets its 400001 and the 200 others are all stored.
func TestFleetInvalidMessageFailsAlone(t *testing.T) {
	c := env.Client(t).As(env.NewAccount(t))
	if r := c.Post("/api/v1.6/devices/one-bad/", map[string]any{"t": 0}); r.Status != 200 { // created
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	var wg sync.WaitGroup
	for i := range 201 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dot := map[string]any{"value": i, "timestamp": 1 + i}
			if i == 100 {
				dot["timestamp"] = -5
			}
			r := c.Post("/api/v1.6/devices/one-bad/", map[string]any{"t": dot})
			switch {
			case i == 100 && (r.Status != 400 || !strings.Contains(string(r.Body), `"t.timestamp"`)):
				t.Errorf("the invalid message: %d %s", r.Status, r.Body)
			case i != 100 && r.Status != 200:
				t.Errorf("message %d: %d %s", i, r.Status, r.Body)
			}
		}()
	}
	wg.Wait()
	if n := len(readValues(t, c, "/api/v1.6/devices/one-bad/t/values?start=1&end=1000&page_size=1000")); n != 200 {
		t.Fatalf("%d dots stored, want 200", n)
	}
}

// TestFleetLaterMessageWinsInBatch: messages writing the same (variable, timestamp)
// concurrently leave one of their values, and the lastValue agrees with the stored
// value, as if they had committed one after another.
func TestFleetLaterMessageWinsInBatch(t *testing.T) {
	c := env.Client(t).As(env.NewAccount(t))
	if r := c.Post("/api/v1.6/devices/same-ts/", map[string]any{"t": map[string]any{"value": 0, "timestamp": 0}}); r.Status != 200 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := c.Post("/api/v1.6/devices/same-ts/", map[string]any{"t": map[string]any{"value": i + 1, "timestamp": 5000}}); r.Status != 200 {
				t.Errorf("message %d: %d %s", i, r.Status, r.Body)
			}
		}()
	}
	wg.Wait()
	dots := readValues(t, c, "/api/v1.6/devices/same-ts/t/values?start=5000&end=5000")
	lv := c.Get("/api/v2.0/devices/~same-ts/variables/~t/").Object(t)["lastValue"].(map[string]any)
	if len(dots) != 1 || lv["value"] != dots[0].Value {
		t.Fatalf("stored %v, lastValue %v: want one dot equal to the lastValue", dots, lv)
	}
	// the minute holds the dot at 0 and the one at 5000 that won
	var n int
	var sum float64
	err := env.DB.NewRaw(`SELECT n, sum FROM value_minutes m JOIN variables v ON v.id = m.variable_id
		JOIN devices d ON d.id = v.device_id WHERE d.label = 'same-ts' AND m.tile = to_timestamp(0)`).
		Scan(context.Background(), &n, &sum)
	if err != nil || n != 2 || sum != dots[0].Value {
		t.Fatalf("the minute rollup holds %d values summing to %v (%v), want 2 summing to %v", n, sum, err, dots[0].Value)
	}
}

// TestFleetTokenRevokedOnEveryInstance: a token deleted through one instance answers
// 401002 on another, which had it cached for longer than the test waits (the
// invalidation was notified, not timed out).
func TestFleetTokenRevokedOnEveryInstance(t *testing.T) {
	b := env.Instance(t)
	tok := env.NewAccount(t)
	if r := b.As(tok).Get("/api/v2.0/devices/"); r.Status != 200 { // now cached on b
		t.Fatalf("before: %d %s", r.Status, r.Body)
	}
	hits := testutil.ToFloat64(b.Server.Metrics.CacheLookups.WithLabelValues("token", "hit"))
	if r := b.As(tok).Get("/api/v2.0/devices/"); r.Status != 200 ||
		testutil.ToFloat64(b.Server.Metrics.CacheLookups.WithLabelValues("token", "hit")) != hits+1 {
		t.Fatalf("the second request did not come from the cache: %d", r.Status)
	}
	// deleted through the database every instance shares (no token route exists yet)
	if _, err := env.DB.ExecContext(context.Background(), `DELETE FROM tokens WHERE hash = sha256(?::bytea)`, tok); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the deleted token refused by the instance that cached it", func() bool {
		r := b.As(tok).Get("/api/v2.0/devices/")
		return r.Status == 401 && strings.Contains(string(r.Body), "401002")
	})
}

// TestFleetDeletedDeviceOnOtherInstance: a device deleted through one instance, then a
// message to its label through another that had it cached: a fresh device is created
// and nothing is written under the deleted one's keys.
func TestFleetDeletedDeviceOnOtherInstance(t *testing.T) {
	tok := env.NewAccount(t)
	a, b := env.Client(t).As(tok), env.Instance(t).As(tok)
	post := func(c *testenv.Client, ts int) {
		t.Helper()
		if r := c.Post("/api/v1.6/devices/fleet-gone/", map[string]any{"t": map[string]any{"value": ts, "timestamp": ts}}); r.Status != 200 {
			t.Fatalf("post: %d %s", r.Status, r.Body)
		}
	}
	post(b, 1)
	post(b, 2) // cached on b now
	oldID, oldKey := deviceKeys(t, "fleet-gone", tok)
	oldVar := variableKey(t, oldKey)
	if r := a.Delete("/api/v2.0/devices/~fleet-gone/"); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	post(b, 3)
	newID, _ := deviceKeys(t, "fleet-gone", tok)
	if newID == oldID {
		t.Fatal("the message went to the deleted device")
	}
	assertNoValues(t, oldVar, 3)
}

// TestFleetStaleEntryNeverWritten: with the invalidation lost (triggers off for the
// session that changes the tables), a cached device or variable that was relabelled or
// deleted is still never written through: the write notices and resolves again.
func TestFleetStaleEntryNeverWritten(t *testing.T) {
	tok := env.NewAccount(t)
	c := env.Client(t).As(tok)
	for _, change := range []struct{ name, sql string }{
		{"device relabelled", `UPDATE devices SET label = 'moved' WHERE id = $1`},
		{"variable relabelled", `UPDATE variables SET label = 'moved' WHERE device_id = $1`},
		{"variable deleted", `DELETE FROM variables WHERE device_id = $1`},
	} {
		t.Run(change.name, func(t *testing.T) {
			dev := "stale-" + strings.ReplaceAll(change.name, " ", "-")
			for ts := range 2 { // the second is served from the caches
				if r := c.Post("/api/v1.6/devices/"+dev+"/", map[string]any{"t": map[string]any{"value": ts, "timestamp": ts}}); r.Status != 200 {
					t.Fatalf("post: %d %s", r.Status, r.Body)
				}
			}
			_, devKey := deviceKeys(t, dev, tok)
			varKey := variableKey(t, devKey)
			silently(t, change.sql, devKey)
			if r := c.Post("/api/v1.6/devices/"+dev+"/", map[string]any{"t": map[string]any{"value": 9, "timestamp": 9}}); r.Status != 200 {
				t.Fatalf("post after the change: %d %s", r.Status, r.Body)
			}
			assertNoValues(t, varKey, 9)
			dots := readValues(t, c, "/api/v1.6/devices/"+dev+"/t/values?start=9&end=9")
			if len(dots) != 1 || dots[0].Value != 9 {
				t.Fatalf("the value is not under the label it was sent to: %v", dots)
			}
		})
	}
}

// silently runs a statement with triggers off (session_replication_role = replica),
// so no invalidation is sent: the caches are left stale on purpose.
func silently(t *testing.T, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	conn, err := env.DB.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, q := range []string{"SET LOCAL session_replication_role = replica", sql} {
		if _, err := tx.Exec(ctx, q, args[:min(len(args), strings.Count(q, "$"))]...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// deviceKeys reads a device's public id and internal key in the token's account.
func deviceKeys(t *testing.T, label, tok string) (string, int64) {
	t.Helper()
	var id string
	var key int64
	err := env.DB.Pool.QueryRow(context.Background(), `SELECT d.public_id, d.id FROM devices d
		JOIN tokens k ON k.account_id = d.account_id WHERE k.hash = sha256($1::bytea) AND d.label = $2`, tok, label).
		Scan(&id, &key)
	if err != nil {
		t.Fatalf("device %s: %v", label, err)
	}
	return id, key
}

// variableKey reads the key of the device's variable t.
func variableKey(t *testing.T, device int64) int64 {
	t.Helper()
	var key int64
	if err := env.DB.Pool.QueryRow(context.Background(), `SELECT id FROM variables WHERE device_id = $1 AND label = 't'`,
		device).Scan(&key); err != nil {
		t.Fatal(err)
	}
	return key
}

// assertNoValues checks that no value with timestamp ts (ms) is stored under a
// variable key.
func assertNoValues(t *testing.T, variable, ts int64) {
	t.Helper()
	var n int
	err := env.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM "values"
		WHERE variable_id = $1 AND ts = to_timestamp($2 / 1000.0)`, variable, ts).Scan(&n)
	if err != nil || n != 0 {
		t.Fatalf("%d values written under stale variable key %d (%v)", n, variable, err)
	}
}

// TestFleetQueueFullAnswers503: while commits are held up, the bounded queue fills;
// a message that finds no room within the wait gets 503003 with Retry-After, and the
// queued ones are committed and acknowledged once the database moves again.
func TestFleetQueueFullAnswers503(t *testing.T) {
	tok := env.NewAccount(t)
	cfg := env.Config()
	cfg.Ingest = config.Ingest{BatchDots: 2, QueueDots: 4, QueueWait: 300 * time.Millisecond, Committers: 2}
	c := env.ClientWith(t, cfg).As(tok)
	if r := c.Post("/api/v1.6/devices/held/", map[string]any{"t": 0}); r.Status != 200 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	_, key := deviceKeys(t, "held", tok)
	ctx := context.Background()
	lock, err := env.DB.Pool.Begin(ctx) // holds the device row: batches wait for it
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(ctx, `SELECT FROM devices WHERE id = $1 FOR UPDATE`, key); err != nil {
		t.Fatal(err)
	}
	const messages = 12
	statuses := make(chan int, messages)
	var wg sync.WaitGroup
	for i := range messages {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := c.Post("/api/v1.6/devices/held/", map[string]any{"t": map[string]any{"value": i, "timestamp": 1 + i}})
			if r.Status == 503 && (r.Header.Get("Retry-After") == "" || !strings.Contains(string(r.Body), "503003")) {
				t.Errorf("503 without Retry-After or code 503003: %s", r.Body)
			}
			statuses <- r.Status
		}()
	}
	time.Sleep(time.Second) // every message has queued or given up by now
	if err := lock.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(statuses)
	counts := map[int]int{}
	for s := range statuses {
		counts[s]++
	}
	if counts[503] == 0 || counts[200] == 0 || counts[200]+counts[503] != messages {
		t.Fatalf("statuses %v: want some 200 (queued) and some 503 (no room), nothing else", counts)
	}
	if n := len(readValues(t, c, "/api/v1.6/devices/held/t/values?start=1&end=100")); n != counts[200] {
		t.Fatalf("%d dots stored, %d acknowledged", n, counts[200])
	}
}

// TestFleetListenerGapPurgesCaches: when the listening connection drops, whatever was
// notified meanwhile is lost, so the caches are dropped: a token deleted without any
// notification reaching the instance is refused once the listener has reconnected.
func TestFleetListenerGapPurgesCaches(t *testing.T) {
	b := env.Instance(t)
	tok := env.NewAccount(t)
	for range 2 { // the second from the cache
		if r := b.As(tok).Get("/api/v2.0/devices/"); r.Status != 200 {
			t.Fatalf("before: %d %s", r.Status, r.Body)
		}
	}
	silently(t, `DELETE FROM tokens WHERE hash = sha256(convert_to($1, 'UTF8'))`, tok)
	if r := b.As(tok).Get("/api/v2.0/devices/"); r.Status != 200 {
		t.Fatalf("the cache was not in use: %d", r.Status)
	}
	var n int
	if err := env.DB.Pool.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND datname = current_database()`, notify.ApplicationName).Scan(&n); err != nil || n == 0 {
		t.Fatalf("terminated %d listeners (%v)", n, err)
	}
	for deadline := time.Now().Add(testenv.Patience); ; time.Sleep(20 * time.Millisecond) {
		r := b.As(tok).Get("/api/v2.0/devices/")
		if r.Status == 401 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %d after the listener's reconnection", r.Status)
		}
	}
}

// TestRollupsStayExactUnderRandomMutations: random inserts, overwrites, late dots and
// range deletes, single and batched, leave the minute rollups equal to the values
// (what `sensorapi rollups check` compares).
func TestRollupsStayExactUnderRandomMutations(t *testing.T) {
	c := env.Client(t).As(env.NewAccount(t))
	rng := rand.New(rand.NewPCG(7, 11))
	const span = 20 * 60_000 // twenty minutes, so that minutes are shared
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var written []int64 // this writer's timestamps, to overwrite some
			for i := range 60 {
				dev := fmt.Sprintf("mut-%d", w%2)
				ts := func(k int) int64 { // this writer's own
					t := int64((k*7919+w*13)%span) + 1
					written = append(written, t)
					return t
				}
				var body any
				switch {
				case i%10 == 9: // an overwrite of an earlier dot
					body = map[string]any{"v": map[string]any{"value": -float64(i), "timestamp": written[(i*31)%len(written)]}}
				case i%3 == 0: // one new dot
					body = map[string]any{"v": map[string]any{"value": float64(i*w) - 30.5, "timestamp": ts(i * 100)}}
				default: // a batch of several new ones
					var dots []any
					for j := range 5 {
						dots = append(dots, map[string]any{"value": float64(j - i), "timestamp": ts(i*100 + j + 1)})
					}
					body = map[string]any{"v": dots, "u": dots[:2]}
				}
				if r := c.Post("/api/v1.6/devices/"+dev+"/", body); r.Status != 200 {
					t.Errorf("write: %d %s", r.Status, r.Body)
					return
				}
			}
		}()
	}
	wg.Wait()
	for d := range 2 {
		id := c.Get(fmt.Sprintf("/api/v2.0/devices/~mut-%d/variables/~v/", d)).Object(t)["id"].(string)
		start := rng.IntN(span / 2)
		end := start + rng.IntN(span/2)
		if r := c.Delete(fmt.Sprintf("/api/v1.6/variables/%s/values/%d/%d", id, start, end)); r.Status != 204 {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
	}
	st := &values.Store{Pool: env.DB.Pool}
	for d := range 2 {
		_, dev := deviceKeys(t, fmt.Sprintf("mut-%d", d), c.Token)
		for _, label := range []string{"v", "u"} {
			var key int64
			if err := env.DB.Pool.QueryRow(context.Background(), `SELECT id FROM variables WHERE device_id = $1 AND label = $2`,
				dev, label).Scan(&key); err != nil {
				t.Fatal(err)
			}
			bad, err := st.CheckVariable(context.Background(), key, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if len(bad) > 0 {
				t.Fatalf("%d minutes of %s differ from their values, first %+v", len(bad), label, bad[0])
			}
		}
	}
}
