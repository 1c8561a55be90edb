// Package benchharness runs the real `sensorapi serve` binary as its own process
// against TimescaleDB (started here, or DATABASE_URL), for the benchmark (make bench)
// and the load test (make loadtest), and samples the server's resident memory.
package benchharness

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sensordata/sensorapi/pkg/auth"
	"github.com/sensordata/sensorapi/pkg/store"
	"github.com/sensordata/sensorapi/testcontainers"
	"github.com/sensordata/sensorapi/testcontainers/machine"
)

// Harness is a database, a direct handle on it (for the floors) and a running server.
type Harness struct {
	DB     *store.DB
	DSN    string // the database's URL, for other processes (e.g. `sensorapi load`)
	Bin    string // the sensorapi binary the server runs
	URL    string // http://127.0.0.1:PORT
	MQTT   string // 127.0.0.1:PORT of the broker
	Token  string // the admin account's
	Image  string // the TimescaleDB image, or "DATABASE_URL"
	Server *exec.Cmd
	// TSDB is the database container the harness started (nil with DATABASE_URL or
	// Patroni), for floors that run inside it (psql).
	TSDB    *testcontainers.TimescaleDB
	cleanup []func()
}

// Start brings up the database, migrates it, bootstraps the admin token and starts the
// server; Close undoes all of it.
func Start(ctx context.Context) (*Harness, error) {
	h := &Harness{Token: "bench-" + strconv.FormatInt(time.Now().UnixNano(), 36), Image: "DATABASE_URL"}
	dsn := os.Getenv("DATABASE_URL")
	if mode := os.Getenv(PatroniEnv); mode != "" && dsn == "" {
		var err error
		if dsn, h.Image, err = h.startCluster(ctx, mode); err != nil {
			h.Close()
			return nil, err
		}
	} else if dsn == "" {
		tsdb, err := testcontainers.Start(ctx, testcontainers.Options{})
		if err != nil {
			return nil, err
		}
		h.cleanup = append(h.cleanup, func() { _ = tsdb.Terminate(context.Background()) })
		dsn, h.Image, h.TSDB = tsdb.DSN, tsdb.Image, tsdb
	}
	h.DSN = dsn
	var err error
	if h.DB, err = store.Open(ctx, dsn, 0); err != nil {
		h.Close()
		return nil, err
	}
	h.cleanup = append(h.cleanup, func() { _ = h.DB.Close() })
	if _, err := store.Migrate(ctx, h.DB); err != nil {
		h.Close()
		return nil, err
	}
	if _, err := auth.Bootstrap(ctx, h.DB, h.Token); err != nil {
		h.Close()
		return nil, err
	}
	if err := h.startServer(ctx, dsn); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

// PatroniEnv, set to sync or async, runs the benchmark on a Patroni pair
// (testcontainers.StartCluster) with synchronous_mode on or off, to measure what
// synchronous replication costs (docs/scaling.md).
const PatroniEnv = "SENSORBENCH_PATRONI"

// startCluster starts the pair and returns its multi-host DSN and a description.
func (h *Harness) startCluster(ctx context.Context, mode string) (dsn, image string, err error) {
	if mode != "sync" && mode != "async" {
		return "", "", fmt.Errorf("%s=%q: want sync or async", PatroniEnv, mode)
	}
	cl, err := testcontainers.StartCluster(ctx, 2)
	if err != nil {
		return "", "", err
	}
	h.cleanup = append(h.cleanup, func() { cl.Terminate(context.Background()) })
	if err := cl.SetSynchronous(ctx, mode == "sync"); err != nil {
		return "", "", err
	}
	return cl.DSN("postgres"), fmt.Sprintf("%s, a Patroni pair with synchronous_mode %s", machine.PatroniImage,
		map[string]string{"sync": "on", "async": "off"}[mode]), nil
}

// startServer builds and runs `sensorapi serve` as its own process, so its memory is
// measured alone.
func (h *Harness) startServer(ctx context.Context, dsn string) error {
	dir, err := os.MkdirTemp("", "sensorapi-harness-")
	if err != nil {
		return err
	}
	h.cleanup = append(h.cleanup, func() { _ = os.RemoveAll(dir) })
	bin := filepath.Join(dir, "sensorapi")
	h.Bin = bin
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/sensorapi").CombinedOutput(); err != nil {
		return fmt.Errorf("build server: %w: %s", err, out)
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	if h.MQTT, err = freeAddr(); err != nil {
		return err
	}
	h.Server = exec.Command(bin, "serve")
	h.Server.Env = append(os.Environ(), "DATABASE_URL="+dsn, "SENSORAPI_ADDR="+addr, "SENSORAPI_MQTT_ADDR="+h.MQTT,
		"SENSORAPI_ADMIN_TOKEN="+h.Token, "SENSORAPI_LOG_LEVEL=warn",
		// the benchmarks pack when they measure packing (sensorbench -only storage), not
		// whenever the hourly job happens to run
		"SENSORAPI_PACK_AFTER=off")
	h.Server.Stderr = os.Stderr
	if err := h.Server.Start(); err != nil {
		return fmt.Errorf("start server: %w", err)
	}
	h.cleanup = append(h.cleanup, func() { _ = h.Server.Process.Signal(os.Interrupt); _ = h.Server.Wait() })
	h.URL = "http://" + addr
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if resp, err := http.Get(h.URL + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
	}
	return fmt.Errorf("server at %s not ready after a minute", h.URL)
}

// freeAddr finds a free loopback port for the server to listen on.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

// Close stops the server and removes what Start created.
func (h *Harness) Close() {
	for i := len(h.cleanup) - 1; i >= 0; i-- {
		h.cleanup[i]()
	}
}

// RSSSampler records the server's peak resident memory while a workload runs.
type RSSSampler struct {
	pid  int
	stop chan struct{}
	wg   sync.WaitGroup
	peak int64 // KiB
}

// SampleRSS samples the server's resident memory every 50 ms until Stop.
func (h *Harness) SampleRSS() *RSSSampler {
	s := &RSSSampler{pid: h.Server.Process.Pid, stop: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if kb := RSSKiB(s.pid); kb > s.peak {
				s.peak = kb
			}
			select {
			case <-t.C:
			case <-s.stop:
				return
			}
		}
	}()
	return s
}

// Stop returns the peak in MiB.
func (s *RSSSampler) Stop() float64 {
	close(s.stop)
	s.wg.Wait()
	return float64(s.peak) / 1024
}

// RSSKiB is the resident memory of process pid (0 when it cannot be read).
func RSSKiB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// NewAccount creates an account of its own for one workload and returns its id and token.
func (h *Harness) NewAccount(ctx context.Context, name string) (int64, string, error) {
	tok, err := auth.CreateAccount(ctx, h.DB, "bench_"+name)
	if err != nil {
		return 0, "", err
	}
	var id int64
	err = h.DB.NewRaw("SELECT id FROM accounts WHERE name = ?", "bench_"+name).Scan(ctx, &id)
	return id, tok, err
}
