package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/validate"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// unstorable are contexts that encoding/json accepts and PostgreSQL's jsonb refuses
// (each with a data exception: 500 before issue 41), with the message that names why.
var unstorable = []struct{ context, msg string }{
	{`{"k":"x\u0000y"}`, validate.MsgNULEscape},
	{`{"\u0000":1}`, validate.MsgNULEscape},
	{`{"k":"\ud800"}`, validate.MsgLoneSurrogate},
	{`{"k":"\udc00 low first"}`, validate.MsgLoneSurrogate},
	{`{"a":[{"b":{"c":["fine","deep \u0000"]}}]}`, validate.MsgNULEscape},
	{`{"a":[{"b":{"\udbff":1}}]}`, validate.MsgLoneSurrogate},
	{`{"k":1e131072}`, validate.MsgNumericRange},
	{`{"k":[1,{"x":1e-16384}]}`, validate.MsgNumericRange},
}

// refusedByPostgreSQL checks that the database itself refuses the text as jsonb with a
// data exception (SQLSTATE class 22): the case is one the validation must catch.
func refusedByPostgreSQL(t *testing.T, text string) {
	t.Helper()
	var pe *pgconn.PgError
	_, err := env.DB.Pool.Exec(context.Background(), `SELECT $1::text::jsonb`, text)
	if !errors.As(err, &pe) || !strings.HasPrefix(pe.Code, "22") {
		t.Fatalf("PostgreSQL on %s: %v, want a data exception", text, err)
	}
}

// wantInvalid checks a 400001 whose detail is exactly {field: [msg]}.
func wantInvalid(t *testing.T, r testenv.Response, field, msg string) {
	t.Helper()
	want, _ := json.Marshal(map[string]any{"code": 400001, "message": "Validation Error.",
		"detail": map[string][]string{field: {msg}}})
	if r.Status != 400 || !jsonEqual(r.Body, want) {
		t.Errorf("got %d %s\nwant 400 %s", r.Status, r.Body, want)
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// TestContextPostgreSQLCannotStore: a context holding \u0000 or an unpaired surrogate
// escape (as a string or a key, at any depth) or a number beyond numeric is refused on
// every value route with 400001 naming the dot's context, and nothing of the request
// is written: not the device it would create, not the other dots.
func TestContextPostgreSQLCannotStore(t *testing.T) {
	tok := env.NewAccount(t)
	c := env.Client(t).As(tok)
	if r := c.Post("/api/v1.6/devices/ctx-known/t/values", `{"value":0,"timestamp":0}`); r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	id := variableIDOf(t, c, "ctx-known", "t")
	for _, u := range unstorable {
		refusedByPostgreSQL(t, u.context)
		good := `{"value":1,"timestamp":1}`
		bad := `{"value":2,"timestamp":2,"context":` + u.context + `}`
		for _, r := range []struct{ path, body, field string }{
			{"/api/v1.6/devices/ctx-new/", `{"t":` + bad + `}`, "t.context"},
			{"/api/v1.6/devices/ctx-new/", `{"u":1,"t":[` + good + `,` + bad + `]}`, "t.1.context"},
			{"/api/v1.6/devices/ctx-new/t/values", bad, "context"},
			{"/api/v1.6/devices/ctx-known/t/values", `[` + good + `,` + bad + `]`, "1.context"},
			{"/api/v1.6/variables/" + id + "/values", bad, "context"},
			{"/api/v1.6/variables/" + id + "/values", `[` + good + `,` + bad + `]`, "1.context"},
			{"/api/v1.6/collections/values", `[{"variable":"` + id + `","value":1,"timestamp":1},{"variable":"` + id +
				`","value":2,"timestamp":2,"context":` + u.context + `}]`, "1.context"},
		} {
			t.Run(u.context+" "+r.field, func(t *testing.T) { wantInvalid(t, c.Post(r.path, r.body), r.field, u.msg) })
		}
	}
	if n := len(readValues(t, c, "/api/v1.6/devices/ctx-known/t/values")); n != 1 {
		t.Errorf("%d values stored, want the first one alone", n)
	}
	if r := c.Get("/api/v2.0/devices/~ctx-new/"); r.Status != 404 {
		t.Errorf("a refused request created its device: %d %s", r.Status, r.Body)
	}
}

// variableIDOf reads a variable's public id through the API.
func variableIDOf(t *testing.T, c *testenv.Client, device, variable string) string {
	t.Helper()
	r := c.Get("/api/v2.0/devices/~" + device + "/variables/~" + variable + "/")
	if r.Status != 200 {
		t.Fatalf("variable %s/%s: %d %s", device, variable, r.Status, r.Body)
	}
	return r.Object(t)["id"].(string)
}

// TestContextUnicodeRoundTrips: non-ASCII text in contexts (accents, emoji, CJK, as
// UTF-8 or as escapes, surrogate pairs), control characters other than NUL and the
// text "\u0000" (an escaped backslash) are stored and read back exactly, in the
// values and in lastValue.
func TestContextUnicodeRoundTrips(t *testing.T) {
	c := env.Client(t).As(env.NewAccount(t))
	contexts := []string{
		`{"city":"Málaga","note":"café crème"}`,
		`{"emoji":"🌡️🔥😀","cjk":"温度センサー","한국어":"온도"}`,
		`{"escaped":"M\u00e1laga \ud83d\ude00 \u6e29\u5ea6","\u00e9t\u00e9":true}`,
		`{"ctl":"tab\there\u0001\u001f","quote":"\"\\/","plain":"\\u0000 and \\ud800 are text"}`,
		`{"deep":[{"a":{"b":["ü","𝄞",{"c":"\ud834\udd1e"}]}}],"n":[0,-1.5,123456789,1e-7]}`,
	}
	dots := make([]string, len(contexts))
	for i, ctx := range contexts {
		dots[i] = fmt.Sprintf(`{"value":%d,"timestamp":%d,"context":%s}`, i, 1000+i, ctx)
	}
	if r := c.Post("/api/v1.6/devices/unicode/", `{"t":[`+strings.Join(dots, ",")+`]}`); r.Status != 200 {
		t.Fatalf("post: %d %s", r.Status, r.Body)
	}
	got := readValues(t, c, "/api/v1.6/devices/unicode/t/values")
	if len(got) != len(contexts) {
		t.Fatalf("%d values stored, want %d", len(got), len(contexts))
	}
	for _, d := range got {
		if want := contexts[d.Timestamp-1000]; !jsonEqual(d.Context, []byte(want)) {
			t.Errorf("timestamp %d: context read back %s, want %s", d.Timestamp, d.Context, want)
		}
	}
	lv := c.Get("/api/v2.0/devices/~unicode/variables/~t/").Object(t)["lastValue"]
	ctx, _ := json.Marshal(lv.(map[string]any)["context"])
	if want := contexts[len(contexts)-1]; !jsonEqual(ctx, []byte(want)) {
		t.Errorf("lastValue context %s, want %s", ctx, want)
	}
}

// TestContextRefusedBeforeGroupCommit: a message whose context PostgreSQL cannot store,
// sent while other writers' messages wait for their batch (their device held), is
// refused in validation (answered while they still wait: it never joins the queue),
// and they are all acknowledged and stored once the batch commits.
func TestContextRefusedBeforeGroupCommit(t *testing.T) {
	tok := env.NewAccount(t)
	c := env.Client(t).As(tok)
	// the first creates the device and variable, the second fills the caches: the
	// writers below then queue without reading the database
	for range 2 {
		if r := c.Post("/api/v1.6/devices/burst/", `{"t":0}`); r.Status != 200 {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
	}
	release := env.HoldDevice(t, tok, "burst")
	const writers = 20
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"t":{"value":%d,"timestamp":%d,"context":{"i":"n°%d"}}}`, i, 1+i, i)
			if r := c.Post("/api/v1.6/devices/burst/", body); r.Status != 200 {
				t.Errorf("message %d: %d %s", i, r.Status, r.Body)
			}
		}()
	}
	c.WaitQueued(writers, nil)
	answered, sent := make(chan testenv.Response, 1), make(chan struct{})
	go func() {
		answered <- c.Post("/api/v1.6/devices/burst/", `{"t":{"value":-1,"timestamp":100,"context":{"k":"x\u0000y"}}}`)
		close(sent)
	}()
	c.WaitQueued(writers+1, sent) // returns when it is answered, or when it queued
	select {
	case r := <-answered:
		wantInvalid(t, r, "t.context", validate.MsgNULEscape)
	default:
		t.Error("the bad message joined the queue instead of being refused in validation")
		release()
		wantInvalid(t, <-answered, "t.context", validate.MsgNULEscape)
	}
	release()
	wg.Wait()
	stored := readValues(t, c, "/api/v1.6/devices/burst/t/values?start=1&end=100&page_size=1000")
	if len(stored) != writers {
		t.Fatalf("%d values stored, want the %d good ones", len(stored), writers)
	}
	for _, d := range stored {
		if d.Timestamp == 100 || !jsonEqual(d.Context, fmt.Appendf(nil, `{"i":"n°%d"}`, d.Timestamp-1)) {
			t.Errorf("stored %+v", d)
		}
	}
}

// TestDataExceptionInWriteIs400: should a write meet a data exception (SQLSTATE class
// 22) all the same (injected here, as if validation missed a case), its message is
// answered 400001 on "body", not 500, and nothing of it is stored. In a group commit it
// fails the batch, whose messages are then written one by one: the others are
// acknowledged and stored.
func TestDataExceptionInWriteIs400(t *testing.T) {
	tok := env.NewAccount(t)
	c := env.Client(t).As(tok)
	for range 2 { // creates, then fills the caches
		if r := c.Post("/api/v1.6/devices/net/", `{"good":0,"faulty":0}`); r.Status != 200 {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
	}
	_, dev := deviceKeys(t, "net", tok)
	var faulty int64
	if err := env.DB.Pool.QueryRow(context.Background(), `SELECT id FROM variables WHERE device_id = $1 AND label = 'faulty'`,
		dev).Scan(&faulty); err != nil {
		t.Fatal(err)
	}
	for _, code := range []string{"22P05", "22P02", "22003", "22001", "22021"} {
		remove := env.InjectFault(t, faulty, code)
		wantInvalid(t, c.Post("/api/v1.6/devices/net/faulty/values", `{"value":1,"timestamp":1}`), "body", fault.MsgDataRefused)
		remove()
	}

	env.InjectFault(t, faulty, "character_not_in_repertoire")
	release := env.HoldDevice(t, tok, "net")
	const good, bad = 10, 2
	var wg sync.WaitGroup
	send := func(i int, variable string, status int) {
		defer wg.Done()
		r := c.Post("/api/v1.6/devices/net/", fmt.Sprintf(`{%q:{"value":%d,"timestamp":%d}}`, variable, i, 10+i))
		switch {
		case status == 400:
			wantInvalid(t, r, "body", fault.MsgDataRefused)
		case r.Status != status:
			t.Errorf("%s %d: %d %s", variable, i, r.Status, r.Body)
		}
	}
	for i := range good {
		wg.Add(1)
		go send(i, "good", 200)
	}
	c.WaitQueued(good, nil)
	for i := range bad {
		wg.Add(1)
		go send(i, "faulty", 400)
	}
	c.WaitQueued(good+bad, nil) // they pass validation: all in the queue
	release()
	wg.Wait()
	if n := len(readValues(t, c, "/api/v1.6/devices/net/good/values?start=10&end=1000&page_size=1000")); n != good {
		t.Errorf("%d good values stored, want %d", n, good)
	}
	if n := len(readValues(t, c, "/api/v1.6/devices/net/faulty/values?start=1&end=1000")); n != 0 {
		t.Errorf("%d faulty values stored", n)
	}
}
