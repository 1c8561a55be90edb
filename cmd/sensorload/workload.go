package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/sensordata/sensorapi/pkg/loadgen"
)

// op is one kind of request: its route name in the report, its share of the mix and
// how to build one.
type op struct {
	route  string
	weight int
	build  func(w *workload, rng *rand.Rand) (method, path, body string)
}

// ops is the mix: roughly 40% ingestion, 40% reads, 20% analytics.
var ops = []op{
	{"POST /api/v1.6/devices/<dev>/ (bulk)", 20, bulkPost},
	{"POST /api/v1.6/devices/<dev>/<var>/values (1 dot)", 20, dotPost},
	{"GET /api/v1.6/variables/<id>/values", 20, valuesGet},
	{"GET /api/v2.0/devices/", 10, deviceList},
	{"GET /api/v2.0/variables/<id>/", 10, variableGet},
	{"POST /api/v2.0/data/statistics/ (E7)", 10, statistics},
	{"POST /api/v1.6/data/stats/resample/ (E8)", 10, resample},
}

const bulkVariables, bulkDots = 5, 20 // a bulk post: 5 variables × 20 dots

type workload struct {
	ds      dataset
	client  *loadgen.Client
	clients int
	total   int // sum of the weights
}

func newWorkload(url string, ds dataset, clients int) *workload {
	w := &workload{ds: ds, client: &loadgen.Client{URL: url, Token: ds.token,
		HTTP: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: clients}}}}
	for _, o := range ops {
		w.total += o.weight
	}
	w.clients = clients
	return w
}

// run lets the clients loop until d has passed and merges what they saw. Requests in
// flight at the deadline finish (they are counted): cutting them off would only test
// cancellation. ctx (a signal) does cut them off.
func (w *workload) run(ctx context.Context, d time.Duration) *result {
	fmt.Printf("running %d clients for %s...\n", w.clients, d)
	results := make([]*result, w.clients)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for i := range results {
		results[i] = newResult()
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.client1(ctx, deadline, newRand(uint64(i)), results[i])
		}()
	}
	wg.Wait()
	return merge(results, time.Since(start))
}

// client1 is one client: pick an operation by weight, send it, record it, repeat.
func (w *workload) client1(ctx context.Context, deadline time.Time, rng *rand.Rand, r *result) {
	for ctx.Err() == nil && time.Now().Before(deadline) {
		o := w.pick(rng)
		method, path, body := o.build(w, rng)
		t0 := time.Now()
		err := w.client.Do(ctx, method, path, []byte(body))
		r.record(o.route, time.Since(t0), err)
	}
}

func (w *workload) pick(rng *rand.Rand) op {
	n := rng.IntN(w.total)
	for _, o := range ops {
		if n < o.weight {
			return o
		}
		n -= o.weight
	}
	return ops[len(ops)-1]
}

// newRand is client i's generator: runs are reproducible in what they ask.
func newRand(i uint64) *rand.Rand { return rand.New(rand.NewPCG(i, 42)) }

func pickOf(rng *rand.Rand, xs []string) string { return xs[rng.IntN(len(xs))] }

// nowMs spreads new dots over the last day, so writes land in the newest chunk as a
// live gateway's would, and a repeated timestamp just replaces a value.
func nowMs(rng *rand.Rand) int64 { return time.Now().UnixMilli() - rng.Int64N(86_400_000) }

func bulkPost(w *workload, rng *rand.Rand) (string, string, string) {
	var b bytes.Buffer
	b.WriteByte('{')
	// distinct variables: a repeated key would be one variable twice in one object
	for i, v := range rng.Perm(len(w.ds.varLabels))[:min(bulkVariables, len(w.ds.varLabels))] {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:[", w.ds.varLabels[v])
		for d := range bulkDots {
			if d > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"value":%.2f,"timestamp":%d}`, 20+rng.NormFloat64(), nowMs(rng))
		}
		b.WriteByte(']')
	}
	b.WriteByte('}')
	return "POST", "/api/v1.6/devices/" + pickOf(rng, w.ds.devices) + "/", b.String()
}

func dotPost(w *workload, rng *rand.Rand) (string, string, string) {
	path := "/api/v1.6/devices/" + pickOf(rng, w.ds.devices) + "/" + pickOf(rng, w.ds.varLabels) + "/values"
	return "POST", path, fmt.Sprintf(`{"value":%.2f,"timestamp":%d}`, 20+rng.NormFloat64(), nowMs(rng))
}

func valuesGet(w *workload, rng *rand.Rand) (string, string, string) {
	return "GET", "/api/v1.6/variables/" + pickOf(rng, w.ds.varIDs) + "/values?page_size=100", ""
}

func deviceList(*workload, *rand.Rand) (string, string, string) {
	return "GET", "/api/v2.0/devices/?page_size=50", ""
}

func variableGet(w *workload, rng *rand.Rand) (string, string, string) {
	return "GET", "/api/v2.0/variables/" + pickOf(rng, w.ds.varIDs) + "/", ""
}

// dayWindow is a random day inside the preloaded range (8640 dots per variable).
func dayWindow(w *workload, rng *rand.Rand) (int64, int64) {
	span := w.ds.end.UnixMilli() - w.ds.start.UnixMilli() - 86_400_000
	start := w.ds.start.UnixMilli() + rng.Int64N(max(1, span))
	return start, start + 86_400_000
}

func statistics(w *workload, rng *rand.Rand) (string, string, string) {
	start, end := dayWindow(w, rng)
	body := fmt.Sprintf(`{"start":%d,"end":%d,"variables":[{"variable":%q},{"variable":%q}]}`,
		start, end, pickOf(rng, w.ds.varIDs), pickOf(rng, w.ds.varIDs))
	return "POST", "/api/v2.0/data/statistics/", body
}

func resample(w *workload, rng *rand.Rand) (string, string, string) {
	start, end := dayWindow(w, rng)
	body := fmt.Sprintf(`{"variables":[%q],"aggregation":"mean","period":"15T","tz":"Europe/Madrid","start":%d,"end":%d}`,
		pickOf(rng, w.ds.varIDs), start, end)
	return "POST", "/api/v1.6/data/stats/resample/", body
}
