// Package mqtt is the broker embedded in `sensorapi serve` (API.md §12). mochi-mqtt
// speaks MQTT 3.1.1 and 5; the hook here connects it to the rest of the instance:
// tokens authenticate connections, publishes go through the ingestion pipeline (the
// PUBACK waits for their commit), and every lastValue change, from any instance,
// reaches the subscribers through the database's notifications.
package mqtt

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"

	"github.com/sensordata/sensorapi/pkg/auth"
	"github.com/sensordata/sensorapi/pkg/cache"
	"github.com/sensordata/sensorapi/pkg/config"
	"github.com/sensordata/sensorapi/pkg/ingest"
	"github.com/sensordata/sensorapi/pkg/metrics"
	"github.com/sensordata/sensorapi/pkg/notify"
)

// MaxPacket is the largest packet accepted; a larger one closes the connection.
const MaxPacket = 1 << 20

// Deps are the parts of the instance the broker shares with the HTTP API.
type Deps struct {
	Tokens        *auth.Tokens
	Ingest        *ingest.Pipeline
	Listener      *notify.Listener
	Invalidations *cache.Router
	Pool          *pgxpool.Pool // reads last values for new subscriptions
	Metrics       *metrics.Metrics
	Log           *slog.Logger
	WriteTimeout  time.Duration // a publish's wait for its commit, at most
}

// Broker is the embedded MQTT server.
type Broker struct {
	Deps
	server   *mochi.Server
	sessions *sessions
	addrs    []net.Addr
}

// New builds a broker and subscribes it to token revocations and last values.
func New(d Deps) (*Broker, error) {
	caps := mochi.NewDefaultServerCapabilities()
	caps.MaximumPacketSize = MaxPacket
	caps.MaximumQos = 1         // QoS 2 publishes are taken as QoS 1
	caps.RetainAvailable = 0    // last values are delivered on subscribe instead
	caps.SharedSubAvailable = 0 // every subscriber gets every last value
	caps.MaximumSessionExpiryInterval = 3600
	b := &Broker{
		Deps: d,
		server: mochi.New(&mochi.Options{Capabilities: caps, InlineClient: false,
			Logger: slog.New(errorsOnly{d.Log.Handler()}).With("component", "mqtt")}),
		sessions: newSessions(),
	}
	if err := b.server.AddHook(&hook{b: b}, nil); err != nil {
		return nil, fmt.Errorf("mqtt hook: %w", err)
	}
	d.Listener.Handle(notify.LastValueChannel, b.onLastValue)
	d.Invalidations.On("token", b.onTokenInvalidated)
	// notifications may have been missed: check every connection's token again
	d.Listener.OnReset(func() { go b.reauthenticate() })
	// and last values may have been missed (a failover, a lost connection): once
	// listening again, every subscription gets the current ones it has not had
	d.Listener.OnReset(func() {
		if d.Listener.Healthy() {
			go b.catchUp()
		}
	})
	return b, nil
}

// Listen opens the plain and TLS listeners the configuration names.
func (b *Broker) Listen(c config.MQTT) error {
	if c.Addr != "" {
		l, err := net.Listen("tcp", c.Addr)
		if err != nil {
			return fmt.Errorf("mqtt listen %s: %w", c.Addr, err)
		}
		if err := b.add("tcp", l); err != nil {
			return err
		}
	}
	if c.TLSAddr != "" {
		cert, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
		if err != nil {
			return fmt.Errorf("mqtt TLS certificate: %w", err)
		}
		l, err := tls.Listen("tcp", c.TLSAddr, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
		if err != nil {
			return fmt.Errorf("mqtt listen %s: %w", c.TLSAddr, err)
		}
		if err := b.add("tls", l); err != nil {
			return err
		}
	}
	return nil
}

func (b *Broker) add(id string, l net.Listener) error {
	b.addrs = append(b.addrs, l.Addr())
	if err := b.server.AddListener(listeners.NewNet(id, l)); err != nil {
		_ = l.Close()
		return fmt.Errorf("mqtt listener %s: %w", id, err)
	}
	return nil
}

// Addrs are the bound addresses, plain first.
func (b *Broker) Addrs() []net.Addr { return b.addrs }

// Serve starts accepting connections and returns.
func (b *Broker) Serve() error {
	if err := b.server.Serve(); err != nil {
		return fmt.Errorf("mqtt serve: %w", err)
	}
	return nil
}

// Close closes the listeners and every connection.
func (b *Broker) Close() error { return b.server.Close() }

// writeContext bounds one publish's wait for its commit.
func (b *Broker) writeContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), b.WriteTimeout)
}

// errorsOnly passes on mochi's errors only: it logs every closed connection as a
// warning, which a fleet of thousands turns into noise. The hook logs what matters.
type errorsOnly struct{ slog.Handler }

func (h errorsOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelError && h.Handler.Enabled(ctx, l)
}

func (h errorsOnly) WithAttrs(as []slog.Attr) slog.Handler {
	return errorsOnly{h.Handler.WithAttrs(as)}
}

func (h errorsOnly) WithGroup(g string) slog.Handler { return errorsOnly{h.Handler.WithGroup(g)} }
