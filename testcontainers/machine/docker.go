// Package machine readies this machine for containers: a Docker daemon that answers
// (installed and started when needed), the TimescaleDB image (built from Debian
// packages by image/build.sh where the official one is not present) and the Patroni
// image. It pulls nothing unless TIMESCALEDB_IMAGE names an image, and it uses the
// docker command only (no Docker SDK), so that `testcontainers/prepare` compiles in
// seconds on a fresh machine and its minutes of apt-get and debootstrap start at once,
// while the tests compile beside them.
package machine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// EnsureDocker returns nil once a Docker daemon answers. When none does it starts
// dockerd, and on Debian as root installs docker.io first. It never touches a daemon
// that is already running.
func EnsureDocker(ctx context.Context) error {
	if dockerAnswers(ctx) {
		return nil
	}
	return exclusive(ctx, func() error {
		if dockerAnswers(ctx) { // another process started it meanwhile
			return nil
		}
		defer steps.End()
		return installAndStartDocker(ctx)
	})
}

func installAndStartDocker(ctx context.Context) error {
	if _, err := exec.LookPath("dockerd"); err != nil {
		beginStep("installing Docker (apt-get install docker.io)")
		if err := installDocker(ctx); err != nil {
			return err
		}
	}
	beginStep("starting dockerd")
	if err := startDockerd(); err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if dockerAnswers(ctx) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return errors.New("dockerd was started but did not answer within 60s; see /var/log/sensorapi-dockerd.log")
}

func dockerAnswers(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.Version}}").Run() == nil
}

func installDocker(ctx context.Context) error {
	_, debian := os.Stat("/etc/debian_version")
	if debian != nil || os.Geteuid() != 0 {
		return errors.New("no Docker daemon answers and dockerd is not installed; install Docker " +
			"(on Debian as root: apt-get install docker.io) or set DATABASE_URL / TEST_DATABASE_URL")
	}
	for _, args := range [][]string{{"update", "-qq"}, {"install", "-y", "-qq", "docker.io"}} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %s: %w: %s", strings.Join(args, " "), err, tail(out))
		}
	}
	return nil
}

// startDockerd starts the daemon in its own session so that it outlives this process
// (the next test run reuses it).
func startDockerd() error {
	if os.Geteuid() != 0 {
		return errors.New("no Docker daemon answers and starting dockerd needs root; start Docker or set DATABASE_URL / TEST_DATABASE_URL")
	}
	logf, err := os.OpenFile("/var/log/sensorapi-dockerd.log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open dockerd log: %w", err)
	}
	defer func() { _ = logf.Close() }()
	cmd := exec.Command("dockerd")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start dockerd: %w", err)
	}
	return cmd.Process.Release()
}

// tail is the end of a command's output, for an error message.
func tail(out []byte) string {
	s := strings.TrimSpace(string(out))
	if len(s) > 500 {
		s = s[len(s)-500:]
	}
	return s
}
