package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/sensordata/sensorapi/pkg/analytics"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

// browser is a headless Debian chromium driven over CDP, recording every request the
// page makes and every JavaScript error.
type browser struct {
	ctx      context.Context
	mu       sync.Mutex
	requests []string
	errors   []string
}

// newBrowser starts chromium with a fresh profile and the flags this closed network
// needs (no background requests to Google).
func newBrowser(t *testing.T) *browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium not found: install Debian's chromium (make test does, as root)")
	}
	// not t.TempDir: chromium's helpers may still write into the profile while the
	// test's cleanup removes it; removed here best-effort after the browser is gone
	profile, err := os.MkdirTemp("", "sensorapi-console-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(profile) })
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path),
		chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile), chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	b := &browser{ctx: ctx}
	chromedp.ListenTarget(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			b.requests = append(b.requests, e.Request.URL)
		case *runtime.EventExceptionThrown:
			b.errors = append(b.errors, e.ExceptionDetails.Text+" "+fmt.Sprint(e.ExceptionDetails.Exception.Description))
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.APITypeError {
				b.errors = append(b.errors, fmt.Sprint(e.Args))
			}
		}
	})
	if err := chromedp.Run(ctx, network.Enable()); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return b
}

func (b *browser) run(t *testing.T, actions ...chromedp.Action) {
	t.Helper()
	if err := chromedp.Run(b.ctx, actions...); err != nil {
		t.Fatal(err)
	}
}

// text reads an element's text once it is visible.
func (b *browser) text(t *testing.T, sel string) string {
	t.Helper()
	var s string
	b.run(t, chromedp.WaitVisible(sel, chromedp.ByQuery), chromedp.Text(sel, &s, chromedp.ByQuery))
	return s
}

// eventually polls a JavaScript expression until it is true (up to testenv.Patience).
func (b *browser) eventually(t *testing.T, expr string) {
	t.Helper()
	deadline := time.Now().Add(testenv.Patience)
	for {
		var ok bool
		if err := chromedp.Run(b.ctx, chromedp.Evaluate(expr, &ok)); err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not true within %v: %s", testenv.Patience, expr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestConsoleEndToEnd drives the console in a real browser against the real service
// and database, with a read-only token.
func TestConsoleEndToEnd(t *testing.T) {
	admin := env.Client(t).As(env.NewAccount(t))
	now := time.Now().UnixMilli()
	var dots []map[string]any
	for i := range 48 { // the last day, every 30 minutes
		dots = append(dots, map[string]any{"value": float64(i), "timestamp": now - int64(47-i)*1800_000})
	}
	if r := admin.Post("/api/v1.6/devices/e2e-dev/temp/values", dots); r.Status != 201 {
		t.Fatalf("seed: %d %s", r.Status, r.Body)
	}
	varID := admin.Get("/api/v2.0/devices/~e2e-dev/variables/~temp/").Object(t)["id"].(string)
	read := admin.NewToken("/api/v2.0/tokens/", map[string]any{"label": "console", "scope": "read"})
	account := admin.Get("/api/v2.0/account").Object(t)["name"].(string)
	b := newBrowser(t)
	base := admin.URL + "/console/"

	// a wrong token: a message, no data
	b.run(t, chromedp.Navigate(base+"#token=wrong-token"))
	if msg := b.text(t, "#error"); !strings.Contains(msg, "wrong or was revoked") {
		t.Fatalf("wrong token: %q", msg)
	}
	var tables int
	b.run(t, chromedp.Evaluate(`document.querySelectorAll("#devices tr[data-device]").length`, &tables))
	if tables != 0 {
		t.Fatal("devices listed with a wrong token")
	}

	// #token= lists the account's devices, and leaves the address bar
	b.run(t, chromedp.Navigate(base+"#token="+read))
	b.run(t, chromedp.WaitVisible(`#devices tr[data-device="e2e-dev"]`, chromedp.ByQuery))
	var href string
	b.run(t, chromedp.Evaluate(`location.href`, &href))
	if strings.Contains(href, read) {
		t.Fatalf("the token stayed in the address bar: %s", href)
	}

	// a device: its variables' last values, refreshed without a reload
	b.run(t, chromedp.Click(`#devices tr[data-device="e2e-dev"] a`, chromedp.ByQuery))
	if v := b.text(t, `tr[data-variable="temp"] .last-value`); v != "47" {
		t.Fatalf("last value %q, want 47", v)
	}
	if r := admin.Post("/api/v1.6/devices/e2e-dev/temp/values", map[string]any{"value": 99.5, "timestamp": now + 1000}); r.Status != 201 {
		t.Fatalf("post: %d", r.Status)
	}
	b.eventually(t, `document.querySelector('tr[data-variable="temp"] .last-value').textContent === "99.5"`)

	// a variable: the chart has as many points as the endpoint returns buckets
	b.run(t, chromedp.Click(`tr[data-variable="temp"] a`, chromedp.ByQuery))
	checkChart := func(wantPeriod, wantZone string) map[string]any {
		t.Helper()
		b.eventually(t, fmt.Sprintf(`(() => { const c = document.getElementById("chart");
			if (!c || !c.dataset.request || !window.consoleChart) return false;
			const r = JSON.parse(c.dataset.request);
			return r.period === %q && r.tz === %q && document.getElementById("sql").textContent !== ""; })()`,
			wantPeriod, wantZone))
		var raw string
		var points int
		b.run(t, chromedp.Evaluate(`document.getElementById("chart").dataset.request`, &raw),
			chromedp.Evaluate(`consoleChart.data[0].length`, &points))
		var req map[string]any
		if err := json.Unmarshal([]byte(raw), &req); err != nil {
			t.Fatal(err)
		}
		var ans struct {
			Results [][][]any `json:"results"`
		}
		r := admin.Post("/api/v1.6/data/stats/resample/", req)
		if err := json.Unmarshal(r.Body, &ans); err != nil || len(ans.Results) != 1 {
			t.Fatalf("resample: %d %s", r.Status, r.Body)
		}
		if points != len(ans.Results[0]) || points == 0 {
			t.Fatalf("%d points plotted, the endpoint returns %d buckets", points, len(ans.Results[0]))
		}
		return req
	}
	zone := ""
	b.run(t, chromedp.Evaluate(`Intl.DateTimeFormat().resolvedOptions().timeZone`, &zone))
	req := checkChart("1H", zone)

	// the SQL panel is what `sensorapi compile` prints; a plan with its time is shown
	body, _ := json.Marshal(req)
	want, err := analytics.Psql("resample", body, account)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.text(t, "#sql"); got != want {
		t.Fatalf("SQL panel:\n%s\nwant:\n%s", got, want)
	}
	if ms, err := strconv.ParseFloat(b.text(t, "#exec-ms"), 64); err != nil || ms <= 0 || !strings.Contains(b.text(t, "#plan"), `"Node Type"`) {
		t.Fatalf("plan and execution time: %v %v", ms, err)
	}
	// the API ran it with the account's key where sensorapi compile names the account
	var key int64
	if err := env.DB.NewRaw(`SELECT id FROM accounts WHERE name = ?`, account).Scan(context.Background(), &key); err != nil {
		t.Fatal(err)
	}
	ran := strings.ReplaceAll(want, fmt.Sprintf("(SELECT id FROM accounts WHERE name = '%s')", account), strconv.FormatInt(key, 10))
	checkPlanText(t, b.text(t, "#plan-text"), ran)

	// other pickers, new requests
	b.run(t, chromedp.SetValue("#period", "15T", chromedp.ByQuery),
		chromedp.Evaluate(`document.getElementById("period").dispatchEvent(new Event("change"))`, nil))
	checkChart("15T", zone)
	b.run(t, chromedp.SetValue("#tz", "Asia/Kathmandu", chromedp.ByQuery),
		chromedp.Evaluate(`document.getElementById("tz").dispatchEvent(new Event("change"))`, nil))
	checkChart("15T", "Asia/Kathmandu")

	// the time-aware aggregations and fill (API.md §20): a time-weighted average with a
	// gap limit, interpolated, its empty buckets filled by the previous one
	for sel, value := range map[string]string{"#aggregation": "twa", "#method": "linear", "#max_gap": "3600", "#fill": "previous"} {
		b.run(t, chromedp.SetValue(sel, value, chromedp.ByQuery),
			chromedp.Evaluate(`document.querySelector("`+sel+`").dispatchEvent(new Event("change"))`, nil))
	}
	b.eventually(t, `(() => { const r = JSON.parse(document.getElementById("chart").dataset.request);
		return r.aggregation === "twa" && r.method === "linear" && r.max_gap === 3600 && r.fill === "previous"; })()`)
	req = checkChart("15T", "Asia/Kathmandu")
	body, _ = json.Marshal(req)
	if want, err = analytics.Psql("resample", body, account); err != nil || !strings.Contains(want, "refilled AS") {
		t.Fatalf("psql of %s: %v", body, err)
	}
	b.eventually(t, fmt.Sprintf(`document.getElementById("sql").textContent === %q`, want))
	if shot := os.Getenv("CONSOLE_SCREENSHOT"); shot != "" {
		var png []byte
		b.run(t, chromedp.FullScreenshot(&png, 100))
		if err := os.WriteFile(shot, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// a bookmarked view reopens after login in a new tab
	tab, cancel := chromedp.NewContext(b.ctx)
	defer cancel()
	nb := &browser{ctx: tab}
	nb.run(t, chromedp.Navigate(base+"#/variables/"+varID))
	nb.run(t, chromedp.WaitVisible("#token-input", chromedp.ByQuery), chromedp.SendKeys("#token-input", read, chromedp.ByQuery),
		chromedp.Click("#login", chromedp.ByQuery))
	nb.eventually(t, `!!window.consoleChart && document.getElementById("chart").dataset.request !== undefined`)

	// across the whole session: nothing but this server, no token in a URL, no JS error
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, u := range b.requests {
		if !strings.HasPrefix(u, admin.URL+"/") && !strings.HasPrefix(u, "data:") {
			t.Errorf("a request left the server: %s", u)
		}
		if strings.Contains(u, read) || strings.Contains(u, admin.Token) {
			t.Errorf("a token in a request URL: %s", u)
		}
	}
	if len(b.requests) < 10 {
		t.Errorf("only %d requests seen: the listener is not working", len(b.requests))
	}
	if len(b.errors) > 0 {
		t.Errorf("JavaScript errors: %v", b.errors)
	}
}

// TestConsoleSyntheticExpression: a synthetic Variable's view shows its expression
// beside the chart (API.md §17), and its chart draws its computed values; a raw
// Variable's view shows none.
func TestConsoleSyntheticExpression(t *testing.T) {
	admin := env.Client(t).As(env.NewAccount(t))
	now := time.Now().UnixMilli()
	if r := admin.Post("/api/v1.6/devices/syn-dev/c/values", []map[string]any{
		{"value": 10, "timestamp": now - 7200_000}, {"value": 20, "timestamp": now - 60_000}}); r.Status != 201 {
		t.Fatalf("seed: %d %s", r.Status, r.Body)
	}
	const expr = "({{syn-dev.c}} * 9/5) + 32"
	r := admin.Post("/api/v2.0/devices/~syn-dev/variables/", map[string]any{"label": "f", "syntheticExpression": expr})
	if r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	synID := r.Object(t)["id"].(string)
	rawID := admin.Get("/api/v2.0/devices/~syn-dev/variables/~c/").Object(t)["id"].(string)
	b := newBrowser(t)
	base := admin.URL + "/console/"
	b.run(t, chromedp.Navigate(base+"#token="+admin.Token))
	b.run(t, chromedp.WaitVisible(`#devices tr[data-device="syn-dev"]`, chromedp.ByQuery))
	b.run(t, chromedp.Navigate(base+"#/variables/"+synID))
	b.eventually(t, `!!window.consoleChart && document.getElementById("sql").textContent !== ""`)
	if got := b.text(t, "#expression"); got != expr {
		t.Fatalf("expression beside the chart: %q, want %q", got, expr)
	}
	var ys []any
	b.run(t, chromedp.Evaluate(`consoleChart.data[1].filter((y) => y !== null)`, &ys))
	if len(ys) != 2 || ys[0] != 50.0 || ys[1] != 68.0 {
		t.Fatalf("synthetic chart values %v, want [50 68]", ys)
	}
	b.run(t, chromedp.Navigate(base+"#/variables/"+rawID))
	b.eventually(t, `!!window.consoleChart && JSON.parse(document.getElementById("chart").dataset.request).variables[0] === `+
		strconv.Quote(rawID)+` && document.getElementById("sql").textContent !== ""`)
	var shown bool
	b.run(t, chromedp.Evaluate(`!!document.getElementById("expression")`, &shown))
	if shown {
		t.Fatal("a raw variable shows an expression")
	}
}

// planLines keeps the lines of a text plan that say what PostgreSQL did (node headers,
// conditions, keys), with every number replaced by #: two executions of a statement
// differ in their timings and counts, not in these.
func planLines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		t := strings.TrimSpace(l)
		keep := strings.Contains(l, "(cost=") || strings.HasPrefix(t, "InitPlan ") || strings.HasPrefix(t, "SubPlan ")
		for _, k := range []string{"Index Cond:", "Recheck Cond:", "Filter:", "Hash Cond:", "Join Filter:", "Group Key:", "Sort Key:", "Order:"} {
			keep = keep || strings.HasPrefix(t, k)
		}
		if keep {
			out = append(out, planNumber.ReplaceAllString(l, "#"))
		}
	}
	return out
}

var planNumber = regexp.MustCompile(`[0-9]+(\.[0-9]+)?`)

// checkPlanText: the console's text plan is laid out as psql prints EXPLAIN (ANALYZE,
// BUFFERS) for the same statement: the same nodes at the same indents, with the same
// conditions and keys, then buffers and the planning and execution times.
func checkPlanText(t *testing.T, got, statement string) {
	t.Helper()
	rows, err := env.DB.Pool.Query(context.Background(), "EXPLAIN (ANALYZE, BUFFERS) "+statement)
	if err != nil {
		t.Fatal(err)
	}
	var psql []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			t.Fatal(err)
		}
		psql = append(psql, l)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := planLines(strings.Join(psql, "\n"))
	have := planLines(got)
	if len(want) < 3 || strings.Join(have, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the console's plan text:\n%s\n\npsql's, for the same statement:\n%s", got, strings.Join(psql, "\n"))
	}
	for _, line := range []string{"Buffers: shared hit=", "Planning Time: ", "Execution Time: "} {
		if !strings.Contains(got, line) {
			t.Errorf("the console's plan text has no %q line:\n%s", line, got)
		}
	}
}
