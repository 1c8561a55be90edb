package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/pkg/values"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// parseCSV checks an export's headers and parses its body with encoding/csv.
func parseCSV(t *testing.T, r testenv.Response, filename string) [][]string {
	t.Helper()
	if r.Status != 200 || r.Header.Get("Content-Type") != "text/csv; charset=utf-8" {
		t.Fatalf("%d %s: %.300s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	if got := r.Header.Get("Content-Disposition"); got != `attachment; filename="`+filename+`"` {
		t.Errorf("Content-Disposition %q, want the file %s", got, filename)
	}
	records, err := csv.NewReader(bytes.NewReader(r.Body)).ReadAll()
	if err != nil {
		t.Fatalf("not CSV: %v\n%s", err, r.Body)
	}
	return records
}

// exportedValues are the values of the test below: the doubles whose shortest forms
// are hardest to get right, and contexts that need every kind of CSV quoting.
var exportedValues = []float64{0.30000000000000004 /* 0.1 + 0.2 in doubles */, 1e-300, 5e-324, math.Copysign(0, -1), 0, math.MaxFloat64,
	-math.SmallestNonzeroFloat64, 123456789.125, 1e21, 1e-7, 2.5e-8, -1.5, 1 << 53, 1 / 3.0}

var exportedContexts = []any{nil, map[string]any{"note": "a, b"}, map[string]any{"q": `say "hi", ok`},
	map[string]any{"nl": "line1\nline2\r\nend"}, map[string]any{"all": ",\"\n\r", "n": 1.5, "u": "ünï ☃"}}

// TestCSVExportRoundTripsBitExact: a value list as CSV parses back (encoding/csv,
// strconv.ParseFloat) to the very doubles written, -0 and subnormals included, with each
// context as JSON text, newest first, and equals the JSON list dot for dot; with
// timestamp_format=iso the times are the same instants with Berlin's offset on each
// side of the change to summer time.
func TestCSVExportRoundTripsBitExact(t *testing.T) {
	c, _ := freshClient(t)
	base := time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC).UnixMilli() // Berlin: +01:00 until 01:00 UTC, then +02:00
	var body []map[string]any
	for i, v := range exportedValues {
		d := map[string]any{"timestamp": base + int64(i)*15*60_000, "value": v}
		if ctx := exportedContexts[i%len(exportedContexts)]; ctx != nil {
			d["context"] = ctx
		}
		body = append(body, d)
	}
	if r := c.Post("/api/v1.6/devices/csv-dev/x/values", body); r.Status != 201 {
		t.Fatalf("post: %d %s", r.Status, r.Body)
	}
	list := readValues(t, c, "/api/v1.6/devices/csv-dev/x/values?page_size=1000")
	rows := parseCSV(t, c.Get("/api/v1.6/devices/csv-dev/x/values?format=csv&page=2&page_size=1"), "values-csv-dev-x.csv")
	if !reflect.DeepEqual(rows[0], []string{"timestamp", "value", "context", "created_at"}) || len(rows) != len(body)+1 {
		t.Fatalf("header %v and %d rows for %d values", rows[0], len(rows)-1, len(body))
	}
	for k, row := range rows[1:] {
		i := len(body) - 1 - k // newest first
		v, err := strconv.ParseFloat(row[1], 64)
		if err != nil || math.Float64bits(v) != math.Float64bits(exportedValues[i]) {
			t.Errorf("row %d: value %q reads back as %v (%v), written %v", k, row[1], v, err, exportedValues[i])
		}
		ctx := exportedContexts[i%len(exportedContexts)]
		if ctx == nil {
			ctx = map[string]any{}
		}
		var got any
		if err := json.Unmarshal([]byte(row[2]), &got); err != nil || !reflect.DeepEqual(got, ctx) {
			t.Errorf("row %d: context %q, written %v (%v)", k, row[2], ctx, err)
		}
		j := list[k]
		if row[0] != strconv.FormatInt(body[i]["timestamp"].(int64), 10) || row[0] != strconv.FormatInt(j.Timestamp, 10) ||
			row[3] != strconv.FormatInt(j.CreatedAt, 10) || math.Float64bits(j.Value) != math.Float64bits(v) {
			t.Errorf("row %d: %v, JSON list %+v", k, row, j)
		}
	}

	// ISO times in the request's zone, by id, a sub-range
	id := c.VariableID("csv-dev", "x")
	path := fmt.Sprintf("/api/v1.6/variables/%s/values?format=csv&timestamp_format=iso&tz=Europe/Berlin&start=%d&end=%d",
		id, base+30*60_000, base+90*60_000)
	iso := parseCSV(t, c.Get(path), "values-"+id+".csv")
	want := []string{"2026-03-29T03:30:00.000+02:00", "2026-03-29T03:15:00.000+02:00", "2026-03-29T03:00:00.000+02:00",
		"2026-03-29T01:45:00.000+01:00", "2026-03-29T01:30:00.000+01:00"}
	if len(iso) != len(want)+1 {
		t.Fatalf("%d rows in [start, end], want %d: %v", len(iso)-1, len(want), iso)
	}
	for k, w := range want {
		created, err := time.Parse(time.RFC3339Nano, iso[k+1][3])
		if iso[k+1][0] != w || err != nil || created.UnixMilli() != list[len(body)-3-k].CreatedAt {
			t.Errorf("iso row %d: %v, want timestamp %s and created_at %d (%v)", k, iso[k+1], w, list[len(body)-3-k].CreatedAt, err)
		}
	}
}

// TestCSVExportOfPackedDaysMatchesJSON: a value list spanning rows and packed days
// (an old day packed between rows) exports exactly what the JSON pages list.
func TestCSVExportOfPackedDaysMatchesJSON(t *testing.T) {
	c, tok := freshClient(t)
	old := time.Now().UTC().Add(-40 * 24 * time.Hour).Truncate(24 * time.Hour)
	var body []map[string]any
	for i := range 3 * 48 { // three days at 30 min
		d := map[string]any{"timestamp": old.Add(time.Duration(i)*30*time.Minute + 1234*time.Millisecond).UnixMilli(), "value": float64(i) / 7}
		if i%5 == 0 {
			d["context"] = map[string]any{"i": i, "s": "x,\"y\""}
		}
		body = append(body, d)
	}
	body = append(body, map[string]any{"value": 42.25})
	if r := c.Post("/api/v1.6/devices/packed-csv/t/values", body); r.Status != 201 {
		t.Fatalf("post: %d %s", r.Status, r.Body)
	}
	var key int64
	if err := env.DB.Pool.QueryRow(context.Background(), `SELECT v.id FROM variables v JOIN devices d ON d.id = v.device_id
		WHERE d.account_id = $1 AND d.label = 'packed-csv'`, accountIDOf(t, tok)).Scan(&key); err != nil {
		t.Fatal(err)
	}
	if n, err := (&values.Store{Pool: env.DB.Pool}).PackDay(context.Background(), key, old.Add(24*time.Hour)); err != nil || n != 48 {
		t.Fatalf("packed %d values of the middle day (%v)", n, err)
	}
	for _, q := range []string{"", fmt.Sprintf("&start=%d&end=%d", old.Add(36*time.Hour).UnixMilli(), old.Add(50*time.Hour).UnixMilli())} {
		list := readValues(t, c, "/api/v1.6/devices/packed-csv/t/values?page_size=10000"+q)
		rows := parseCSV(t, c.Get("/api/v1.6/devices/packed-csv/t/values?format=csv"+q), "values-packed-csv-t.csv")[1:]
		if len(rows) != len(list) || len(list) == 0 {
			t.Fatalf("%d CSV rows, %d in the JSON list", len(rows), len(list))
		}
		for k, d := range list {
			want := []string{strconv.FormatInt(d.Timestamp, 10), strconv.FormatFloat(d.Value, 'f', -1, 64), string(d.Context),
				strconv.FormatInt(d.CreatedAt, 10)}
			if !reflect.DeepEqual(rows[k], want) {
				t.Fatalf("row %d: %q, JSON list %q", k, rows[k], want)
			}
		}
	}
}

// smallBuffers gives each accepted connection a small send buffer, so that a server
// that streams is held by a client that does not read.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err == nil {
		err = setBuffer(conn.(*net.TCPConn), syscall.SO_SNDBUF)
	}
	return conn, err
}

func setBuffer(conn syscall.Conn, opt int) error {
	raw, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, opt, 4096) }); err != nil {
		return err
	}
	return serr
}

// openExports counts the export snapshots open in the test database.
func openExports(t *testing.T) int {
	return sqlCount(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
		AND query LIKE '/* export */%' AND xact_start IS NOT NULL`)
}

// TestCSVExportIsStreamed: the first lines of an export reach the client while the
// server is still reading the range (its snapshot is open, held by a client that does
// not read on through 4 KiB socket buffers): the response is written as it is read,
// not collected first. A failure after the first byte (the export's database
// connection killed) closes the connection without the final chunk: the client sees
// a broken transfer, not a whole-looking file.
func TestCSVExportIsStreamed(t *testing.T) {
	c, _ := freshClient(t)
	const n = 5000 // ~170 KB of CSV, far more than the buffers between server and client
	body := make([]map[string]any, n)
	for i := range body {
		body[i] = map[string]any{"timestamp": 1_700_000_000_000 + int64(i)*1000, "value": float64(i) + 0.5}
	}
	if r := c.Post("/api/v1.6/devices/stream/t/values", body); r.Status != 201 {
		t.Fatalf("post: %d %s", r.Status, r.Body)
	}
	ts := httptest.NewUnstartedServer(c.Server.Handler())
	ts.Listener = smallBuffers{ts.Listener}
	ts.Start()
	t.Cleanup(ts.Close) // after the responses' bodies are closed: it waits for their handlers
	dialer := &net.Dialer{Control: func(_, _ string, raw syscall.RawConn) error {
		var serr error
		err := raw.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	client := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}}
	get := func() *bufio.Reader {
		req, _ := http.NewRequest("GET", ts.URL+"/api/v1.6/devices/stream/t/values?format=csv", nil)
		req.Header.Set("X-Auth-Token", c.Token)
		resp, err := client.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("export: %v %v", resp, err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		br := bufio.NewReader(resp.Body)
		for _, want := range []string{"timestamp,value,context,created_at\n", fmt.Sprintf("%d,%d.5,{},", 1_700_000_000_000+(n-1)*1000, n-1)} {
			if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, want) {
				t.Fatalf("first lines: %q (%v), want %q", line, err, want)
			}
		}
		return br
	}

	br := get()
	if open := openExports(t); open != 1 {
		t.Fatalf("%d export snapshots open when the first lines arrived: the response was not streamed", open)
	}
	rest, err := csv.NewReader(br).ReadAll()
	if err != nil || len(rest) != n-1 || rest[n-2][0] != "1700000000000" {
		t.Fatalf("the rest: %d rows (%v)", len(rest), err)
	}
	testenv.Eventually(t, "the export's snapshot closes", func() bool { return openExports(t) == 0 })

	br = get()
	sqlExec(t, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database()
		AND query LIKE '/* export */%'`)
	if _, err := io.ReadAll(br); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("an export whose database connection died ended with %v, want a broken transfer (unexpected EOF)", err)
	}
}

// TestCSVExportErrorsAreJSON: bad parameters and unknown variables are refused before
// the first byte, as JSON errors naming the field.
func TestCSVExportErrorsAreJSON(t *testing.T) {
	c, _ := freshClient(t)
	postDots(t, c, "errs", "x", [2]float64{1_700_000_000_000, 1})
	id := c.VariableID("errs", "x")
	off := c.OffContract()
	for q, field := range map[string]string{"format=xml": "format", "format=csv&timestamp_format=s": "timestamp_format",
		"format=csv&timestamp_format=iso&tz=Mars/Olympus": "tz", "format=csv&start=x": "start"} {
		r := off.Get("/api/v1.6/variables/" + id + "/values?" + q)
		if r.Status != 400 || r.Header.Get("Content-Type") != "application/json; charset=utf-8" || detailOf(t, r)[field] == nil {
			t.Errorf("%s: %d %s %s", q, r.Status, r.Header.Get("Content-Type"), r.Body)
		}
	}
	if r := c.Get("/api/v1.6/variables/0123456789abcdef01234567/values?format=csv"); r.Status != 404 ||
		r.Header.Get("Content-Type") != "application/json; charset=utf-8" {
		t.Errorf("unknown variable: %d %s %s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	r := off.Post("/api/v1.6/data/stats/resample/?format=tsv", map[string]any{"variables": []string{id}, "aggregation": "mean", "period": "1H"})
	if r.Status != 400 || detailOf(t, r)["format"] == nil {
		t.Errorf("E8 format=tsv: %d %s", r.Status, r.Body)
	}
}

// cell checks a CSV cell against a JSON answer's value: the same double bit for bit, or
// an empty cell for null.
func cell(t *testing.T, what, got string, want any) {
	t.Helper()
	if want == nil {
		if got != "" {
			t.Errorf("%s: %q, want an empty cell (null)", what, got)
		}
		return
	}
	v, err := strconv.ParseFloat(got, 64)
	if err != nil || math.Float64bits(v) != math.Float64bits(want.(float64)) {
		t.Errorf("%s: %q, JSON %v", what, got, want)
	}
}

// msCell checks a CSV time (ms, or ISO 8601 when iso) against a JSON answer's ms.
func msCell(t *testing.T, what, got string, want any, iso bool) {
	t.Helper()
	ms, err := strconv.ParseInt(got, 10, 64)
	if iso {
		var at time.Time
		at, err = time.Parse(time.RFC3339Nano, got)
		ms = at.UnixMilli()
	}
	if err != nil || float64(ms) != want.(float64) {
		t.Errorf("%s: %q, JSON %v (%v)", what, got, want, err)
	}
}

// TestResampleAndAggregationCSV: E8 and E9 as CSV say what their JSON answers say:
// E8 joined as timestamp,<id1>,<id2> (empty cells where JSON has null), E8 and E9
// otherwise as variable,timestamp,value in request order, newest first; an E9 join has
// an empty variable cell; ISO times carry Berlin's offset on each side of the change
// back to winter time.
func TestResampleAndAggregationCSV(t *testing.T) {
	c, _ := freshClient(t)
	from := time.Date(2026, 10, 24, 22, 0, 0, 0, time.UTC).UnixMilli() // Berlin leaves +02:00 at 01:00 UTC
	var a, b [][2]float64
	for i := range 18 {
		ts := float64(from + int64(i)*20*60_000)
		a = append(a, [2]float64{ts, float64(i)*0.1 + 0.2})
		if i < 4 || i > 12 { // gaps: null buckets inside b's series and in the join
			b = append(b, [2]float64{ts, -float64(i) / 3})
		}
	}
	postDots(t, c, "rs", "a", a...)
	postDots(t, c, "rs", "b", b...)
	ids := []string{c.VariableID("rs", "a"), c.VariableID("rs", "b")}
	e8 := map[string]any{"variables": ids, "aggregation": "mean", "period": "1H", "tz": "Europe/Berlin", "start": from, "end": from + 6*3600_000}
	e9 := map[string]any{"variables": ids, "aggregation": "max", "start": from, "end": from + 6*3600_000}
	answer := func(path string, body map[string]any, join bool) []any {
		body["join_dataframes"] = join
		return expectStatus(t, c.Post(path, body), 200)["results"].([]any)
	}
	csvOf := func(path, name string, body map[string]any, query string) [][]string {
		return parseCSV(t, c.Post(path+"?format=csv"+query, body), name)
	}
	const resample, aggregation = "/api/v1.6/data/stats/resample/", "/api/v1.6/data/stats/aggregation/"

	for _, iso := range []bool{false, true} {
		query := map[bool]string{false: "", true: "&timestamp_format=iso"}[iso]
		joined := answer(resample, e8, true)
		rows := csvOf(resample, "resample.csv", e8, query)
		if !reflect.DeepEqual(rows[0], append([]string{"timestamp"}, ids...)) || len(rows) != len(joined)+1 {
			t.Fatalf("E8 joined: header %v, %d rows for %d", rows[0], len(rows)-1, len(joined))
		}
		offsets := map[string]bool{}
		for k, j := range joined {
			row, want := rows[k+1], j.([]any)
			msCell(t, "E8 joined time", row[0], want[0], iso)
			cell(t, "E8 joined "+ids[0], row[1], want[1])
			cell(t, "E8 joined "+ids[1], row[2], want[2])
			offsets[row[0][max(0, len(row[0])-6):]] = true
		}
		if iso && (!offsets["+02:00"] || !offsets["+01:00"]) {
			t.Errorf("E8 ISO times do not change offset at the end of summer time: %v", offsets)
		}
		checkLong(t, "E8", answer(resample, e8, false), csvOf(resample, "resample.csv", e8, query), ids, iso)
		checkLong(t, "E9", answer(aggregation, e9, false), csvOf(aggregation, "aggregation.csv", e9, query), ids, iso)
	}
	all := answer(aggregation, e9, true)
	rows := csvOf(aggregation, "aggregation.csv", e9, "")
	if len(all) != 1 || len(rows) != 2 || rows[1][0] != "" {
		t.Fatalf("E9 joined: %v, CSV %v", all, rows)
	}
	msCell(t, "E9 joined time", rows[1][1], all[0].([]any)[0], false)
	cell(t, "E9 joined value", rows[1][2], all[0].([]any)[1])
}

// checkLong compares a CSV in long format with a separate-series JSON answer.
func checkLong(t *testing.T, what string, series []any, rows [][]string, ids []string, iso bool) {
	t.Helper()
	if !reflect.DeepEqual(rows[0], []string{"variable", "timestamp", "value"}) {
		t.Fatalf("%s header %v", what, rows[0])
	}
	k := 1
	for i, s := range series {
		for _, p := range s.([]any) {
			pair := p.([]any)
			if k >= len(rows) || rows[k][0] != ids[i] {
				t.Fatalf("%s row %d: %v, want variable %s", what, k, rows[min(k, len(rows)-1)], ids[i])
			}
			msCell(t, what+" time", rows[k][1], pair[0], iso)
			cell(t, what+" value", rows[k][2], pair[1])
			k++
		}
	}
	if k != len(rows) || k < 3 {
		t.Errorf("%s: %d CSV rows, %d in JSON", what, len(rows)-1, k-1)
	}
}
