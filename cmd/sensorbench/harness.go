package main

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
)

// harness is a database, a direct handle on it (for the floors) and a running server.
type harness struct {
	db      *store.DB
	url     string
	token   string
	image   string
	server  *exec.Cmd
	cleanup []func()
}

func startHarness(ctx context.Context) (*harness, error) {
	h := &harness{token: "bench-" + strconv.FormatInt(time.Now().UnixNano(), 36), image: "DATABASE_URL"}
	dsn := os.Getenv("DATABASE_URL")
	if dsn == "" {
		tsdb, err := testcontainers.Start(ctx, testcontainers.Options{})
		if err != nil {
			return nil, err
		}
		h.cleanup = append(h.cleanup, func() { _ = tsdb.Terminate(context.Background()) })
		dsn, h.image = tsdb.DSN, tsdb.Image
	}
	var err error
	if h.db, err = store.Open(ctx, dsn, 0); err != nil {
		h.Close()
		return nil, err
	}
	h.cleanup = append(h.cleanup, func() { _ = h.db.Close() })
	if _, err := store.Migrate(ctx, h.db); err != nil {
		h.Close()
		return nil, err
	}
	if _, err := auth.Bootstrap(ctx, h.db, h.token); err != nil {
		h.Close()
		return nil, err
	}
	if err := h.startServer(ctx, dsn); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

// startServer builds and runs `sensorapi serve` as its own process, so its memory is
// measured alone.
func (h *harness) startServer(ctx context.Context, dsn string) error {
	dir, err := os.MkdirTemp("", "sensorbench-")
	if err != nil {
		return err
	}
	h.cleanup = append(h.cleanup, func() { _ = os.RemoveAll(dir) })
	bin := filepath.Join(dir, "sensorapi")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/sensorapi").CombinedOutput(); err != nil {
		return fmt.Errorf("build server: %w: %s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := l.Addr().String()
	_ = l.Close()
	h.server = exec.Command(bin, "serve")
	h.server.Env = append(os.Environ(), "DATABASE_URL="+dsn, "SENSORAPI_ADDR="+addr,
		"SENSORAPI_ADMIN_TOKEN="+h.token, "SENSORAPI_LOG_LEVEL=warn")
	h.server.Stderr = os.Stderr
	if err := h.server.Start(); err != nil {
		return fmt.Errorf("start server: %w", err)
	}
	h.cleanup = append(h.cleanup, func() { _ = h.server.Process.Signal(os.Interrupt); _ = h.server.Wait() })
	h.url = "http://" + addr
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if resp, err := http.Get(h.url + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
	}
	return fmt.Errorf("server at %s not ready after a minute", h.url)
}

func (h *harness) Close() {
	for i := len(h.cleanup) - 1; i >= 0; i-- {
		h.cleanup[i]()
	}
}

// rssSampler records the server's peak resident memory while a workload runs.
type rssSampler struct {
	pid  int
	stop chan struct{}
	wg   sync.WaitGroup
	peak int64 // KiB
}

func (h *harness) sampleRSS() *rssSampler {
	s := &rssSampler{pid: h.server.Process.Pid, stop: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if kb := rssKiB(s.pid); kb > s.peak {
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
func (s *rssSampler) Stop() float64 {
	close(s.stop)
	s.wg.Wait()
	return float64(s.peak) / 1024
}

func rssKiB(pid int) int64 {
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
