package machine

import (
	"context"
	"embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

const (
	// OfficialImage is used where it is present (set TIMESCALEDB_IMAGE to it to pull it).
	OfficialImage = "timescale/timescaledb:latest-pg17"
	// LocalImage is built from Debian packages by image/build.sh where it is not.
	LocalImage = "sensorapi/timescaledb:pg17-local"
)

//go:embed image/Dockerfile image/build.sh
var recipe embed.FS

// ResolveImage returns the TimescaleDB image to run. TIMESCALEDB_IMAGE, when set, must
// be present or pullable. Otherwise the official image is used when present, else the
// local one, built once when missing: nothing is pulled unless asked for, since many CI
// machines (this project's among them) may reach no registry, and should not try.
func ResolveImage(ctx context.Context) (string, error) {
	if img := os.Getenv("TIMESCALEDB_IMAGE"); img != "" {
		if imagePresent(ctx, img) || pull(ctx, img) == nil {
			return img, nil
		}
		return "", fmt.Errorf("TIMESCALEDB_IMAGE=%s is neither present nor pullable", img)
	}
	if imagePresent(ctx, OfficialImage) {
		return OfficialImage, nil
	}
	if imagePresent(ctx, LocalImage) {
		return LocalImage, nil
	}
	err := exclusive(ctx, func() error {
		if imagePresent(ctx, LocalImage) { // another process built it meanwhile
			return nil
		}
		return BuildLocalImage(ctx)
	})
	if err != nil {
		return "", err
	}
	return LocalImage, nil
}

// BuildLocalImage builds LocalImage from the embedded recipe.
func BuildLocalImage(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "sensorapi-image-")
	if err != nil {
		return fmt.Errorf("build image: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	for _, name := range []string{"Dockerfile", "build.sh"} {
		b, err := recipe.ReadFile("image/" + name)
		if err != nil {
			return fmt.Errorf("build image: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o755); err != nil {
			return fmt.Errorf("build image: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	defer steps.End()
	out := &stepLines{begin: beginStep}
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(dir, "build.sh"), LocalImage)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build %s from Debian packages: %w: %s", LocalImage, err, tail(out.kept))
	}
	return nil
}

func imagePresent(ctx context.Context, img string) bool {
	return exec.CommandContext(ctx, "docker", "image", "inspect", img).Run() == nil
}

func pull(ctx context.Context, img string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	beginStep("docker pull " + img)
	defer steps.End()
	out, err := exec.CommandContext(ctx, "docker", "pull", "-q", img).CombinedOutput()
	if err != nil {
		return fmt.Errorf("docker pull %s: %w: %s", img, err, tail(out))
	}
	return nil
}
