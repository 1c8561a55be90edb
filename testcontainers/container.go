// Package testcontainers starts TimescaleDB containers for the tests and for
// `sensorapi serve` without DATABASE_URL (a single database, a streaming replica pair,
// a Patroni cluster), on the images that package machine makes sure of.
package testcontainers

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	tc "github.com/testcontainers/testcontainers-go"
	tcexec "github.com/testcontainers/testcontainers-go/exec"
	"github.com/testcontainers/testcontainers-go/wait"

	_ "github.com/jackc/pgx/v5/stdlib" // "pgx" driver for the readiness query

	"github.com/sensordata/sensorapi/testcontainers/machine"
)

// Options tune the container.
type Options struct {
	// Fast turns off fsync: for tests, where a crash loses nothing of value.
	Fast bool
	// Network and Alias put the container on a Docker network under a name that the
	// other containers on it can reach (a replica reaches its primary so), with its
	// port published on 127.0.0.1. Without Network (and without Name), the container
	// runs on the host's network instead, PostgreSQL listening on 127.0.0.1 itself.
	Network, Alias string
	// Volume names a Docker volume that holds the data directory, so the data
	// outlives the container (`make run`); empty: the data goes with the container.
	Volume string
	// Name, with Volume, names a container that is kept: Start uses the one of that
	// name when it exists (starting it when stopped) and Stop leaves it for the next
	// Start (`make run`). Empty: a new container, removed by Terminate (tests).
	Name string
	// TmpfsDataMB, when set, puts the data directory on a tmpfs of that many MiB (the
	// full-disk tests): the cluster is copied onto it (the local image's, initialised at
	// build time) or initialised there (the official image's entrypoint), and PostgreSQL
	// runs as a child of bash, started again when it exits, so that a PANIC on a full
	// disk does not end the container. The WAL is kept small (max_wal_size 64MB), as it
	// counts against the tmpfs.
	TmpfsDataMB int

	// script, when set, runs with bash instead of the image's command (a replica).
	script string
}

// DataDir is PGDATA in both the official and the local image.
const DataDir = "/var/lib/postgresql/data"

// TmpfsDir is where Options.TmpfsDataMB mounts its tmpfs; the data directory is
// TmpfsDir/data, and files written beside it take room from PostgreSQL (a test's
// ballast).
const TmpfsDir = "/pgtmpfs"

// tmpfsScript copies the cluster onto the tmpfs (or lets the official image's
// entrypoint initialise it there) and runs PostgreSQL with the arguments %%s as a child
// of bash, again whenever it exits (a PANIC, a recovery that found no room), until the
// container is stopped.
const tmpfsScript = `set -u
dir=` + TmpfsDir + `/data
if [ -f "$PGDATA/PG_VERSION" ]; then
  cp -a "$PGDATA" "$dir" && chmod 700 "$dir"
fi
export PGDATA="$dir"
pid=
trap 'kill -INT $pid 2>/dev/null; wait $pid; exit 0' INT TERM
while :; do
  if command -v docker-entrypoint.sh >/dev/null; then
    docker-entrypoint.sh postgres %[1]s &
  else
    postgres %[1]s &
  fi
  pid=$!
  wait $pid
  echo "tmpfs script: postgres exited with $?, starting it again" >&2
  sleep 1
done`

// TimescaleDB is a running database container reached on 127.0.0.1 at a fixed port
// (published, or its own on the host's network), so that Stop and Start keep the DSN
// valid (the fault tests rely on it).
type TimescaleDB struct {
	DSN   string
	Image string
	// WasRunning: the kept container (Options.Name) was running already, for another
	// process that uses it, which its Stop would cut off.
	WasRunning bool
	container  tc.Container
}

// Start makes sure Docker answers, resolves the image and starts a container.
func Start(ctx context.Context, opts Options) (*TimescaleDB, error) {
	if opts.Name != "" && opts.Volume == "" {
		return nil, fmt.Errorf("start %s: a kept container needs a volume for its data", opts.Name)
	}
	// testcontainers-go would otherwise dial the default gateway (it believes it runs
	// inside a container) and start Ryuk, whose image cannot always be pulled.
	setDefaultEnv("TESTCONTAINERS_HOST_OVERRIDE", "127.0.0.1")
	setDefaultEnv("TESTCONTAINERS_RYUK_DISABLED", "true")
	if err := machine.EnsureDocker(ctx); err != nil {
		return nil, err
	}
	img, err := machine.ResolveImage(ctx)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := []string{"postgres", "-c", "max_connections=200"}
	if opts.Fast {
		cmd = append(cmd, "-c", "fsync=off", "-c", "full_page_writes=off")
	}
	env := map[string]string{"POSTGRES_PASSWORD": "postgres", "POSTGRES_DB": "postgres"}
	// A container that joins no Docker network and is not kept shares the host's
	// network namespace and listens on 127.0.0.1:port itself. A published port would
	// put Docker's userland proxy, veth and NAT in the path of every byte: measured,
	// that cost a fifth of the CPU of pkg/api's analytics suites (docs/testing.md).
	// PGPORT sets the server's port and the default of psql run inside the container.
	hostNet := opts.Network == "" && opts.Name == ""
	exposed := "5432/tcp"
	if hostNet {
		env["PGPORT"] = strconv.Itoa(port)
		cmd = append(cmd, "-c", "listen_addresses=127.0.0.1")
		exposed = strconv.Itoa(port) + "/tcp"
	}
	var entrypoint []string
	if opts.TmpfsDataMB > 0 {
		if opts.script != "" || opts.Volume != "" {
			return nil, fmt.Errorf("start %s: a tmpfs data directory goes with neither a script nor a volume", img)
		}
		cmd = append(cmd, "-c", "max_wal_size=64MB", "-c", "min_wal_size=32MB")
		opts.script = fmt.Sprintf(tmpfsScript, strings.Join(cmd[1:], " "))
	}
	if opts.script != "" {
		entrypoint, cmd = []string{"bash", "-c", opts.script}, nil
	}
	req := tc.ContainerRequest{
		Name:         opts.Name,
		Image:        img,
		ExposedPorts: []string{exposed},
		Env:          env,
		Cmd:          cmd,
		Entrypoint:   entrypoint,
		HostConfigModifier: func(hc *container.HostConfig) {
			if hostNet {
				hc.NetworkMode = "host"
			} else {
				hc.PortBindings = network.PortMap{
					network.MustParsePort("5432/tcp"): {{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: strconv.Itoa(port)}},
				}
			}
			if opts.TmpfsDataMB > 0 {
				hc.Tmpfs = map[string]string{TmpfsDir: fmt.Sprintf("size=%dm,mode=1777", opts.TmpfsDataMB)}
			}
			if opts.Volume != "" {
				// an empty named volume is filled from the image's data directory (the
				// local image's cluster is initialised at build time; the official
				// image initialises it on first start)
				hc.Binds = append(hc.Binds, opts.Volume+":"+DataDir)
			}
		},
		// The local image logs "ready to accept connections" only once (initdb ran at
		// build time), the official one twice: a successful query is the one signal
		// both give.
		Networks:       networks(opts),
		NetworkAliases: aliases(opts),
		// the published port, which a kept container chose when it was created (on the
		// host's network, the port itself)
		WaitingFor: wait.ForSQL(exposed, "pgx", func(_ string, p network.Port) string { return dsnAt(p.Port()) }).
			WithStartupTimeout(2 * time.Minute).WithPollInterval(250 * time.Millisecond),
	}
	wasRunning := opts.Name != "" && running(ctx, opts.Name)
	c, err := run(ctx, req)
	if err != nil {
		return nil, err
	}
	p, err := c.MappedPort(ctx, exposed)
	if err != nil {
		_ = c.Terminate(context.Background())
		return nil, fmt.Errorf("start %s: %w", img, err)
	}
	return &TimescaleDB{DSN: dsnAt(p.Port()), Image: img, WasRunning: wasRunning, container: c}, nil
}

// running tells whether the container of that name exists and runs.
func running(ctx context.Context, name string) bool {
	out, err := exec.CommandContext(ctx, "docker", "container", "inspect", "-f", "{{.State.Running}}", name).Output()
	return err == nil && strings.TrimSpace(string(out)) == "true"
}

func dsnAt(port string) string {
	return "postgres://postgres:postgres@127.0.0.1:" + port + "/postgres?sslmode=disable"
}

// run creates and starts the container, or reuses the kept one of req.Name. A kept
// container that cannot start again (its port was taken meanwhile) is replaced by a
// new one: its data is in the volume.
func run(ctx context.Context, req tc.ContainerRequest) (tc.Container, error) {
	greq := tc.GenericContainerRequest{ContainerRequest: req, Started: true, Reuse: req.Name != ""}
	c, err := tc.GenericContainer(ctx, greq)
	if err != nil && c != nil && greq.Reuse {
		_ = c.Terminate(context.Background())
		c, err = tc.GenericContainer(ctx, greq)
	}
	if err != nil {
		if c != nil && !greq.Reuse {
			_ = c.Terminate(context.Background())
		}
		return nil, fmt.Errorf("start %s: %w", req.Image, err)
	}
	return c, nil
}

// Stop stops the container, keeping its data, as a database outage would; a kept
// container (Options.Name) stays for the next Start.
func (t *TimescaleDB) Stop(ctx context.Context) error {
	d := 10 * time.Second
	return t.container.Stop(ctx, &d)
}

// Restart starts a stopped container again on the same port.
func (t *TimescaleDB) Restart(ctx context.Context) error {
	return t.container.Start(ctx)
}

// Logs is everything the container wrote to its stdout and stderr (PostgreSQL's log).
func (t *TimescaleDB) Logs(ctx context.Context) (string, error) {
	r, err := t.container.Logs(ctx)
	if err != nil {
		return "", fmt.Errorf("container logs: %w", err)
	}
	defer func() { _ = r.Close() }()
	b, err := io.ReadAll(r)
	if err != nil {
		return "", fmt.Errorf("container logs: %w", err)
	}
	return string(b), nil
}

// Exec runs a bash script in the container (e.g. to fill or free a tmpfs) and
// returns its output; a non-zero exit is an error.
func (t *TimescaleDB) Exec(ctx context.Context, script string) (string, error) {
	code, r, err := t.container.Exec(ctx, []string{"bash", "-c", script}, tcexec.Multiplexed())
	if err != nil {
		return "", fmt.Errorf("exec in the container: %w", err)
	}
	b, _ := io.ReadAll(r)
	if code != 0 {
		return string(b), fmt.Errorf("exec in the container: exit %d: %s", code, b)
	}
	return string(b), nil
}

// Terminate removes the container and its data.
func (t *TimescaleDB) Terminate(ctx context.Context) error {
	return t.container.Terminate(ctx)
}

func networks(o Options) []string {
	if o.Network == "" {
		return nil
	}
	return []string{o.Network}
}

func aliases(o Options) map[string][]string {
	if o.Network == "" || o.Alias == "" {
		return nil
	}
	return map[string][]string{o.Network: {o.Alias}}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func setDefaultEnv(k, v string) {
	if os.Getenv(k) == "" {
		_ = os.Setenv(k, v)
	}
}
