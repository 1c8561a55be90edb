package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/ingest"
)

const (
	queueName = "events"
	// maxAttempts is River's bound; the 24 h bound (Config.GiveUp) ends retries first
	// with the default backoff.
	maxAttempts = 1000
)

// DeliveryArgs is the River job of one delivery: the key of its event_deliveries row,
// which holds the rendered request.
type DeliveryArgs struct {
	Delivery int64  `json:"delivery"`
	ID       string `json:"id"` // its public id: X-Event-Delivery
}

// Kind is the River job kind.
func (DeliveryArgs) Kind() string { return "event_delivery" }

// Writer writes values through the ingestion pipeline (set_variable and mqtt actions).
type Writer interface {
	ToDevice(ctx context.Context, account int64, device string, dots []ingest.Dot) error
	ToVariableID(ctx context.Context, account int64, id string, dots []ingest.Dot) error
}

// worker runs deliveries.
type worker struct {
	river.WorkerDefaults[DeliveryArgs]
	s *Service
}

// Timeout bounds one attempt (River cancels its context after it).
func (w *worker) Timeout(*river.Job[DeliveryArgs]) time.Duration {
	return w.s.cfg.Timeout + 5*time.Second
}

// Work runs one attempt of a delivery and records its outcome on the delivery's row.
// A failed attempt returns its error: River retries it with Config's backoff, until
// the delivery is older than GiveUp (then it is failed for good).
func (w *worker) Work(ctx context.Context, job *river.Job[DeliveryArgs]) error {
	s := w.s
	var req Action
	var raw []byte
	var secret, eventLabel string
	var account int64
	var number int
	var created time.Time
	// The attempt's number is the delivery row's count, taken before anything is sent,
	// not River's: River does not count an attempt its stopping instance cancelled,
	// whose request may have reached the receiver all the same.
	err := s.pool.QueryRow(ctx, `UPDATE event_deliveries d SET attempt = d.attempt + 1
		FROM events e WHERE e.id = d.event_id AND d.id = $1 AND d.status NOT IN ('delivered', 'failed')
		RETURNING d.request, d.attempt, d.created_at, e.secret, e.account_id, e.label`, job.Args.Delivery).
		Scan(&raw, &number, &created, &secret, &account, &eventLabel)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // finished, or its event was deleted: nothing left to deliver
	}
	if err != nil {
		return fmt.Errorf("claim a delivery attempt: %w", err)
	}
	if err := json.Unmarshal(raw, &req); err != nil {
		return river.JobCancel(fmt.Errorf("read delivery: %w", err))
	}
	start := time.Now()
	code, err := s.run(ctx, req, attempt{delivery: job.Args.ID, number: number, secret: secret, account: account, ts: req.TS})
	outcome := "delivered"
	switch {
	case err == nil:
	case errors.Is(err, errPermanent) || time.Since(created) >= s.cfg.GiveUp || job.Attempt >= job.MaxAttempts:
		outcome = "failed"
	default:
		outcome = "retry"
	}
	s.metrics.deliveries.WithLabelValues(req.Type, outcome).Inc()
	s.metrics.attemptSeconds.Observe(time.Since(start).Seconds())
	if rerr := s.record(job.Args.Delivery, code, err, outcome); rerr != nil {
		s.log.Warn("record delivery attempt", "delivery", job.Args.Delivery, "error", rerr.Error())
	}
	switch outcome {
	case "failed":
		s.log.Warn("event delivery failed for good", "event", eventLabel, "delivery", job.Args.Delivery,
			"attempt", number, "error", err.Error())
		return river.JobCancel(err)
	case "retry":
		return err
	}
	return nil
}

// record saves an attempt's outcome on the delivery's row (its number: Work's claim).
func (s *Service) record(delivery int64, code int, err error, outcome string) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.QueryTimeout)
	defer cancel()
	status := map[string]string{"delivered": "delivered", "failed": "failed", "retry": "retrying"}[outcome]
	var msg *string
	if err != nil {
		m := err.Error()
		if len(m) > 500 {
			m = m[:500]
		}
		msg = &m
	}
	var hs *int
	if code != 0 {
		hs = &code
	}
	_, rerr := s.pool.Exec(ctx, `UPDATE event_deliveries SET status = $2,
		http_status = $3, error = $4, delivered_at = CASE WHEN $2 = 'delivered' THEN now() ELSE delivered_at END
		WHERE id = $1 AND status <> 'delivered'`, delivery, status, hs, msg)
	return rerr
}

// errPermanent marks failures that no retry can fix.
var errPermanent = errors.New("permanent")

// run performs the action by its type (actionType.run); code is the webhook's HTTP
// status (0 if none).
func (s *Service) run(ctx context.Context, req Action, at attempt) (int, error) {
	if req.spec == nil {
		return 0, fmt.Errorf("%w: unknown action type %q", errPermanent, req.Type)
	}
	return req.spec.run(ctx, s, at)
}

// write writes dots to a target through the pipeline. A refusal no retry can change
// (invalid dots, a variable gone, a disabled device) fails the delivery at once; the
// database unavailable, a full queue or the storage budget are retried.
func (s *Service) write(ctx context.Context, account int64, t target, dots []ingest.Dot) error {
	var err error
	if t.id != "" {
		err = s.writer.ToVariableID(ctx, account, t.id, dots)
	} else {
		err = s.writer.ToDevice(ctx, account, t.device, dots)
	}
	var ae *fault.Error
	if errors.As(err, &ae) {
		switch ae.Kind {
		case fault.KindInvalid, fault.KindNotFound, fault.KindDisabled, fault.KindForbidden:
			return fmt.Errorf("%w: %w", errPermanent, err)
		}
	}
	return err
}

// retryPolicy is exponential backoff: Base·2^(attempt-1), at most Max.
type retryPolicy struct{ base, max time.Duration }

func (p retryPolicy) NextRetry(job *rivertype.JobRow) time.Time {
	n := max(job.Attempt, 1) - 1
	d := p.max
	if n < 40 {
		d = min(p.base*time.Duration(1<<n), p.max)
	}
	return time.Now().Add(d)
}

// newHTTPClient is the webhooks' client: no proxy from the environment, no redirects
// followed, and unless private targets are allowed a dialer that refuses blocked
// addresses after resolution (DNS rebinding cannot pass the create-time check).
func newHTTPClient(allowPrivate bool) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		d.Control = dialControl
	}
	return &http.Client{
		Transport: &http.Transport{DialContext: d.DialContext, TLSHandshakeTimeout: 5 * time.Second,
			MaxIdleConnsPerHost: 4, IdleConnTimeout: 60 * time.Second, ForceAttemptHTTP2: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
