package main_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestShippedBinaryHasNoDockerCode: the binary make build and make image produce
// links neither testcontainers-go nor a Docker client; only make run's development
// build (-tags dev) starts a database container.
func TestShippedBinaryHasNoDockerCode(t *testing.T) {
	for _, tags := range []string{"", "dev"} {
		out, err := exec.Command("go", "list", "-tags", tags, "-deps", ".").Output()
		if err != nil {
			t.Fatalf("go list -tags %q: %v", tags, err)
		}
		linked := strings.Contains(string(out), "github.com/testcontainers/testcontainers-go\n")
		if linked != (tags == "dev") {
			t.Fatalf("-tags %q: testcontainers-go linked: %v", tags, linked)
		}
	}
}

// TestServiceImage builds the image as `make image` does and runs it against the test
// database: it serves /readyz, as a non-root user. The container uses the host's
// network so that it reaches the database on 127.0.0.1 and nothing else.
func TestServiceImage(t *testing.T) {
	if os.Getenv("TEST_DATABASE_URL") != "" {
		t.Skip("the image test runs with the project's own database container")
	}
	if err := exec.Command("docker", "version").Run(); err != nil {
		t.Skip("no Docker daemon")
	}
	const tag = "sensorapi:image-test"
	out, err := exec.Command("make", "-C", "../..", "image", "IMAGE="+tag).CombinedOutput()
	if err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	user, err := exec.Command("docker", "image", "inspect", "--format", "{{.Config.User}}", tag).Output()
	if err != nil || strings.TrimSpace(string(user)) != "65532:65532" {
		t.Fatalf("image user %q (%v)", user, err)
	}
	addr := freeAddr(t)
	id, err := exec.Command("docker", "run", "-d", "--network", "host",
		"-e", "DATABASE_URL="+env.DSN, "-e", "SENSORAPI_ADDR="+addr, "-e", "SENSORAPI_MQTT_ADDR="+freeAddr(t),
		"-e", "SENSORAPI_PACK_AFTER=off", tag).Output() // other tests count this database's rows
	if err != nil {
		t.Fatalf("docker run: %v", err)
	}
	container := strings.TrimSpace(string(id))
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := exec.Command("docker", "logs", container).CombinedOutput()
			t.Logf("container logs:\n%s", logs)
		}
		_ = exec.Command("docker", "rm", "-f", container).Run()
	})
	waitReady(t, "http://"+addr)
	if err := exec.Command("docker", "exec", "-e", "SENSORAPI_ADDR="+addr, container, "/sensorapi", "healthcheck").Run(); err != nil {
		t.Fatalf("healthcheck inside the container: %v", err)
	}
}
