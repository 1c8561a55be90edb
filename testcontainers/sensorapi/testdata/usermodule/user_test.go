// A user's CI test in a module of its own, the way docs/testing.md shows:
// outside_test.go copies it into a fresh module that requires sensorapi and runs it.
package usermodule_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/sensordata/sensorapi/testcontainers/sensorapi"
)

func TestUserCI(t *testing.T) {
	ctx := context.Background()
	img := os.Getenv("SENSORAPI_TEST_IMAGE")
	if err := sensorapi.BuildImage(ctx, img); err != nil { // from the module's source
		t.Fatal(err)
	}
	svc, err := sensorapi.Run(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Terminate(ctx) })
	base, err := svc.URL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	post := func(path, body string) *http.Response {
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
		req.Header.Set("X-Auth-Token", svc.AdminToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	if resp := post("/api/v1.6/devices/sim/", `{"t":[{"value":1,"timestamp":1000},{"value":3,"timestamp":2000}]}`); resp.StatusCode != 200 {
		t.Fatalf("post values: %s", resp.Status)
	}
	resp := post("/api/v2.0/data/statistics/", `{"start":0,"end":3000,
		"variables":[{"device":"~sim","variable":"~t"}],"aggregations":["mean"]}`)
	var stats struct {
		Results []struct {
			Results map[string]struct{ Value float64 } `json:"results"`
		} `json:"results"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&stats); err != nil || len(stats.Results) != 1 || stats.Results[0].Results["mean"].Value != 2 {
		t.Fatalf("statistics: %s %+v (%v)", resp.Status, stats, err)
	}
}
