package machine

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// PatroniImage is LocalImage with Patroni and etcd added from Debian packages
// (patroni/Dockerfile); it runs both the DCS and the database nodes of a Cluster.
const PatroniImage = "sensorapi/patroni:pg17-local"

//go:embed patroni/Dockerfile patroni/sensorapi.yml
var patroniRecipe embed.FS

// ResolvePatroniImage returns PatroniImage, built when missing or built from another
// recipe (and LocalImage under it, which the official image cannot replace: Patroni
// comes from Debian).
func ResolvePatroniImage(ctx context.Context) (string, error) {
	if err := EnsureDocker(ctx); err != nil {
		return "", err
	}
	recipe, err := patroniRecipeHash()
	if err != nil {
		return "", err
	}
	if patroniImageOf(ctx, recipe) {
		return PatroniImage, nil
	}
	err = exclusive(ctx, func() error {
		if patroniImageOf(ctx, recipe) { // another process built it meanwhile
			return nil
		}
		if !imagePresent(ctx, LocalImage) {
			if err := BuildLocalImage(ctx); err != nil {
				return err
			}
		}
		return buildPatroniImage(ctx, recipe)
	})
	if err != nil {
		return "", err
	}
	return PatroniImage, nil
}

// recipeLabel, on PatroniImage, is the hash of the recipe it was built from.
const recipeLabel = "sensorapi.recipe"

func patroniRecipeHash() (string, error) {
	h := sha256.New()
	for _, name := range []string{"Dockerfile", "sensorapi.yml"} {
		b, err := patroniRecipe.ReadFile("patroni/" + name)
		if err != nil {
			return "", fmt.Errorf("patroni recipe: %w", err)
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// patroniImageOf tells whether PatroniImage exists, built from this recipe.
func patroniImageOf(ctx context.Context, recipe string) bool {
	out, err := exec.CommandContext(ctx, "docker", "image", "inspect", "-f",
		`{{index .Config.Labels "`+recipeLabel+`"}}`, PatroniImage).Output()
	return err == nil && strings.TrimSpace(string(out)) == recipe
}

func buildPatroniImage(ctx context.Context, recipe string) error {
	dir, err := os.MkdirTemp("", "sensorapi-patroni-")
	if err != nil {
		return fmt.Errorf("build %s: %w", PatroniImage, err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	for _, name := range []string{"Dockerfile", "sensorapi.yml"} {
		b, err := patroniRecipe.ReadFile("patroni/" + name)
		if err != nil {
			return fmt.Errorf("build %s: %w", PatroniImage, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("build %s: %w", PatroniImage, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	beginStep("docker build " + PatroniImage + ": apt-get install patroni python3-etcd etcd-server")
	defer steps.End()
	out, err := exec.CommandContext(ctx, "docker", "build", "-q", "--build-arg", "BASE="+LocalImage,
		"--label", recipeLabel+"="+recipe, "-t", PatroniImage, dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("build %s: %w: %s", PatroniImage, err, tail(out))
	}
	return nil
}
