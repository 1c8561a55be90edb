package api_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/pkg/values"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// importDot is one line of an import body.
type importDot struct {
	ts      int64
	value   float64
	context string // JSON text, "" for none
}

// csvBody writes dots as an export does (timestamp,value,context,created_at), with
// encoding/csv's quoting.
func csvBody(t *testing.T, dots []importDot) []byte {
	t.Helper()
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	_ = w.Write([]string{"timestamp", "value", "context", "created_at"})
	for _, d := range dots {
		_ = w.Write([]string{strconv.FormatInt(d.ts, 10), strconv.FormatFloat(d.value, 'g', -1, 64), d.context, "1763768650123"})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	z := gzip.NewWriter(&out)
	if _, err := z.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// importTo posts an import body and returns the answer.
func importTo(c *testenv.Client, path, contentType string, body []byte, header ...string) testenv.Response {
	return c.Do("POST", path, body, append([]string{"Content-Type", contentType}, header...)...)
}

// storedDots reads every value of a variable through the API (newest first).
func storedDots(t *testing.T, c *testenv.Client, path string) []map[string]any {
	t.Helper()
	r := expectStatus(t, c.Get(path+"?page_size=10000"), 200)
	var out []map[string]any
	for _, d := range r["results"].([]any) {
		out = append(out, d.(map[string]any))
	}
	return out
}

// exactValues reads a variable's values as timestamp → value, from the JSON text, so
// that -0 and subnormals are compared bit for bit.
func exactValues(t *testing.T, c *testenv.Client, path string) (map[int64]float64, map[int64]string) {
	t.Helper()
	r := c.Get(path + "?page_size=10000")
	if r.Status != 200 {
		t.Fatalf("read values: %d %s", r.Status, r.Body)
	}
	var page struct {
		Results []struct {
			Timestamp int64           `json:"timestamp"`
			Value     json.Number     `json:"value"`
			Context   json.RawMessage `json:"context"`
		} `json:"results"`
	}
	d := json.NewDecoder(bytes.NewReader(r.Body))
	d.UseNumber()
	if err := d.Decode(&page); err != nil {
		t.Fatal(err)
	}
	vals, ctxs := map[int64]float64{}, map[int64]string{}
	for _, p := range page.Results {
		f, err := strconv.ParseFloat(p.Value.String(), 64)
		if err != nil {
			t.Fatal(err)
		}
		if _, dup := vals[p.Timestamp]; dup {
			t.Fatalf("two values at %d", p.Timestamp)
		}
		vals[p.Timestamp], ctxs[p.Timestamp] = f, string(p.Context)
	}
	return vals, ctxs
}

// sameJSON compares two JSON texts as values.
func sameJSON(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && fmt.Sprint(x) == fmt.Sprint(y)
}

// TestImportRoundTripExact: values at the edges of float64 and contexts with commas,
// quotes and newlines come back bit for bit; the last value, the tiles and the answer
// follow.
func TestImportRoundTripExact(t *testing.T) {
	scope := env.NewDriftScope(t)
	c, _ := freshClient(t)
	dots := []importDot{
		{1000, 0.1 + 0.2, `{"note":"a, b, c"}`},
		{2000, 1e-300, `{"quote":"say \"hi\"","list":[1,2]}`},
		{3000, 5e-324, `{"lines":"one\ntwo\r\nthree"}`},
		{4000, math.Copysign(0, -1), ""},
		{5000, -math.MaxFloat64, `{"empty":""}`},
		{6000, 123456.789e10, `{"u":"Grüße ✓"}`},
	}
	r := importTo(c, "/api/v1.6/devices/lab/probe/values/import", "text/csv", csvBody(t, dots))
	if r.Status != 200 || r.Object(t)["rows"] != 6.0 || r.Object(t)["variables"] != 1.0 {
		t.Fatalf("import: %d %s", r.Status, r.Body)
	}
	vals, ctxs := exactValues(t, c, "/api/v1.6/devices/lab/probe/values")
	if len(vals) != len(dots) {
		t.Fatalf("%d values stored, want %d", len(vals), len(dots))
	}
	for _, d := range dots {
		if math.Float64bits(vals[d.ts]) != math.Float64bits(d.value) {
			t.Errorf("at %d: %v (%#x), want %v (%#x)", d.ts, vals[d.ts], math.Float64bits(vals[d.ts]), d.value, math.Float64bits(d.value))
		}
		want := d.context
		if want == "" {
			want = "{}"
		}
		if !sameJSON(ctxs[d.ts], want) {
			t.Errorf("context at %d: %s, want %s", d.ts, ctxs[d.ts], want)
		}
	}
	v := expectStatus(t, c.Get("/api/v2.0/devices/~lab/variables/~probe/"), 200)
	lv := v["lastValue"].(map[string]any)
	if lv["timestamp"] != 6000.0 || lv["value"] != 123456.789e10 {
		t.Fatalf("lastValue %v", lv)
	}
	if drift, _ := env.RollupDrift(t, scope); drift != 0 {
		t.Fatalf("%d tiles differ from the values", drift)
	}
}

// TestImportBadLineWritesNothing: a bad line near the end of a 50,000-line file fails
// the import naming its line, and nothing is written (not even the device the route
// would create); contexts PostgreSQL cannot store are refused naming theirs.
func TestImportBadLineWritesNothing(t *testing.T) {
	c, _ := freshClient(t)
	dots := make([]importDot, 49_999)
	for i := range dots {
		dots[i] = importDot{ts: int64(i+1) * 1000, value: float64(i)}
	}
	dots[49_988].value = math.NaN() // line 49,990 of the file: the header is line 1
	body := csvBody(t, dots)
	r := importTo(c, "/api/v1.6/devices/bad/probe/values/import", "text/csv", body)
	detail := detailOf(t, r)
	if len(detail) != 1 || fmt.Sprint(detail["line 49990.value"]) != "[A finite number is required.]" {
		t.Fatalf("detail %v", detail)
	}
	if r := c.Get("/api/v2.0/devices/~bad/"); r.Status != 404 {
		t.Fatalf("the device was created: %d %s", r.Status, r.Body)
	}
	if n := sqlCount(t, `SELECT count(*) FROM pg_tables WHERE tablename LIKE 'import\_%'`); n != 0 {
		t.Fatalf("%d staging tables left", n)
	}

	nd := "{\"timestamp\": 1, \"value\": 1}\n\n" +
		`{"timestamp": 2, "value": 2, "context": {"k": "a\u0000b"}}` + "\n" +
		`{"timestamp": 3, "value": 3, "context": {"k": "\ud800"}}` + "\n" +
		`{"timestamp": -4, "value": "x"}` + "\n" + `not json` + "\n"
	detail = detailOf(t, importTo(c, "/api/v1.6/devices/bad/probe/values/import", "application/x-ndjson", []byte(nd)))
	for _, k := range []string{"line 3.context", "line 4.context", "line 5.timestamp", "line 5.value", "line 6"} {
		if detail[k] == nil {
			t.Errorf("no problem named %q: %v", k, detail)
		}
	}
	if r := c.Get("/api/v2.0/devices/~bad/"); r.Status != 404 {
		t.Fatalf("the device was created: %d", r.Status)
	}
	// at most 100 problems are listed
	many := strings.Repeat("1,x\n", 300)
	if d := detailOf(t, importTo(c, "/api/v1.6/devices/bad/probe/values/import", "text/csv", []byte("timestamp,value\n"+many))); len(d) != 100 {
		t.Fatalf("%d problems listed, want 100", len(d))
	}
}

// TestImportDuplicatesLaterWins: the same timestamp twice in a file, and one stored
// before: the later line wins, in the values and the last value.
func TestImportDuplicatesLaterWins(t *testing.T) {
	scope := env.NewDriftScope(t)
	c, _ := freshClient(t)
	postDot(t, c, "dup", "t", 1, 3000)
	body := csvBody(t, []importDot{{3000, 30, `{"n":1}`}, {1000, 10, ""}, {3000, 31, `{"n":2}`}, {2000, 20, ""}, {1000, 11, ""}})
	r := importTo(c, "/api/v1.6/devices/dup/t/values/import", "text/csv", body)
	if r.Status != 200 || r.Object(t)["rows"] != 5.0 {
		t.Fatalf("import: %d %s", r.Status, r.Body)
	}
	vals, ctxs := exactValues(t, c, "/api/v1.6/devices/dup/t/values")
	if fmt.Sprint(vals) != "map[1000:11 2000:20 3000:31]" || !sameJSON(ctxs[3000], `{"n":2}`) {
		t.Fatalf("values %v contexts %v", vals, ctxs)
	}
	lv := expectStatus(t, c.Get("/api/v2.0/devices/~dup/variables/~t/"), 200)["lastValue"].(map[string]any)
	if lv["value"] != 31.0 {
		t.Fatalf("lastValue %v", lv)
	}
	if drift, _ := env.RollupDrift(t, scope); drift != 0 {
		t.Fatalf("%d tiles differ from the values", drift)
	}
}

// TestImportIntoPackedDay: an import into a packed day (some timestamps replaced, some
// new) reads back exactly, as a write into it would, and the tiles follow.
func TestImportIntoPackedDay(t *testing.T) {
	scope := env.NewDriftScope(t)
	c, _ := freshClient(t)
	day := time.Now().Add(-5 * 24 * time.Hour).UTC().Truncate(24 * time.Hour).UnixMilli()
	for i := range 5 {
		postDot(t, c, "old", "t", float64(i), day+int64(i)*3600_000)
	}
	var key int64
	if err := env.DB.Pool.QueryRow(context.Background(), `SELECT v.id FROM variables v JOIN devices d ON d.id = v.device_id
		WHERE d.label = 'old' AND v.label = 't' ORDER BY v.id DESC LIMIT 1`).Scan(&key); err != nil {
		t.Fatal(err)
	}
	st := &values.Store{Pool: env.DB.Pool}
	if n, err := st.PackDay(context.Background(), key, time.UnixMilli(day).UTC()); err != nil || n != 5 {
		t.Fatalf("packed %d (%v)", n, err)
	}
	nd := fmt.Sprintf("{\"timestamp\": %d, \"value\": 100}\n{\"timestamp\": %d, \"value\": 2.5}\n", day+3600_000, day+90*60_000)
	r := importTo(c, "/api/v1.6/devices/old/t/values/import", "application/x-ndjson", []byte(nd))
	if r.Status != 200 {
		t.Fatalf("import: %d %s", r.Status, r.Body)
	}
	vals, _ := exactValues(t, c, "/api/v1.6/devices/old/t/values")
	want := map[int64]float64{day: 0, day + 3600_000: 100, day + 90*60_000: 2.5, day + 2*3600_000: 2, day + 3*3600_000: 3, day + 4*3600_000: 4}
	if fmt.Sprint(vals) != fmt.Sprint(want) {
		t.Fatalf("values %v, want %v", vals, want)
	}
	if drift, _ := env.RollupDrift(t, scope); drift != 0 {
		t.Fatalf("%d tiles differ from the values", drift)
	}
}

// TestImportFeedsSyntheticAndEvents: an import is a write like any other for the
// followers: a synthetic variable over it is recomputed, an event over it fires.
func TestImportFeedsSyntheticAndEvents(t *testing.T) {
	c := env.ClientWith(t, eventConfig()).As(env.NewAccount(t))
	rcv := newReceiver(t)
	postDot(t, c, "boiler", "temp", 20, 1000)
	f := createVariable(t, c, "~boiler", map[string]any{"label": "double", "syntheticExpression": "{{boiler.temp}} * 2"})
	createEvent(t, c, map[string]any{"label": "hot", "condition": map[string]any{
		"variable": "boiler.temp", "operator": ">", "value": 80}, "actions": []any{webhook(rcv)}})
	body := csvBody(t, []importDot{{2000, 50, ""}, {3000, 85, ""}, {4000, 90, ""}})
	if r := importTo(c, "/api/v1.6/devices/boiler/temp/values/import", "text/csv", body); r.Status != 200 {
		t.Fatalf("import: %d %s", r.Status, r.Body)
	}
	waitValues(t, c, jsonString(f, "id"), map[int64]float64{1000: 40, 2000: 100, 3000: 170, 4000: 180}, testenv.Patience)
	h := rcv.wait(t, 1, testenv.Patience)
	var got map[string]any
	if err := json.Unmarshal(h[0].Body, &got); err != nil || got["state"] != "triggered" || got["ts"] != 3000.0 {
		t.Fatalf("webhook %s", h[0].Body)
	}
	// the synthetic variable's own values cannot be imported
	detail := detailOf(t, importTo(c, "/api/v1.6/devices/boiler/double/values/import", "text/csv", body))
	if detail["double"] == nil {
		t.Fatalf("detail %v", detail)
	}
}

// TestImportCollectionNDJSONGzip: a gzipped collection import creates its devices and
// variables and writes each line to its own.
func TestImportCollectionNDJSONGzip(t *testing.T) {
	c, _ := freshClient(t)
	var b strings.Builder
	for i := range 10 {
		fmt.Fprintf(&b, `{"device": "Dev-%d", "variable": "v", "timestamp": %d, "value": %d}`+"\n", i%2, 1000*(i+1), i)
	}
	r := importTo(c, "/api/v1.6/collections/values/import", "application/x-ndjson", gzipped(t, []byte(b.String())), "Content-Encoding", "gzip")
	if r.Status != 200 || r.Object(t)["rows"] != 10.0 || r.Object(t)["variables"] != 2.0 {
		t.Fatalf("import: %d %s", r.Status, r.Body)
	}
	for dev, want := range map[string]string{"dev-0": "map[1000:0 3000:2 5000:4 7000:6 9000:8]", "dev-1": "map[2000:1 4000:3 6000:5 8000:7 10000:9]"} {
		if vals, _ := exactValues(t, c, "/api/v1.6/devices/"+dev+"/v/values"); fmt.Sprint(vals) != want {
			t.Errorf("%s: %v, want %s", dev, vals, want)
		}
	}
	csvText := "variable,device,value,timestamp\nw,dev-0,7,1000\nw,dev-2,8,1000\n"
	r = importTo(c, "/api/v1.6/collections/values/import", "text/csv", gzipped(t, []byte(csvText)), "Content-Encoding", "gzip")
	if r.Status != 200 || r.Object(t)["variables"] != 2.0 {
		t.Fatalf("csv collection: %d %s", r.Status, r.Body)
	}
	if d := storedDots(t, c, "/api/v1.6/devices/dev-2/w/values"); len(d) != 1 || d[0]["value"] != 8.0 {
		t.Fatalf("dev-2/w: %v", d)
	}
	// by id, to an existing variable
	id := jsonString(expectStatus(t, c.Get("/api/v2.0/devices/~dev-0/variables/~w/"), 200), "id")
	if r := importTo(c, "/api/v1.6/variables/"+id+"/values/import", "text/csv", []byte("value,timestamp\n9,2000\n")); r.Status != 200 {
		t.Fatalf("by id: %d %s", r.Status, r.Body)
	}
	if vals, _ := exactValues(t, c, "/api/v1.6/variables/"+id+"/values"); fmt.Sprint(vals) != "map[1000:7 2000:9]" {
		t.Fatalf("by id: %v", vals)
	}
}

// TestImportLimits: a body past SENSORAPI_IMPORT_MAX_BYTES is a 413, as sent and
// decompressed; another media type a 415.
func TestImportLimits(t *testing.T) {
	cfg := env.Config()
	cfg.ImportMaxBytes = 4096
	c := env.ClientWith(t, cfg).As(env.NewAccount(t))
	dots := make([]importDot, 400)
	for i := range dots {
		dots[i] = importDot{ts: int64(i) * 1000, value: 1}
	}
	body := csvBody(t, dots)
	if len(body) <= 4096 || len(gzipped(t, body)) > 4096 {
		t.Fatalf("body %d bytes, gzipped %d", len(body), len(gzipped(t, body)))
	}
	path := "/api/v1.6/devices/big/t/values/import"
	for _, r := range []testenv.Response{importTo(c, path, "text/csv", body),
		importTo(c, path, "text/csv", gzipped(t, body), "Content-Encoding", "gzip")} {
		if r.Status != 413 || r.Object(t)["code"] != 413001.0 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	}
	// sent chunked, without a length: cut while it streams
	req, err := http.NewRequest("POST", c.URL+path, io.MultiReader(bytes.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/csv")
	req.Header.Set("X-Auth-Token", c.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 413 || req.ContentLength != 0 {
		t.Fatalf("chunked: %d (length %d)", resp.StatusCode, req.ContentLength)
	}
	if r := c.Get("/api/v2.0/devices/~big/"); r.Status != 404 {
		t.Fatalf("the device was created: %d", r.Status)
	}
	if r := importTo(c, path, "application/json", []byte(`[]`)); r.Status != 415 {
		t.Fatalf("json body: %d %s", r.Status, r.Body)
	}
	if r := importTo(c, path, "text/csv", body[:2000]); r.Status != 200 {
		t.Fatalf("a body within the limit: %d %s", r.Status, r.Body)
	}
}

// TestImportClientGoneWritesNothing: a client that disconnects mid-upload (its COPY
// running) leaves nothing: no values, no device, no staging table.
func TestImportClientGoneWritesNothing(t *testing.T) {
	c, tok := freshClient(t)
	u, err := url.Parse(c.URL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	dots := make([]importDot, 20_000)
	for i := range dots {
		dots[i] = importDot{ts: int64(i+1) * 1000, value: float64(i)}
	}
	body := csvBody(t, dots)
	fmt.Fprintf(conn, "POST /api/v1.6/devices/gone/t/values/import HTTP/1.1\r\nHost: %s\r\nX-Auth-Token: %s\r\n"+
		"Content-Type: text/csv\r\nContent-Length: %d\r\n\r\n", u.Host, tok, len(body)+1000)
	if _, err := conn.Write(body); err != nil {
		t.Fatal(err)
	}
	copying := func() int {
		return sqlCount(t, `SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'copy import\_%'`)
	}
	waitFor(t, "the import's COPY to run", func() bool { return copying() == 1 })
	_ = conn.Close()
	waitFor(t, "the import to end", func() bool { return copying() == 0 })
	waitFor(t, "the staging table to go", func() bool {
		return sqlCount(t, `SELECT count(*) FROM pg_tables WHERE tablename LIKE 'import\_%'`) == 0
	})
	if r := c.Get("/api/v2.0/devices/~gone/"); r.Status != 404 {
		t.Fatalf("the device was created: %d %s", r.Status, r.Body)
	}
}

// waitFor polls cond until it holds, or fails after testenv.Patience.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(testenv.Patience); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", testenv.Patience, what)
		}
	}
}
