package events

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/model"
	"github.com/sensordata/sensorapi/pkg/store"
	"github.com/sensordata/sensorapi/pkg/validate"
)

// Event is a row of events with its condition variable's names.
type Event struct {
	bun.BaseModel `bun:"table:events,alias:e"`

	ID             int64      `bun:"id,pk,autoincrement"`
	PublicID       string     `bun:"public_id,nullzero"`
	AccountID      int64      `bun:"account_id"`
	Label          string     `bun:"label"`
	IsActive       bool       `bun:"is_active"`
	VariableID     int64      `bun:"variable_id"`
	Operator       string     `bun:"operator"`
	Threshold      float64    `bun:"threshold"`
	DurationMS     int64      `bun:"duration_ms"`
	Actions        []Action   `bun:"actions,type:jsonb"`
	BackToNormal   []Action   `bun:"back_to_normal,type:jsonb"`
	Secret         string     `bun:"secret"`
	State          string     `bun:"state,scanonly"` // event_states
	RunSince       *int64     `bun:"run_since,scanonly"`
	LastTS         *int64     `bun:"last_ts,scanonly"`
	StateChangedAt *time.Time `bun:"state_changed_at,scanonly"`
	CreatedAt      time.Time  `bun:"created_at,nullzero"`

	version  string // the state row's xmin, as the evaluator read it
	settings string // the events row's xmin, as the evaluator read it

	VariablePublicID string `bun:"variable_public_id,scanonly"`
	VariableLabel    string `bun:"variable_label,scanonly"`
	DeviceLabel      string `bun:"device_label,scanonly"`
}

// Response is an event as the API shows it; Secret only on creation.
type Response struct {
	ID             string           `json:"id"`
	URL            string           `json:"url"`
	Label          string           `json:"label"`
	IsActive       bool             `json:"isActive"`
	Condition      ConditionJSON    `json:"condition"`
	Actions        []map[string]any `json:"actions"`
	BackToNormal   []map[string]any `json:"backToNormal"`
	State          string           `json:"state"`
	StateChangedAt *string          `json:"stateChangedAt"`
	CreatedAt      string           `json:"createdAt"`
	Secret         string           `json:"secret,omitempty"`
}

// ConditionJSON is the condition as the API shows it: the variable by id, the
// duration in seconds.
type ConditionJSON struct {
	Variable string  `json:"variable"`
	Device   string  `json:"deviceLabel"`
	Label    string  `json:"variableLabel"`
	Operator string  `json:"operator"`
	Value    float64 `json:"value"`
	Duration float64 `json:"duration"`
}

// JSON is the event's response shape.
func (e *Event) JSON(base string) Response {
	r := Response{ID: e.PublicID, URL: base + "/api/v2.0/events/" + e.PublicID, Label: e.Label, IsActive: e.IsActive,
		Condition: ConditionJSON{Variable: e.VariablePublicID, Device: e.DeviceLabel, Label: e.VariableLabel,
			Operator: e.Operator, Value: e.Threshold, Duration: float64(e.DurationMS) / 1000},
		Actions: actionsJSON(e.Actions), BackToNormal: actionsJSON(e.BackToNormal), State: e.State,
		StateChangedAt: model.NullableTimestamp(e.StateChangedAt), CreatedAt: model.Timestamp(e.CreatedAt)}
	return r
}

func actionsJSON(as []Action) []map[string]any {
	out := make([]map[string]any, len(as))
	for i, a := range as {
		out[i] = a.JSON()
	}
	return out
}

// condition is the event's condition.
func (e *Event) condition() Condition {
	return Condition{Operator: e.Operator, Threshold: e.Threshold, DurationMS: e.DurationMS}
}

// NewSecret makes an event's signing secret.
func NewSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("event secret: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// Fields are the list filters and sort keys of events.
var Fields = map[string]store.Field{
	"id":        {Column: "e.public_id", Kind: store.ID},
	"label":     {Column: "e.label", Kind: store.Text, Sortable: true, Searchable: true},
	"isActive":  {Column: "e.is_active", Kind: store.Bool},
	"state":     {Column: "s.state", Kind: store.Text},
	"createdAt": {Column: "e.created_at", Kind: store.Time, Sortable: true},
}

// rows scopes a select of events (alias e) to the account, joining the condition
// variable (v), its device (d) and the state (s).
func rows(q *bun.SelectQuery, accountID int64) *bun.SelectQuery {
	return q.Join("JOIN variables AS v ON v.id = e.variable_id").Join("JOIN devices AS d ON d.id = v.device_id").
		Join("JOIN event_states AS s ON s.event_id = e.id").Where("e.account_id = ?", accountID)
}

// columns are the columns of a full Event.
func columns(q *bun.SelectQuery) *bun.SelectQuery {
	return q.ColumnExpr("e.*").
		ColumnExpr("v.public_id AS variable_public_id, v.label AS variable_label, d.label AS device_label").
		ColumnExpr("s.state, s.run_since, s.last_ts, s.changed_at AS state_changed_at")
}

// List returns one page of the account's events and the count of all matches.
func List(ctx context.Context, db bun.IDB, accountID int64, p store.ListParams) ([]Event, int, error) {
	events := []Event{}
	base := func() *bun.SelectQuery { return rows(db.NewSelect().TableExpr("events AS e"), accountID) }
	full := columns(rows(db.NewSelect().Model(&events), accountID))
	n, err := store.ScanPage(ctx, p, base, "e.id", full)
	if err != nil {
		return nil, 0, fmt.Errorf("list events: %w", err)
	}
	return events, n, nil
}

// Find reads the account's event by path key (id or ~label); anything else is a 404.
func Find(ctx context.Context, db bun.IDB, accountID int64, rawKey string, forUpdate bool) (*Event, error) {
	notFound := fault.NotFound(fmt.Sprintf("Event '%s' was not found.", rawKey))
	key, ok := validate.ParseKey(rawKey)
	if !ok {
		return nil, notFound
	}
	e := &Event{}
	q := columns(rows(db.NewSelect().Model(e), accountID))
	if key.ID != "" {
		q = q.Where("e.public_id = ?", key.ID)
	} else {
		q = q.Where("e.label = ?", key.Label)
	}
	if forUpdate {
		q = q.For("UPDATE OF e")
	}
	if err := q.Scan(ctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, notFound
		}
		return nil, fmt.Errorf("read event: %w", err)
	}
	return e, nil
}

// Insert creates the event and its state (Apply set it).
func Insert(ctx context.Context, db bun.IDB, e *Event) error {
	_, err := db.NewInsert().Model(e).
		Column("account_id", "label", "is_active", "variable_id", "operator", "threshold", "duration_ms",
			"actions", "back_to_normal", "secret").
		Returning("id, public_id, created_at").Exec(ctx)
	if err != nil {
		return writeError(err)
	}
	_, err = db.NewRaw(`INSERT INTO event_states (event_id, state, run_since, last_ts) VALUES (?, ?, ?, ?)`,
		e.ID, e.State, e.RunSince, e.LastTS).Exec(ctx)
	if err != nil {
		return fmt.Errorf("write event state: %w", err)
	}
	return nil
}

// Update saves the event's settings, and its state when reset (Apply).
func Update(ctx context.Context, db bun.IDB, e *Event, reset bool) error {
	_, err := db.NewUpdate().Model(e).
		Column("label", "is_active", "variable_id", "operator", "threshold", "duration_ms", "actions",
			"back_to_normal").WherePK().Exec(ctx)
	if err != nil || !reset {
		return writeError(err)
	}
	_, err = db.NewRaw(`UPDATE event_states SET state = ?, run_since = ?, last_ts = ? WHERE event_id = ?`,
		e.State, e.RunSince, e.LastTS, e.ID).Exec(ctx)
	if err != nil {
		return fmt.Errorf("write event state: %w", err)
	}
	return nil
}

// Delete removes the account's event and its deliveries.
func Delete(ctx context.Context, db bun.IDB, id int64) error {
	if _, err := db.NewDelete().TableExpr("events").Where("id = ?", id).Exec(ctx); err != nil {
		return fmt.Errorf("delete event: %w", err)
	}
	return nil
}

// writeError turns a duplicate label into an invalid fault on label.
func writeError(err error) error {
	if err == nil {
		return nil
	}
	if store.IsUniqueViolation(err, "events_account_id_label_key") {
		return fault.Invalid("label", "An event with this label already exists.")
	}
	return fmt.Errorf("write event: %w", err)
}
