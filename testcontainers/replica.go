package testcontainers

import (
	"context"
	"fmt"
	"io"

	tc "github.com/testcontainers/testcontainers-go"
	tcnetwork "github.com/testcontainers/testcontainers-go/network"

	"github.com/sensordata/sensorapi/testcontainers/machine"
)

// Pair is a primary and a streaming replica of it, made the way PostgreSQL's own
// replication is set up by hand: the replica container starts with pg_basebackup -R
// from the primary, over a Docker network of their own.
type Pair struct {
	Primary, Replica *TimescaleDB
	network          *tc.DockerNetwork
}

// replicaScript clones the primary on first start (a restarted replica keeps its data
// and resumes streaming), then runs PostgreSQL as a hot standby.
const replicaScript = `set -e
if [ ! -f "$PGDATA/standby.signal" ]; then
  rm -rf "$PGDATA"/* && chmod 700 "$PGDATA"
  PGPASSWORD=postgres pg_basebackup -h primary -U postgres -D "$PGDATA" -R -X stream -c fast
fi
exec postgres -c hot_standby=on -c max_connections=200`

// StartPair starts a primary and its replica; Terminate removes both and the network.
func StartPair(ctx context.Context, opts Options) (*Pair, error) {
	if err := machine.EnsureDocker(ctx); err != nil {
		return nil, err
	}
	nw, err := tcnetwork.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("replica network: %w", err)
	}
	p := &Pair{network: nw}
	opts.Network, opts.Alias = nw.Name, "primary"
	if p.Primary, err = Start(ctx, opts); err != nil {
		p.Terminate(ctx)
		return nil, err
	}
	if err := p.Primary.allowReplication(ctx); err != nil {
		p.Terminate(ctx)
		return nil, err
	}
	if p.Replica, err = Start(ctx, Options{Network: nw.Name, Alias: "replica", script: replicaScript}); err != nil {
		p.Terminate(ctx)
		return nil, fmt.Errorf("start replica: %w", err)
	}
	return p, nil
}

// allowReplication lets replication connections in from the network.
func (t *TimescaleDB) allowReplication(ctx context.Context) error {
	code, out, err := t.container.Exec(ctx, []string{"bash", "-c",
		`echo "host replication all all scram-sha-256" >> "$PGDATA/pg_hba.conf" && ` +
			`PGPASSWORD=postgres psql -h 127.0.0.1 -U postgres -qc "SELECT pg_reload_conf()"`})
	if err == nil && code != 0 {
		b, _ := io.ReadAll(out)
		err = fmt.Errorf("exit %d: %s", code, b)
	}
	if err != nil {
		return fmt.Errorf("allow replication on the primary: %w", err)
	}
	return nil
}

// Terminate removes the containers and the network.
func (p *Pair) Terminate(ctx context.Context) {
	for _, t := range []*TimescaleDB{p.Replica, p.Primary} {
		if t != nil {
			_ = t.Terminate(ctx)
		}
	}
	if p.network != nil {
		_ = p.network.Remove(ctx)
	}
}
