package mqtt

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// lastValue is a variable's new lastValue, as the database notifies it
// (pkg/values, lastValueSQL) or as read back.
type lastValue struct {
	Account   int64           `json:"a"`
	Device    string          `json:"d"`
	Variable  string          `json:"v"`
	Value     float64         `json:"value"`
	Timestamp int64           `json:"ts"`
	Context   json.RawMessage `json:"c"`
	// A payload that would not fit NOTIFY's 8000 bytes names the variable instead.
	Reread bool  `json:"reread"`
	ID     int64 `json:"id"`
}

func (v lastValue) context() []byte {
	if len(v.Context) == 0 {
		return []byte("{}")
	}
	return v.Context
}

// onLastValue runs on the notification listener: it must not block, so a payload
// that needs a read is handed to a goroutine.
func (b *Broker) onLastValue(payload string) {
	// every instance hears every write; most have nobody (of that account) to tell
	if !b.sessions.anyListening() {
		return // not even worth parsing: 7% of the CPU of make bench-mqtt's publishers
	}
	var v lastValue
	if err := json.Unmarshal([]byte(payload), &v); err != nil {
		b.Log.Warn("unreadable last-value notification", "error", err.Error())
		return
	}
	listeners := b.sessions.listeners(v.Account)
	if len(listeners) == 0 {
		return
	}
	if !v.Reread {
		b.deliver(listeners, v)
		return
	}
	go func() {
		ctx, cancel := b.writeContext()
		defer cancel()
		vs, err := b.readLastValues(ctx, `v.id = $2`, v.Account, v.ID)
		if err != nil {
			b.Log.Warn("read last value", "error", err.Error())
			return
		}
		listeners := b.sessions.listeners(v.Account) // again: the read took a while
		for _, v := range vs {
			b.deliver(listeners, v)
		}
	}()
}

// deliver offers v to the sessions (the listening ones of its account).
func (b *Broker) deliver(to []*session, v lastValue) {
	for _, s := range to {
		b.offer(s, v)
	}
}

// offer queues v for one session; a subscriber that cannot keep up is disconnected.
func (b *Broker) offer(s *session, v lastValue, only ...string) {
	n, ok := s.offer(v, only...)
	b.Metrics.MQTTDeliveries.Add(float64(n))
	if !ok {
		b.Log.Warn("mqtt subscriber too slow; disconnecting", "client", s.cl.ID)
		s.cl.Stop(fmt.Errorf("%d deliveries queued", outboundQueue))
	}
}

// initial sends a new subscription the current last value of each matching variable.
func (b *Broker) initial(s *session, filters []string) {
	ctx, cancel := b.writeContext()
	defer cancel()
	for _, name := range filters {
		f, ok := parseFilter(name)
		if !ok {
			continue
		}
		vs, err := b.readLastValues(ctx, `($2 = '+' OR d.label = $2) AND ($3 = '+' OR v.label = $3)`,
			s.account, f.device, f.variable)
		if err != nil {
			b.Log.Warn("read last values for a subscription", "client", s.cl.ID, "error", err.Error())
			return
		}
		for _, v := range vs {
			b.offer(s, v, name)
		}
	}
}

// catchUp sends every subscription the current last values it may have missed while
// the listener was away; offer skips those it had already and any older ones.
func (b *Broker) catchUp() {
	for _, s := range b.sessions.all() {
		b.initial(s, s.subscribed())
	}
}

// readLastValues reads the account's variables matching where (its own placeholders
// from $2) that have a last value, oldest first so that newer ones win the
// per-subscription order.
func (b *Broker) readLastValues(ctx context.Context, where string, account int64, args ...any) ([]lastValue, error) {
	rows, err := b.Pool.Query(ctx, `SELECT d.label, v.label, v.last_value,
			(extract(epoch FROM v.last_value_ts) * 1000)::bigint, coalesce(v.last_value_context, '{}')
		FROM variables v JOIN devices d ON d.id = v.device_id
		WHERE d.account_id = $1 AND v.last_value_ts IS NOT NULL AND `+where+`
		ORDER BY v.last_value_ts LIMIT 10000`, append([]any{account}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("read last values: %w", err)
	}
	vs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (lastValue, error) {
		v := lastValue{Account: account}
		err := r.Scan(&v.Device, &v.Variable, &v.Value, &v.Timestamp, &v.Context)
		return v, err
	})
	if err != nil {
		return nil, fmt.Errorf("read last values: %w", err)
	}
	return vs, nil
}
