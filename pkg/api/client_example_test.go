package api_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/sensordata/sensorapi/docs/client"
	"github.com/sensordata/sensorapi/pkg/auth"
)

// The client generated from docs/openapi.yaml (docs/client, docs/client.md) writes a
// Device's values and reads them back resampled (E8), against the real service.
func Example_generatedClient() {
	url, token, stop := exampleServer()
	defer stop()
	ctx := context.Background()

	c, err := client.NewClientWithResponses(url, client.WithRequestEditorFn(
		func(_ context.Context, req *http.Request) error {
			req.Header.Set("X-Auth-Token", token)
			return nil
		}))
	if err != nil {
		log.Fatal(err)
	}

	// Three readings of boiler-1's temperature; the Device and the Variable are created.
	var temperature client.Dots
	if err := temperature.FromDotList(client.DotList{
		dot(20.5, 1767225600000), dot(21, 1767229200000), dot(23.5, 1767315600000),
	}); err != nil {
		log.Fatal(err)
	}
	written, err := c.PostDeviceValuesWithResponse(ctx, "boiler-1", nil,
		client.PostDeviceValuesJSONRequestBody{"temperature": temperature})
	if err != nil || written.JSON200 == nil {
		log.Fatalf("write: %v %s", err, written.Body)
	}

	// The resample endpoint takes Variable ids.
	variable, err := c.GetDeviceVariableWithResponse(ctx, "~boiler-1", "~temperature")
	if err != nil || variable.JSON200 == nil {
		log.Fatalf("variable: %v %s", err, variable.Body)
	}

	// Daily means over Madrid's calendar days, newest first.
	tz, start, end := "Europe/Madrid", int64(1767225600000), int64(1767400000000)
	resampled, err := c.ResampleWithResponse(ctx, nil, client.ResampleRequest{
		Variables: []client.ID{variable.JSON200.Id}, Aggregation: client.ResampleRequestAggregationMean,
		Period: "1D", Tz: &tz, Start: &start, End: &end,
	})
	if err != nil || resampled.JSON200 == nil {
		log.Fatalf("resample: %v %s", err, resampled.Body)
	}
	series, err := resampled.JSON200.AsSeparateSeries()
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range series.Results[0] {
		day := time.UnixMilli(int64(*p[0])).In(time.FixedZone("CET", 3600))
		fmt.Println(day.Format("2006-01-02 15:04 MST"), *p[1])
	}
	// Output:
	// 2026-01-02 00:00 CET 23.5
	// 2026-01-01 00:00 CET 20.75
}

// dot is a value at a time (ms), in the generated types.
func dot(value float64, ms int64) client.DotOrNumber {
	var v client.DotValue
	var d client.DotOrNumber
	if err := v.FromDotNumber(value); err != nil {
		log.Fatal(err)
	}
	if err := d.FromDotInput(client.DotInput{Value: v, Timestamp: &ms}); err != nil {
		log.Fatal(err)
	}
	return d
}

// exampleServer serves the API on the package's database, with an account of its own,
// for an Example (which has no *testing.T).
func exampleServer() (url, token string, stop func()) {
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	token, err := auth.CreateAccount(context.Background(), env.DB, "example_"+hex.EncodeToString(suffix))
	if err != nil {
		log.Fatal(err)
	}
	_, url, stop, err = env.Start(env.DB, env.Config())
	if err != nil {
		log.Fatal(err)
	}
	return url, token, stop
}
