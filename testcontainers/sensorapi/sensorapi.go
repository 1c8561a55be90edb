// Package sensorapi is a testcontainers-go module for the projects that use the
// service: Run starts the service image on a real TimescaleDB, in containers, and
// gives its HTTP base URL, its MQTT address and an admin token. It follows the
// conventions of testcontainers-go's own modules (Run with an image and functional
// options; the container embeds testcontainers.Container). docs/testing.md shows it
// in a user's test.
package sensorapi

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os/exec"
	"time"

	tc "github.com/testcontainers/testcontainers-go"
	tcnetwork "github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/sensordata/sensorapi/testcontainers"
	"github.com/sensordata/sensorapi/testcontainers/machine"
)

// DefaultImage is the service image Run starts when given "".
const DefaultImage = "sensorapi:latest"

// Container is the running service; Terminate also removes its database and network.
type Container struct {
	tc.Container
	// AdminToken is a full token of the admin account.
	AdminToken string

	db      *testcontainers.TimescaleDB
	network *tc.DockerNetwork
}

// WithAdminToken sets the admin token instead of a random one.
func WithAdminToken(token string) tc.CustomizeRequestOption {
	return tc.WithEnv(map[string]string{"SENSORAPI_ADMIN_TOKEN": token})
}

// Run starts TimescaleDB (the official image when present, else one built from Debian
// packages) and the service image img ("" for DefaultImage) on a Docker network of
// their own. DefaultImage, when missing, is built from this module's source
// (BuildImage); another name is pulled when missing.
func Run(ctx context.Context, img string, opts ...tc.ContainerCustomizer) (*Container, error) {
	if img == "" {
		img = DefaultImage
	}
	if err := ensureImage(ctx, img); err != nil {
		return nil, err
	}
	nw, err := tcnetwork.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("sensorapi network: %w", err)
	}
	c := &Container{network: nw}
	if c.db, err = testcontainers.Start(ctx, testcontainers.Options{Fast: true, Network: nw.Name, Alias: "timescaledb"}); err != nil {
		c.cleanup(ctx)
		return nil, err
	}
	tok, err := randomToken()
	if err != nil {
		c.cleanup(ctx)
		return nil, err
	}
	req := tc.GenericContainerRequest{ContainerRequest: tc.ContainerRequest{
		Image:        img,
		ExposedPorts: []string{"8080/tcp", "1883/tcp"},
		Env: map[string]string{
			"DATABASE_URL":          "postgres://postgres:postgres@timescaledb:5432/postgres?sslmode=disable",
			"SENSORAPI_ADMIN_TOKEN": tok,
			"SENSORAPI_ADDR":        ":8080",
			"SENSORAPI_MQTT_ADDR":   ":1883",
		},
		Networks:   []string{nw.Name},
		WaitingFor: wait.ForHTTP("/readyz").WithPort("8080/tcp").WithStartupTimeout(2 * time.Minute),
	}, Started: true}
	for _, o := range opts {
		if err := o.Customize(&req); err != nil {
			c.cleanup(ctx)
			return nil, fmt.Errorf("sensorapi option: %w", err)
		}
	}
	c.AdminToken = req.Env["SENSORAPI_ADMIN_TOKEN"]
	if c.Container, err = tc.GenericContainer(ctx, req); err != nil {
		_ = c.Terminate(ctx) // a container that started but never got ready, too
		return nil, fmt.Errorf("start %s: %w", img, err)
	}
	return c, nil
}

// URL is the service's HTTP base URL, e.g. http://127.0.0.1:32768.
func (c *Container) URL(ctx context.Context) (string, error) {
	return c.PortEndpoint(ctx, "8080/tcp", "http")
}

// MQTTAddr is the broker's host:port.
func (c *Container) MQTTAddr(ctx context.Context) (string, error) {
	return c.PortEndpoint(ctx, "1883/tcp", "")
}

// Terminate removes the service, its database and their network.
func (c *Container) Terminate(ctx context.Context, opts ...tc.TerminateOption) error {
	var err error
	if c.Container != nil {
		err = c.Container.Terminate(ctx, opts...)
	}
	c.cleanup(ctx)
	return err
}

func (c *Container) cleanup(ctx context.Context) {
	if c.db != nil {
		_ = c.db.Terminate(ctx)
	}
	if c.network != nil {
		_ = c.network.Remove(ctx)
	}
}

// ensureImage makes img available: present, built from source (the default name, which
// no registry holds: it is not pulled), or pulled (a name of the caller's).
func ensureImage(ctx context.Context, img string) error {
	if err := machine.EnsureDocker(ctx); err != nil {
		return err
	}
	if exec.CommandContext(ctx, "docker", "image", "inspect", img).Run() == nil {
		return nil
	}
	if img == DefaultImage {
		return BuildImage(ctx, img)
	}
	if exec.CommandContext(ctx, "docker", "pull", "-q", img).Run() != nil {
		return errors.New("sensorapi: image " + img + " is neither present nor pullable")
	}
	return nil
}

func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
