package testcontainers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	tc "github.com/testcontainers/testcontainers-go"
	tcnetwork "github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/sensordata/sensorapi/testcontainers/machine"
)

// Cluster is etcd and Patroni-managed TimescaleDB nodes (synchronous_mode, see
// machine/patroni/sensorapi.yml) on a Docker network of their own, each node's PostgreSQL
// and REST API published on 127.0.0.1 at fixed ports, so that a node killed and
// started again keeps its addresses.
type Cluster struct {
	Nodes   []*Node
	etcd    tc.Container
	network *tc.DockerNetwork
}

// Node is one Patroni node: its member name (also its name on the cluster's network)
// and its published ports.
type Node struct {
	Name      string
	Port      int // PostgreSQL
	APIPort   int // Patroni's REST API
	container tc.Container
}

// etcdCmd runs a single-member etcd: enough for tests, where it is no point of failure
// under test; production runs three or five on separate machines.
var etcdCmd = []string{"etcd", "--name", "etcd", "--data-dir", "/tmp/etcd",
	"--listen-client-urls", "http://0.0.0.0:2379", "--advertise-client-urls", "http://etcd:2379",
	"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
	"--initial-cluster", "etcd=http://127.0.0.1:2380"}

// StartCluster starts etcd and n Patroni nodes (node1 … nodeN), and returns once one
// is the primary and every other one a streaming synchronous standby.
func StartCluster(ctx context.Context, n int) (*Cluster, error) {
	setDefaultEnv("TESTCONTAINERS_HOST_OVERRIDE", "127.0.0.1")
	setDefaultEnv("TESTCONTAINERS_RYUK_DISABLED", "true")
	img, err := machine.ResolvePatroniImage(ctx)
	if err != nil {
		return nil, err
	}
	nw, err := tcnetwork.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("cluster network: %w", err)
	}
	c := &Cluster{network: nw}
	c.etcd, err = run(ctx, tc.ContainerRequest{Image: img, Cmd: etcdCmd,
		Networks: []string{nw.Name}, NetworkAliases: map[string][]string{nw.Name: {"etcd"}},
		WaitingFor: wait.ForLog("ready to serve client requests").WithStartupTimeout(time.Minute)})
	if err != nil {
		c.Terminate(ctx)
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	// the first node bootstraps the cluster; the others clone it once it is up
	for i := range n {
		node, err := startNode(ctx, img, nw.Name, fmt.Sprintf("node%d", i+1))
		if err != nil {
			c.Terminate(ctx)
			return nil, err
		}
		c.Nodes = append(c.Nodes, node)
	}
	if _, err := c.WaitReplicated(ctx, 2*time.Minute); err != nil {
		c.Terminate(ctx)
		return nil, err
	}
	return c, nil
}

// nodeEnv is what tells one node from another (machine/patroni/sensorapi.yml has the rest):
// its member name, which is also its name on the network.
func nodeEnv(name string) map[string]string {
	return map[string]string{"PATRONI_NAME": name, "PATRONI_RESTAPI_CONNECT_ADDRESS": name + ":8008",
		"PATRONI_POSTGRESQL_CONNECT_ADDRESS": name + ":5432"}
}

func startNode(ctx context.Context, img, nw, name string) (*Node, error) {
	pg, err := freePort()
	if err != nil {
		return nil, err
	}
	api, err := freePort()
	if err != nil {
		return nil, err
	}
	n := &Node{Name: name, Port: pg, APIPort: api}
	n.container, err = run(ctx, tc.ContainerRequest{
		Image:        img,
		Env:          nodeEnv(name),
		ExposedPorts: []string{"5432/tcp", "8008/tcp"},
		HostConfigModifier: func(hc *container.HostConfig) {
			lo := netip.MustParseAddr("127.0.0.1")
			hc.PortBindings = network.PortMap{
				network.MustParsePort("5432/tcp"): {{HostIP: lo, HostPort: strconv.Itoa(pg)}},
				network.MustParsePort("8008/tcp"): {{HostIP: lo, HostPort: strconv.Itoa(api)}},
			}
		},
		Networks:       []string{nw},
		NetworkAliases: map[string][]string{nw: {name}},
		// Patroni answers /health with 200 once PostgreSQL runs, as primary or standby
		WaitingFor: wait.ForHTTP("/health").WithPort("8008/tcp").
			WithStartupTimeout(2 * time.Minute).WithPollInterval(250 * time.Millisecond),
	})
	if err != nil {
		return nil, fmt.Errorf("start Patroni node %s: %w", name, err)
	}
	return n, nil
}

// DSN names every node, for the service: pgx connects to the one that accepts writes
// now (target_session_attrs=read-write), whichever it is after a failover.
func (c *Cluster) DSN(db string) string { return c.dsn(db, "read-write") }

// StandbyDSN names every node for the read replicas' pool: it connects to a standby.
func (c *Cluster) StandbyDSN(db string) string { return c.dsn(db, "standby") }

func (c *Cluster) dsn(db, attrs string) string {
	hosts := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		hosts[i] = "127.0.0.1:" + strconv.Itoa(n.Port)
	}
	return "postgres://postgres:postgres@" + strings.Join(hosts, ",") + "/" + db +
		"?sslmode=disable&target_session_attrs=" + attrs
}

// DSN names this node alone.
func (n *Node) DSN(db string) string {
	return "postgres://postgres:postgres@127.0.0.1:" + strconv.Itoa(n.Port) + "/" + db + "?sslmode=disable"
}

// Member is one node as Patroni's REST API describes the cluster (GET /cluster).
type Member struct {
	Name     string `json:"name"`
	Role     string `json:"role"`  // leader, sync_standby, replica
	State    string `json:"state"` // running, streaming, starting, stopped…
	Timeline int    `json:"timeline"`
	Lag      any    `json:"lag"` // bytes behind the leader, or "unknown"
}

// Members asks the first node that answers for the cluster's members.
func (c *Cluster) Members(ctx context.Context) ([]Member, error) {
	var last error
	for _, n := range c.Nodes {
		var cl struct {
			Members []Member `json:"members"`
		}
		if last = n.api(ctx, http.MethodGet, "/cluster", nil, &cl); last == nil {
			return cl.Members, nil
		}
	}
	return nil, fmt.Errorf("cluster members: %w", last)
}

// Leader is the node that is primary now, nil when none is.
func (c *Cluster) Leader(ctx context.Context) *Node {
	ms, err := c.Members(ctx)
	if err != nil {
		return nil
	}
	for _, m := range ms {
		if m.Role == "leader" && m.State == "running" {
			return c.node(m.Name)
		}
	}
	return nil
}

func (c *Cluster) node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// WaitReplicated waits until one node is the running primary and every other one a
// streaming synchronous standby, and returns the primary.
func (c *Cluster) WaitReplicated(ctx context.Context, timeout time.Duration) (*Node, error) {
	deadline := time.Now().Add(timeout)
	var ms []Member
	var err error
	for {
		if ms, err = c.Members(ctx); err == nil && replicated(ms, len(c.Nodes)) {
			return c.Leader(ctx), nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return nil, fmt.Errorf("cluster not replicated after %v: %w", timeout, err)
			}
			return nil, fmt.Errorf("cluster not replicated after %v: members %+v", timeout, ms)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for the cluster: %w", ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func replicated(ms []Member, nodes int) bool {
	leaders, standbys := 0, 0
	for _, m := range ms {
		switch {
		case m.Role == "leader" && m.State == "running":
			leaders++
		case m.Role == "sync_standby" && m.State == "streaming":
			standbys++
		}
	}
	return leaders == 1 && leaders+standbys == nodes
}

// Configure changes the cluster's dynamic configuration (PATCH /config, as
// `patronictl edit-config` does), e.g. {"synchronous_mode": false}.
func (c *Cluster) Configure(ctx context.Context, patch map[string]any) error {
	n := c.Leader(ctx)
	if n == nil {
		return fmt.Errorf("configure the cluster: no leader")
	}
	return n.api(ctx, http.MethodPatch, "/config", patch, nil)
}

// SetSynchronous turns synchronous_mode on or off and waits until the standbys'
// roles show it (sync_standby or replica): what the benchmark compares.
func (c *Cluster) SetSynchronous(ctx context.Context, on bool) error {
	if err := c.Configure(ctx, map[string]any{"synchronous_mode": on}); err != nil {
		return err
	}
	want := "replica"
	if on {
		want = "sync_standby"
	}
	for deadline := time.Now().Add(time.Minute); ; {
		ms, err := c.Members(ctx)
		ok := err == nil && len(ms) == len(c.Nodes)
		for _, m := range ms {
			ok = ok && (m.Role == "leader" || m.Role == want)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("synchronous_mode %v not applied after a minute: %w", on, err)
			}
			return fmt.Errorf("synchronous_mode %v not applied after a minute: members %+v", on, ms)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("set synchronous_mode: %w", ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// api calls the node's Patroni REST API and decodes a 2xx JSON answer into out.
func (n *Node) api(ctx context.Context, method, path string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var rd io.Reader = http.NoBody
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("patroni %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://127.0.0.1:"+strconv.Itoa(n.APIPort)+path, rd)
	if err != nil {
		return fmt.Errorf("patroni %s %s: %w", method, path, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("patroni %s %s on %s: %w", method, path, n.Name, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("patroni %s %s on %s: %s", method, path, n.Name, resp.Status)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("patroni %s %s on %s: %w", method, path, n.Name, err)
	}
	return nil
}

// Kill ends the node at once (SIGKILL to Patroni and PostgreSQL alike, as a machine
// that dies): no shutdown checkpoint, no leader key released.
func (n *Node) Kill(ctx context.Context) error { return n.docker(ctx, "kill") }

// Pause freezes every process of the node (docker pause): a standby that stops
// acknowledging WAL while its connections stay open. Unpause resumes it.
func (n *Node) Pause(ctx context.Context) error { return n.docker(ctx, "pause") }

// Unpause resumes a paused node.
func (n *Node) Unpause(ctx context.Context) error { return n.docker(ctx, "unpause") }

func (n *Node) docker(ctx context.Context, verb string) error {
	if out, err := exec.CommandContext(ctx, "docker", verb, n.container.GetContainerID()).CombinedOutput(); err != nil {
		return fmt.Errorf("docker %s %s: %w: %s", verb, n.Name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Start starts a killed node again, on the same ports, and returns once its
// PostgreSQL runs (Patroni rejoins it as a standby of the current primary).
func (n *Node) Start(ctx context.Context) error {
	if err := n.container.Start(ctx); err != nil {
		return fmt.Errorf("start %s again: %w", n.Name, err)
	}
	return nil
}

// Terminate removes the containers and the network.
func (c *Cluster) Terminate(ctx context.Context) {
	for _, n := range c.Nodes {
		_ = n.container.Terminate(ctx)
	}
	if c.etcd != nil {
		_ = c.etcd.Terminate(ctx)
	}
	if c.network != nil {
		_ = c.network.Remove(ctx)
	}
}
