package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// variableID reads the public id of a device's variable straight from the tables.
func variableID(t *testing.T, device, variable string) string {
	t.Helper()
	var id string
	err := env.DB.NewRaw(`SELECT v.public_id FROM variables v JOIN devices d ON d.id = v.device_id
		WHERE d.label = ? AND v.label = ?`, device, variable).Scan(context.Background(), &id)
	if err != nil {
		t.Fatalf("variable %s/%s: %v", device, variable, err)
	}
	return id
}

type storedDot struct {
	Value     float64         `json:"value"`
	Timestamp int64           `json:"timestamp"`
	Context   json.RawMessage `json:"context"`
	CreatedAt int64           `json:"created_at"`
}

func readValues(t *testing.T, c *testenv.Client, path string) []storedDot {
	t.Helper()
	r := c.Get(path)
	if r.Status != 200 {
		t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
	}
	var body struct {
		Count   bool        `json:"count"`
		Results []storedDot `json:"results"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil || !body.Count {
		t.Fatalf("GET %s: %v %s", path, err, r.Body)
	}
	return body.Results
}

func TestPostToDeviceCreatesDeviceAndVariables(t *testing.T) {
	c := env.Client(t)
	r := c.Post("/api/v1.6/devices/Weather-1/", map[string]any{
		"temperature": 21.5,
		"humidity":    map[string]any{"value": 40, "timestamp": 1700000000000, "context": map[string]any{"room": "a"}},
		"pressure":    []any{map[string]any{"value": 1000, "timestamp": 1700000000000}, map[string]any{"value": 1001, "timestamp": 1700000001000}},
	})
	want := `{"humidity":[{"status_code":201}],"pressure":[{"status_code":201},{"status_code":201}],"temperature":[{"status_code":201}]}`
	if r.Status != 200 || string(r.Body) != want {
		t.Fatalf("got %d %s", r.Status, r.Body)
	}
	hum := readValues(t, c, "/api/v1.6/devices/weather-1/humidity/values")
	if len(hum) != 1 || hum[0].Value != 40 || hum[0].Timestamp != 1700000000000 || string(hum[0].Context) != `{"room":"a"}` || hum[0].CreatedAt == 0 {
		t.Fatalf("humidity %+v", hum)
	}
	pres := readValues(t, c, "/api/v1.6/variables/"+variableID(t, "weather-1", "pressure")+"/values")
	if len(pres) != 2 || pres[0].Timestamp != 1700000001000 || pres[1].Value != 1000 {
		t.Fatalf("pressure not newest first: %+v", pres)
	}
	if lv := c.Get("/api/v1.6/devices/weather-1/pressure/lv"); lv.Status != 200 || string(lv.Body) != "1001" {
		t.Fatalf("lv %d %s", lv.Status, lv.Body)
	}
	var name string
	var vars int
	_ = env.DB.NewRaw(`SELECT name, variables_number FROM devices WHERE label = 'weather-1'`).Scan(context.Background(), &name, &vars)
	if name != "weather-1" || vars != 3 {
		t.Fatalf("device name %q variables %d", name, vars)
	}
}

func TestSameTimestampKeepsLaterValue(t *testing.T) {
	c := env.Client(t)
	p := "/api/v1.6/devices/dup/t/values"
	if r := c.Post(p, map[string]any{"value": 1, "timestamp": 5000}); r.Status != 201 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	if r := c.Post(p, map[string]any{"value": 2, "timestamp": 5000, "context": map[string]any{"retry": true}}); r.Status != 201 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	// within one request the later dot of the body wins
	if r := c.Post(p, []any{map[string]any{"value": 7, "timestamp": 6000}, map[string]any{"value": 8, "timestamp": 6000}}); r.Status != 201 ||
		string(r.Body) != `[{"status_code":201},{"status_code":201}]` {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	got := readValues(t, c, p)
	if len(got) != 2 || got[0].Value != 8 || got[1].Value != 2 || string(got[1].Context) != `{"retry":true}` {
		t.Fatalf("values %+v", got)
	}
}

func TestBadDotWritesNothing(t *testing.T) {
	c := env.Client(t)
	dots := make([]any, 1000)
	for i := range dots {
		dots[i] = map[string]any{"value": i, "timestamp": 1000 + i}
	}
	dots[3] = map[string]any{"value": "12", "timestamp": 1003}
	dots[500] = map[string]any{"value": 1, "timestamp": -5}
	r := c.Post("/api/v1.6/devices/atomic/", map[string]any{"temperature": dots})
	want := `{"code":400001,"message":"Validation Error.","detail":{"temperature.3.value":["A finite number is required."],"temperature.500.timestamp":["Enter an integer number of milliseconds between 0 and 253402300799999."]}}`
	if r.Status != 400 || string(r.Body) != want {
		t.Fatalf("got %d %s", r.Status, r.Body)
	}
	var n int
	_ = env.DB.NewRaw(`SELECT count(*) FROM devices WHERE label = 'atomic'`).Scan(context.Background(), &n)
	if n != 0 {
		t.Fatal("the device was created by a rejected request")
	}
}

func TestDotValidation(t *testing.T) {
	c := env.Client(t)
	cases := []struct {
		name, body, want string
	}{
		{"string value", `{"value":"1"}`, `{"value":["A finite number is required."]}`},
		{"missing value", `{"timestamp":1}`, `{"value":["A finite number is required."]}`},
		{"huge number", `{"value":1e400}`, `{"value":["A finite number is required."]}`},
		{"fraction timestamp", `{"value":1,"timestamp":1.5}`, `{"timestamp":["Enter an integer number of milliseconds between 0 and 253402300799999."]}`},
		{"timestamp too large", `{"value":1,"timestamp":253402300800000}`, `{"timestamp":["Enter an integer number of milliseconds between 0 and 253402300799999."]}`},
		{"context not object", `{"value":1,"context":[1]}`, `{"context":["Expected an object of at most 8192 bytes serialized."]}`},
		{"context too big", `{"value":1,"context":{"x":"` + strings.Repeat("a", 8200) + `"}}`, `{"context":["Expected an object of at most 8192 bytes serialized."]}`},
		{"string dot", `"12"`, `{"body":["Expected a number, a dot object or a list of them."]}`},
		{"bad item in list", `[1, null]`, `{"1":["Expected a number, a dot object or a list of them."]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := c.Post("/api/v1.6/devices/valid/x/values", tc.body)
			want := `{"code":400001,"message":"Validation Error.","detail":` + tc.want + `}`
			if r.Status != 400 || string(r.Body) != want {
				t.Fatalf("got %d %s\nwant %s", r.Status, r.Body, want)
			}
		})
	}
	for _, body := range []string{`NaN`, `{"value": NaN}`, `{"value": Infinity}`, `{"value": 1`, "\xff"} {
		r := c.Post("/api/v1.6/devices/valid/x/values", body)
		if r.Status != 400 || !strings.Contains(string(r.Body), `"JSON parse error - `) {
			t.Errorf("%q: %d %s", body, r.Status, r.Body)
		}
	}
	if r := c.Do("POST", "/api/v1.6/devices/valid/x/values", "1", "Content-Type", "text/plain"); r.Status != 415 ||
		string(r.Body) != `{"code":415001,"message":"Unsupported media type."}` {
		t.Errorf("text/plain: %d %s", r.Status, r.Body)
	}
	// booleans are 1 and 0
	if r := c.Post("/api/v1.6/devices/valid/b/values", `[{"value":true,"timestamp":1},{"value":false,"timestamp":2}]`); r.Status != 201 {
		t.Fatalf("booleans: %d %s", r.Status, r.Body)
	}
	if got := readValues(t, c, "/api/v1.6/devices/valid/b/values"); len(got) != 2 || got[0].Value != 0 || got[1].Value != 1 {
		t.Fatalf("booleans stored as %+v", got)
	}
}

func TestSingleDotAnswerAndQueryTimestamp(t *testing.T) {
	c := env.Client(t)
	r := c.Post("/api/v1.6/devices/single/v/values?timestamp=1234567", `{"value": 3.25, "context": {"k": 1}}`)
	var d storedDot
	if r.Status != 201 || json.Unmarshal(r.Body, &d) != nil || d.Value != 3.25 || d.Timestamp != 1234567 || string(d.Context) != `{"k":1}` {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
}

func TestCollectionsAndAccountIsolation(t *testing.T) {
	c := env.Client(t)
	c.Post("/api/v1.6/devices/coll/", map[string]any{"a": 1, "b": 2})
	a, b := variableID(t, "coll", "a"), variableID(t, "coll", "b")
	r := c.Post("/api/v1.6/collections/values", []any{
		map[string]any{"variable": a, "value": 10, "timestamp": 100},
		map[string]any{"variable": b, "value": 20, "timestamp": 100},
	})
	if r.Status != 201 || string(r.Body) != `[{"status_code":201},{"status_code":201}]` {
		t.Fatalf("collection: %d %s", r.Status, r.Body)
	}
	other := c.As(env.NewAccount(t))
	if r := other.Post("/api/v1.6/variables/"+a+"/values", `{"value":1}`); r.Status != 404 ||
		string(r.Body) != `{"code":404001,"message":"Not found.","detail":"Variable '`+a+`' was not found."}` {
		t.Fatalf("other account post: %d %s", r.Status, r.Body)
	}
	if r := other.Get("/api/v1.6/variables/" + a + "/values"); r.Status != 404 {
		t.Fatalf("other account read: %d %s", r.Status, r.Body)
	}
	r = other.Post("/api/v1.6/collections/values", []any{map[string]any{"variable": a, "value": 1}})
	if r.Status != 400 || string(r.Body) != `{"code":400001,"message":"Validation Error.","detail":{"0.variable":["Variable not found."]}}` {
		t.Fatalf("other account collection: %d %s", r.Status, r.Body)
	}
	if got := readValues(t, c, "/api/v1.6/variables/"+a+"/values"); len(got) != 2 {
		t.Fatalf("a has %+v", got)
	}
}

func TestDisabledDeviceIsLocked(t *testing.T) {
	c := env.Client(t)
	c.Post("/api/v1.6/devices/off/", map[string]any{"x": 1})
	if _, err := env.DB.ExecContext(context.Background(), `UPDATE devices SET is_active = false WHERE label = 'off'`); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/api/v1.6/devices/off/", "/api/v1.6/devices/off/x/values", "/api/v1.6/variables/" + variableID(t, "off", "x") + "/values"} {
		body := `{"value": 2}`
		if p == "/api/v1.6/devices/off/" {
			body = `{"x": 2}`
		}
		if r := c.Post(p, body); r.Status != 423 || string(r.Body) != `{"code":423001,"message":"Device is disabled."}` {
			t.Fatalf("%s: %d %s", p, r.Status, r.Body)
		}
	}
}

func TestReadRangePagingDeleteAndStatistics(t *testing.T) {
	c := env.Client(t)
	dots := make([]any, 10)
	for i := range dots {
		dots[i] = map[string]any{"value": i + 1, "timestamp": (i + 1) * 1000}
	}
	c.Post("/api/v1.6/devices/rng/v/values", dots)
	id := variableID(t, "rng", "v")
	base := "/api/v1.6/variables/" + id
	got := readValues(t, c, base+"/values?start=3000&end=5000")
	if len(got) != 3 || got[0].Timestamp != 5000 || got[2].Timestamp != 3000 {
		t.Fatalf("inclusive range: %+v", got)
	}
	if string(got[0].Context) != `{}` {
		t.Fatalf("a dot without context reads back with context %s, want {} (as lastValue shows it)", got[0].Context)
	}
	r := c.Get(base + "/values?page_size=4&page=2&start=0")
	body := r.Object(t)
	res := body["results"].([]any)
	if len(res) != 4 || res[0].(map[string]any)["timestamp"].(float64) != 6000 {
		t.Fatalf("page 2: %s", r.Body)
	}
	if !strings.Contains(body["next"].(string), "page=3") || !strings.Contains(body["next"].(string), "start=0") ||
		!strings.Contains(body["previous"].(string), "page=1") {
		t.Fatalf("links: %s", r.Body)
	}
	for agg, want := range map[string]string{"mean": `{"mean":5.5}`, "count": `{"count":10}`, "sum": `{"sum":55}`,
		"min": `{"min":1}`, "max": `{"max":10}`, "variance": fmt.Sprintf(`{"variance":%v}`, 9.166666666666666)} {
		if r := c.Get(base + "/statistics/" + agg + "/0/20000"); r.Status != 200 || string(r.Body) != want {
			t.Errorf("%s: %d %s, want %s", agg, r.Status, r.Body, want)
		}
	}
	if r := c.Get(base + "/statistics/mean/50000/60000"); string(r.Body) != `{"mean":null}` {
		t.Errorf("empty mean: %s", r.Body)
	}
	if r := c.Get(base + "/statistics/count/50000/60000"); string(r.Body) != `{"count":0}` {
		t.Errorf("empty count: %s", r.Body)
	}
	if r := c.Get(base + "/statistics/median/0/1"); r.Status != 400 {
		t.Errorf("unknown statistic: %d", r.Status)
	}
	// deleting the newest values moves lastValue back
	if r := c.Delete(base + "/values/9000/10000"); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if r := c.Get("/api/v1.6/devices/rng/v/lv"); string(r.Body) != "8" {
		t.Fatalf("lv after delete: %s", r.Body)
	}
	var last float64
	_ = env.DB.NewRaw(`SELECT last_value FROM variables WHERE public_id = ?`, id).Scan(context.Background(), &last)
	if last != 8 {
		t.Fatalf("lastValue after delete: %v", last)
	}
}

func TestLastValueMovesOnlyForward(t *testing.T) {
	c := env.Client(t)
	c.Post("/api/v1.6/devices/lvf/v/values", `{"value": 5, "timestamp": 5000}`)
	c.Post("/api/v1.6/devices/lvf/v/values", `{"value": 1, "timestamp": 1000}`)
	var v float64
	var ts int64
	err := env.DB.NewRaw(`SELECT last_value, (extract(epoch FROM last_value_ts)*1000)::bigint FROM variables WHERE label = 'v'
		AND device_id = (SELECT id FROM devices WHERE label = 'lvf')`).Scan(context.Background(), &v, &ts)
	if err != nil || v != 5 || ts != 5000 {
		t.Fatalf("lastValue %v at %d (%v)", v, ts, err)
	}
}

// TestConcurrentWritersLoseNothing: every acknowledged dot is readable afterwards.
func TestConcurrentWritersLoseNothing(t *testing.T) {
	c := env.Client(t)
	const writers, perWriter, batch = 8, 500, 50
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for start := 0; start < perWriter; start += batch {
				dots := make([]any, batch)
				for i := range dots {
					dots[i] = map[string]any{"value": w, "timestamp": int64(w*perWriter + start + i)}
				}
				if r := c.Post("/api/v1.6/devices/conc/", map[string]any{"shared": dots, fmt.Sprintf("own%d", w): dots}); r.Status != 200 {
					t.Errorf("writer %d: %d %s", w, r.Status, r.Body)
					return
				}
			}
		}()
	}
	wg.Wait()
	var n int
	_ = env.DB.NewRaw(`SELECT count(*) FROM "values" WHERE variable_id = (SELECT v.id FROM variables v JOIN devices d ON d.id = v.device_id WHERE d.label = 'conc' AND v.label = 'shared')`).Scan(context.Background(), &n)
	if n != writers*perWriter {
		t.Fatalf("shared holds %d dots, want %d", n, writers*perWriter)
	}
}
