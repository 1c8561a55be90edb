// Command prepare readies this machine for the tests and `make run`: a Docker daemon
// that answers (installed and started when needed) and a TimescaleDB image (present, or
// built from Debian packages; pulled only when TIMESCALEDB_IMAGE names it), and with -ha the Patroni image. It does its work once, before test packages start in
// parallel, and is quick when everything is already there. A first run says so, and
// prints each step as it starts with a line every 10 s while it runs.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/sensordata/sensorapi/testcontainers/machine"
)

func main() {
	ha := flag.Bool("ha", false, "also build the Patroni image of the failover test and the compose ha profile")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	if err := machine.EnsureDocker(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "prepare:", err)
		os.Exit(1)
	}
	img, err := machine.ResolveImage(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "prepare:", err)
		os.Exit(1)
	}
	fmt.Println("docker answers; TimescaleDB image:", img)
	if *ha {
		img, err := machine.ResolvePatroniImage(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, "prepare:", err)
			os.Exit(1)
		}
		fmt.Println("Patroni image:", img)
	}
}
