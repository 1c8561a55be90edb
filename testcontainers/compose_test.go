package testcontainers

import (
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/oasdiff/yaml"

	"github.com/sensordata/sensorapi/testcontainers/machine"
)

// TestComposeHAMatchesCluster: docs/compose/ha.yml (which cannot run here: no compose)
// starts what StartCluster starts: the same image, etcd command and node settings, and
// its service names every node in DATABASE_URL and DATABASE_REPLICA_URL.
func TestComposeHAMatchesCluster(t *testing.T) {
	b, err := os.ReadFile("../docs/compose/ha.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Services map[string]struct {
			Image       string            `json:"image"`
			Command     []string          `json:"command"`
			Environment map[string]string `json:"environment"`
		} `json:"services"`
	}
	if _, err := yaml.Unmarshal(b, &f, yaml.DecodeOpts{}); err != nil {
		t.Fatal(err)
	}
	nodes := []string{"node1", "node2"}
	for _, name := range append([]string{"etcd"}, nodes...) {
		s, ok := f.Services[name]
		if !ok {
			t.Fatalf("no service %s", name)
		}
		if want := "${PATRONI_IMAGE:-" + machine.PatroniImage + "}"; s.Image != want {
			t.Errorf("%s: image %s, want %s", name, s.Image, want)
		}
		if name == "etcd" {
			if !slices.Equal(s.Command, etcdCmd) {
				t.Errorf("etcd: command %q, want %q", s.Command, etcdCmd)
			}
		} else if !maps.Equal(s.Environment, nodeEnv(name)) {
			t.Errorf("%s: environment %v, want %v", name, s.Environment, nodeEnv(name))
		}
	}
	api := f.Services["api"].Environment
	for _, v := range []string{"DATABASE_URL", "DATABASE_REPLICA_URL"} {
		if !strings.Contains(api[v], "@node1:5432,node2:5432/") {
			t.Errorf("api: %s=%s, want every node", v, api[v])
		}
	}
}
