// Package notify holds each instance's one PostgreSQL LISTEN connection and fans its
// notifications out to in-process handlers (cache invalidation today, MQTT subscribers
// next). It needs no server besides the database every instance already shares.
package notify

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Handler receives one notification's payload. Handlers run on the listening
// goroutine: they must be quick and must not block.
type Handler func(payload string)

// Listener keeps a LISTEN connection open, reconnecting after failures.
//
// Notifications sent while no connection listened are lost, so whoever relies on them
// must treat a gap as "everything may have changed": Healthy is false during a gap,
// and the reset hooks run each time a gap begins and again when it ends.
type Listener struct {
	conf *pgx.ConnConfig
	log  *slog.Logger

	mu       sync.Mutex
	handlers map[string][]Handler
	resets   []func()
	healthy  atomic.Bool
}

// LastValueChannel carries every change of a variable's lastValue, sent by the writer
// after its commit (pkg/values, NotifyLastValues), for the MQTT subscribers.
const LastValueChannel = "sensorapi_last_value"

// New prepares a listener on the database of conf (a copy is kept) for the given
// channels; Run starts it. Handlers may be added at any time.
func New(conf *pgx.ConnConfig, log *slog.Logger, channels ...string) *Listener {
	conf = conf.Copy()
	conf.RuntimeParams["application_name"] = ApplicationName // to find it in pg_stat_activity
	l := &Listener{conf: conf, log: log, handlers: map[string][]Handler{}}
	for _, ch := range channels {
		l.handlers[ch] = nil
	}
	return l
}

// ApplicationName names the listening connections in pg_stat_activity.
const ApplicationName = "sensorapi-listener"

// Handle registers h for one of the listener's channels.
func (l *Listener) Handle(channel string, h Handler) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.handlers[channel] = append(l.handlers[channel], h)
}

// OnReset registers f to run whenever notifications may have been missed.
func (l *Listener) OnReset(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.resets = append(l.resets, f)
}

// Healthy tells whether a connection is listening now, so nothing is being missed.
func (l *Listener) Healthy() bool { return l.healthy.Load() }

// Run listens until ctx ends, reconnecting with a capped backoff.
func (l *Listener) Run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := l.listen(ctx)
		l.setHealthy(false)
		if ctx.Err() != nil {
			return
		}
		l.log.Warn("notification listener lost its connection; caches bypassed until it is back",
			"error", err.Error(), "retry_in", backoff.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// listen connects, subscribes to every registered channel and dispatches until an
// error.
func (l *Listener) listen(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, l.conf)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	l.mu.Lock()
	channels := make([]string, 0, len(l.handlers))
	for ch := range l.handlers {
		channels = append(channels, ch)
	}
	l.mu.Unlock()
	for _, ch := range channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return fmt.Errorf("listen %s: %w", ch, err)
		}
	}
	// Listening from here on: whatever changed during the gap is dropped now.
	l.setHealthy(true)
	for {
		if err := l.window(ctx, conn); err != nil {
			return err
		}
	}
}

// pingEvery bounds how long a silently dead connection (a network partition sends no
// FIN) goes unnoticed: after that much silence the connection is pinged.
const pingEvery = 2 * time.Second

// window dispatches the notifications that arrive within half of pingEvery, and pings
// the connection if none did: a connection that died just after a notification goes
// unnoticed for at most the rest of that window and a silent one. A read timeout
// leaves a pgx connection usable. One timeout serves the whole window: one per
// notification cost 3% of the CPU of make bench-mqtt.
func (l *Listener) window(ctx context.Context, conn *pgx.Conn) error {
	wctx, cancel := context.WithTimeout(ctx, pingEvery/2)
	defer cancel()
	heard := false
	for {
		n, err := conn.WaitForNotification(wctx)
		if err == nil {
			heard = true
			l.dispatch(n.Channel, n.Payload)
			continue
		}
		switch {
		case ctx.Err() != nil || wctx.Err() == nil:
			return fmt.Errorf("wait for notification: %w", err)
		case heard: // the connection answered within the window
			return nil
		}
		pctx, cancel := context.WithTimeout(ctx, pingEvery)
		defer cancel()
		if err := conn.Ping(pctx); err != nil {
			return fmt.Errorf("ping: %w", err)
		}
		return nil
	}
}

func (l *Listener) dispatch(channel, payload string) {
	l.mu.Lock()
	hs := l.handlers[channel]
	l.mu.Unlock()
	for _, h := range hs {
		h(payload)
	}
}

// setHealthy records the state and runs the reset hooks on every change.
func (l *Listener) setHealthy(ok bool) {
	if l.healthy.Swap(ok) == ok {
		return
	}
	l.mu.Lock()
	resets := l.resets
	l.mu.Unlock()
	for _, f := range resets {
		f()
	}
}
