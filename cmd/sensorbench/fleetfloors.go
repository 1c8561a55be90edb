package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/sensordata/sensorapi/cmd/internal/benchharness"
	"github.com/sensordata/sensorapi/pkg/ingest"
)

// naiveSchema is what a user writing their own ingestion would have: a plain
// hypertable with a unique (variable_id, ts) index and a plain table of last values,
// no triggers, no rollups.
const naiveSchema = `
CREATE TABLE naive_values (variable_id bigint NOT NULL, ts timestamptz NOT NULL,
    value double precision NOT NULL, context jsonb, created_at timestamptz NOT NULL DEFAULT now());
SELECT create_hypertable('naive_values', by_range('ts', INTERVAL '7 days'), create_default_indexes => false);
CREATE UNIQUE INDEX ON naive_values (variable_id, ts DESC);
CREATE TABLE naive_variables (id bigint PRIMARY KEY, last_value double precision, last_ts timestamptz);
INSERT INTO naive_variables (id) SELECT generate_series(1, $1::int);`

// naiveFloor: fleetFloorConns pgx connections, one transaction per message: INSERT the
// message's dots, UPDATE each variable's last value, COMMIT.
func naiveFloor(ctx context.Context, h *benchharness.Harness, d time.Duration) (*fleetResult, error) {
	if _, err := h.DB.Pool.Exec(ctx, strings.Replace(naiveSchema, "$1", fmt.Sprint(fleetDevices*len(fleetVariables)), 1)); err != nil {
		return nil, fmt.Errorf("naive schema: %w", err)
	}
	conf, err := pgxpool.ParseConfig(h.DSN)
	if err != nil {
		return nil, err
	}
	conf.MaxConns, conf.MinConns = fleetFloorConns, fleetFloorConns
	pool, err := pgxpool.NewWithConfig(ctx, conf)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	return runFleet(ctx, fleetFloorConns, d, func(ctx context.Context, _, dev int, ts int64) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			t := time.UnixMilli(ts)
			ids := make([]int64, len(fleetVariables))
			for i := range ids {
				ids[i] = int64(dev*len(fleetVariables) + i + 1)
			}
			v := float64(ts%1000) / 10
			if _, err := tx.Exec(ctx, `INSERT INTO naive_values (variable_id, ts, value) VALUES ($1, $3, $4), ($2, $3, $4)`,
				ids[0], ids[1], t, v); err != nil {
				return err
			}
			for _, id := range ids {
				if _, err := tx.Exec(ctx, `UPDATE naive_variables SET last_value = $2, last_ts = $3 WHERE id = $1`, id, v, t); err != nil {
					return err
				}
			}
			return nil
		})
	}), nil
}

// ceiling is a process that takes the fleet's messages over HTTP and MQTT, parses
// each as the service does and discards it: no database, no authentication.
type ceiling struct {
	cmd       *exec.Cmd
	url, mqtt string
}

// startCeiling runs this program again in -ceiling mode and reads its addresses.
func startCeiling(ctx context.Context) (*ceiling, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self, "-ceiling")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start ceiling: %w", err)
	}
	var httpAddr, mqttAddr string
	if _, err := fmt.Fscanln(bufio.NewReader(out), &httpAddr, &mqttAddr); err != nil {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("ceiling addresses: %w", err)
	}
	return &ceiling{cmd: cmd, url: "http://" + httpAddr, mqtt: mqttAddr}, nil
}

func (c *ceiling) close() { _ = c.cmd.Process.Kill(); _ = c.cmd.Wait() }

// serveCeiling is the -ceiling mode: it prints "HTTPADDR MQTTADDR" and serves until
// killed.
func serveCeiling() error {
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	broker := mochi.New(&mochi.Options{InlineClient: false, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := broker.AddHook(&discardHook{}, nil); err != nil {
		return err
	}
	if err := broker.AddListener(listeners.NewNet("tcp", ml)); err != nil {
		return err
	}
	if err := broker.Serve(); err != nil {
		return err
	}
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.POST("/api/v1.6/devices/:label/", func(c *gin.Context) {
		body, err := io.ReadAll(c.Request.Body)
		if err != nil {
			c.Status(http.StatusBadRequest)
			return
		}
		dots, err := parseDevice(body)
		if err != nil {
			c.JSON(http.StatusBadRequest, gin.H{"detail": err.Error()})
			return
		}
		c.Data(http.StatusOK, "application/json", statusBody(dots))
	})
	fmt.Println(hl.Addr(), ml.Addr())
	return http.Serve(hl, e) //nolint:gosec // a benchmark's loopback server, killed by its parent
}

func parseDevice(body []byte) ([]ingest.Dot, error) {
	p, err := ingest.NewParser("", time.Now())
	if err != nil {
		return nil, err
	}
	return p.Device(body)
}

// statusBody is the device route's answer: {LABEL: [{"status_code":201}, ...]}.
func statusBody(dots []ingest.Dot) []byte {
	n := map[string]int{}
	var order []string
	for _, d := range dots {
		if n[d.Target] == 0 {
			order = append(order, d.Target)
		}
		n[d.Target]++
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, l := range order {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:[%s]", l, strings.TrimSuffix(strings.Repeat(`{"status_code":201},`, n[l]), ","))
	}
	b.WriteByte('}')
	return b.Bytes()
}

// discardHook lets every client in and acknowledges every parsed publish unrouted.
type discardHook struct{ mochi.HookBase }

func (h *discardHook) ID() string { return "discard" }

func (h *discardHook) Provides(b byte) bool {
	return b == mochi.OnConnectAuthenticate || b == mochi.OnACLCheck || b == mochi.OnPublish
}

func (h *discardHook) OnConnectAuthenticate(*mochi.Client, packets.Packet) bool { return true }

func (h *discardHook) OnACLCheck(*mochi.Client, string, bool) bool { return true }

func (h *discardHook) OnPublish(_ *mochi.Client, pk packets.Packet) (packets.Packet, error) {
	if _, err := parseDevice(pk.Payload); err != nil {
		return pk, packets.ErrPayloadFormatInvalid
	}
	return pk, packets.CodeSuccessIgnore
}
