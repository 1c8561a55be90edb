package sensorapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/sensordata/sensorapi/testcontainers/sensorapi"
)

// call sends a request with the token and decodes the JSON answer into out.
func call(method, url, token, body string, out any) error {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("X-Auth-Token", token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %s", method, url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// A user's test: start the service on a real TimescaleDB, post values, read statistics.
func ExampleRun() {
	ctx := context.Background()
	svc, err := sensorapi.Run(ctx, "") // sensorapi:latest, built from source when no registry has it
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = svc.Terminate(ctx) }()
	base, err := svc.URL(ctx)
	if err != nil {
		log.Fatal(err)
	}

	var created map[string]any
	err = call("POST", base+"/api/v1.6/devices/boiler/", svc.AdminToken,
		`{"temperature":[{"value":20,"timestamp":1000},{"value":22,"timestamp":2000},{"value":24,"timestamp":3000}]}`, &created)
	if err != nil {
		log.Fatal(err)
	}
	var stats struct {
		Results []struct {
			Results map[string]struct{ Value float64 } `json:"results"`
		} `json:"results"`
	}
	err = call("POST", base+"/api/v2.0/data/statistics/", svc.AdminToken, `{"start":0,"end":5000,
		"variables":[{"device":"~boiler","variable":"~temperature"}],"aggregations":["count","mean","max"]}`, &stats)
	if err != nil {
		log.Fatal(err)
	}
	r := stats.Results[0].Results
	fmt.Println("count", r["count"].Value, "mean", r["mean"].Value, "max", r["max"].Value)
	// Output: count 3 mean 22 max 24
}

// TestRunMQTT: the broker of the module's service takes a publish with the admin token,
// readable over HTTP once acknowledged.
func TestRunMQTT(t *testing.T) {
	ctx := context.Background()
	svc, err := sensorapi.Run(ctx, "", sensorapi.WithAdminToken("module-test-admin-token-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Terminate(ctx) })
	if svc.AdminToken != "module-test-admin-token-0123456789abcdef" {
		t.Fatalf("admin token %q", svc.AdminToken)
	}
	addr, err := svc.MQTTAddr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + addr).SetUsername(svc.AdminToken))
	if tk := c.Connect(); !tk.WaitTimeout(10*time.Second) || tk.Error() != nil {
		t.Fatalf("mqtt connect: %v", tk.Error())
	}
	defer c.Disconnect(100)
	if tk := c.Publish("v1.6/devices/pump/rpm", 1, false, "1500"); !tk.WaitTimeout(10*time.Second) || tk.Error() != nil {
		t.Fatalf("publish: %v", tk.Error())
	}
	base, err := svc.URL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var lv float64
	if err := call("GET", base+"/api/v1.6/devices/pump/rpm/lv", svc.AdminToken, "", &lv); err != nil || lv != 1500 {
		t.Fatalf("lv %v (%v)", lv, err)
	}
}
