package sensorapi

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/sensordata/sensorapi/pkg/progress"
)

// BuildImage builds the service image under tag from source, the way the repository's
// Dockerfile says: the static binary of cmd/sensorapi (from this module: the checkout,
// or the Go module cache in another project) in an image FROM scratch. Nothing is
// pulled. It takes a minute or so the first time and says so every 10 s.
func BuildImage(ctx context.Context, tag string) error {
	dir, err := os.MkdirTemp("", "sensorapi-image-")
	if err != nil {
		return fmt.Errorf("build image: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	root, err := moduleDir(ctx)
	if err != nil {
		return err
	}
	steps := progress.New(os.Stderr, "sensorapi", progress.Every)
	defer steps.End()
	steps.Begin("building the service image "+tag+" from source: go build", nil)
	// in the module's own directory, with its own go.mod and go.sum: another project's
	// go.sum lacks the service's dependencies (gin, the MQTT broker, ...) that its own
	// packages do not import
	build := exec.CommandContext(ctx, "go", "build", "-mod=readonly", "-trimpath", "-ldflags=-s -w",
		"-o", filepath.Join(dir, "sensorapi"), "./cmd/sensorapi")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build image: go build in %s: %w: %s", root, err, out)
	}
	steps.Begin("building the service image "+tag+": docker build", nil)
	if err := copyFile(filepath.Join(root, "Dockerfile"), filepath.Join(dir, "Dockerfile")); err != nil {
		return err
	}
	// the host's CA bundle, for outgoing TLS from the image; an empty file without one
	if err := copyFile("/etc/ssl/certs/ca-certificates.crt", filepath.Join(dir, "ca-certificates.crt")); err != nil {
		if err := os.WriteFile(filepath.Join(dir, "ca-certificates.crt"), nil, 0o644); err != nil {
			return fmt.Errorf("build image: %w", err)
		}
	}
	if out, err := exec.CommandContext(ctx, "docker", "build", "-q", "-t", tag, dir).CombinedOutput(); err != nil {
		return fmt.Errorf("build image: docker build: %w: %s", err, out)
	}
	return nil
}

// moduleDir is where this module's files are: the checkout, or the module cache.
func moduleDir(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/sensordata/sensorapi").Output()
	if err != nil {
		return "", fmt.Errorf("build image: find the sensorapi module: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return fmt.Errorf("build image: %w", err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		return fmt.Errorf("build image: %w", err)
	}
	return nil
}
