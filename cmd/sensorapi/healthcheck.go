package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sensordata/sensorapi/pkg/config"
)

// healthcheckCmd asks the local server's /healthz: the container image has no shell or
// curl, so its HEALTHCHECK runs the binary itself.
func healthcheckCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: sensorapi healthcheck\n\nExits 0 when the server at SENSORAPI_ADDR on 127.0.0.1 answers /healthz (for\ncontainer HEALTHCHECKs: the image has no shell or curl).\n\nExample:\n  SENSORAPI_ADDR=:8080 sensorapi healthcheck && echo up\n")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.FromEnv()
	if err != nil {
		return err
	}
	addr := cfg.Addr
	if strings.HasPrefix(addr, ":") {
		addr = "127.0.0.1" + addr
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: /healthz answered %d", resp.StatusCode)
	}
	return nil
}
