package main

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/sensordata/sensorapi/pkg/loadgen"
)

// fleetSynthetic, when set (flag -fleet-synthetic, or SENSORAPI_BENCH_FLEET_SYNTHETIC=1),
// gives every fleet device two synthetic variables before each measured side, issue
// 28's load: `({{t}} * 9/5) + 32` on its temperature and `mean({{h}}, "1H")` on its
// humidity, kept up to date live while the fleet writes (docs/synthetic.md "Costs").
var fleetSynthetic bool

// createFleetSynthetic creates the two synthetic variables on each fleet device.
func createFleetSynthetic(ctx context.Context, url, tok string) error {
	c := &loadgen.Client{HTTP: &http.Client{}, URL: url, Token: tok}
	for dev := range fleetDevices {
		for _, v := range []struct{ label, expr string }{
			{"temperature-f", fmt.Sprintf(`({{fleet-%d.temperature}} * 9/5) + 32`, dev)},
			{"humidity-1h", fmt.Sprintf(`mean({{fleet-%d.humidity}}, \"1H\")`, dev)},
		} {
			body := fmt.Appendf(nil, `{"label":%q,"syntheticExpression":"%s"}`, v.label, v.expr)
			if err := c.Do(ctx, http.MethodPost, fmt.Sprintf("/api/v2.0/devices/~fleet-%d/variables/", dev), body); err != nil {
				return fmt.Errorf("create synthetic variable on fleet-%d: %w", dev, err)
			}
		}
	}
	return nil
}

// fleetSyntheticDefault reads SENSORAPI_BENCH_FLEET_SYNTHETIC.
func fleetSyntheticDefault() bool { return os.Getenv("SENSORAPI_BENCH_FLEET_SYNTHETIC") == "1" }
