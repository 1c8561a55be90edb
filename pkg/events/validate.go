package events

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/uptrace/bun"

	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/validate"
)

// Limits of an event's body.
const (
	maxActions   = 10
	maxTemplate  = 64 << 10
	maxDurationS = 366 * 24 * 3600
)

// Apply validates an event body and applies it to e: create (and PUT) require label,
// condition and actions; PATCH changes only what it sends (condition fields merge,
// action lists are replaced whole). allowPrivate lets webhooks target private
// addresses (SENSORAPI_WEBHOOK_ALLOW_PRIVATE). A new condition, a new variable or a
// reactivation resets the state to normal from the variable's current last value on:
// only values written from then on are evaluated.
func Apply(ctx context.Context, db bun.IDB, raw map[string]json.RawMessage, e *Event, create, allowPrivate bool) (reset bool, err error) {
	errs := fault.Fields{}
	o := validate.NewObject(raw, errs, "")
	if create {
		o.Require("label", "condition", "actions")
	}
	if l, ok := o.Label("label"); ok {
		e.Label = l
	}
	reset = create
	if b, ok := o.Bool("isActive"); ok {
		reset = reset || (b && !e.IsActive)
		e.IsActive = b
	}
	if c, ok := o.Object("condition"); ok {
		changed, err := readCondition(ctx, db, c, e, create)
		if err != nil {
			return false, err
		}
		reset = reset || changed
	}
	for _, name := range []string{"actions", "backToNormal"} {
		items, ok := o.List(name)
		if !ok {
			continue
		}
		as := readActions(ctx, db, o, name, items, e.AccountID, allowPrivate)
		if name == "actions" {
			e.Actions = as
		} else {
			e.BackToNormal = as
		}
	}
	if e.BackToNormal == nil {
		e.BackToNormal = []Action{}
	}
	if err := errs.Err(); err != nil {
		return false, err
	}
	if err := checkLoops(ctx, db, e); err != nil {
		return false, err
	}
	if reset {
		e.State, e.RunSince = Normal, nil
		err := db.NewRaw(`SELECT (extract(epoch FROM last_value_ts) * 1000)::bigint FROM variables WHERE id = ?`,
			e.VariableID).Scan(ctx, &e.LastTS)
		return true, err
	}
	return false, nil
}

// readCondition reads the condition object; changed tells whether it differs now.
func readCondition(ctx context.Context, db bun.IDB, c *validate.Object, e *Event, create bool) (bool, error) {
	if create {
		c.Require("variable", "operator", "value")
	}
	before := [4]any{e.VariableID, e.Operator, e.Threshold, e.DurationMS}
	if ref, ok := c.String("variable", 300); ok {
		v, found, err := resolveVariable(ctx, db, e.AccountID, ref)
		switch {
		case err != nil:
			return false, err
		case !found:
			c.Fail("variable", fmt.Sprintf("Variable '%s' was not found.", ref))
		default:
			e.VariableID, e.DeviceLabel, e.VariableLabel, e.VariablePublicID = v.key, v.device, v.variable, v.id
		}
	}
	if op, ok := c.String("operator", 0); ok {
		if !slices.Contains(Operators, op) {
			c.Fail("operator", `Choose one of ">", ">=", "<", "<=", "==", "!=".`)
		} else {
			e.Operator = op
		}
	}
	if f, ok := number(c, "value"); ok {
		e.Threshold = f
	}
	if f, ok := number(c, "duration"); ok {
		if f < 0 || f > maxDurationS {
			c.Fail("duration", fmt.Sprintf("Ensure this value is between 0 and %d seconds.", maxDurationS))
		} else {
			e.DurationMS = int64(math.Round(f * 1000))
		}
	}
	return before != [4]any{e.VariableID, e.Operator, e.Threshold, e.DurationMS}, nil
}

// number reads a finite JSON number.
func number(o *validate.Object, name string) (float64, bool) {
	v, present := o.Raw[name]
	if !present {
		return 0, false
	}
	var f float64
	if err := json.Unmarshal(v, &f); err != nil || o.IsNull(name) || math.IsInf(f, 0) || math.IsNaN(f) {
		o.Fail(name, validate.MsgNumber)
		return 0, false
	}
	return f, true
}

// readActions reads a list of actions, each item's messages under "name.i.".
func readActions(ctx context.Context, db bun.IDB, o *validate.Object, name string, items []json.RawMessage,
	account int64, allowPrivate bool) []Action {
	if len(items) > maxActions {
		o.Fail(name, fmt.Sprintf("Ensure this list has no more than %d actions.", maxActions))
		return nil
	}
	out := make([]Action, 0, len(items))
	for i, item := range items {
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(item, &raw); err != nil || raw == nil {
			o.Fail(fmt.Sprintf("%s.%d", name, i), validate.MsgObject)
			continue
		}
		a := readAction(ctx, db, validate.NewObject(raw, o.Errs, fmt.Sprintf("%s%s.%d.", o.Prefix, name, i)), account, allowPrivate)
		out = append(out, a)
	}
	return out
}

// readAction reads one action: its type, then the type's fields (actionType.read).
func readAction(ctx context.Context, db bun.IDB, o *validate.Object, account int64, allowPrivate bool) Action {
	var a Action
	if !o.Require("type") {
		return a
	}
	a.Type, _ = o.String("type", 0)
	r, ok := actionTypes[a.Type]
	if !ok {
		o.Fail("type", typeMessage())
		return a
	}
	a.spec = r.zero()
	a.spec.read(ctx, readEnv{db: db, account: account, allowPrivate: allowPrivate}, o)
	return a
}

// template reads a template field: a string of substitutable {{names}}.
func template(o *validate.Object, name string, required bool) string {
	if required {
		o.Require(name)
	}
	t, ok := o.String(name, maxTemplate)
	if !ok {
		return ""
	}
	if required && strings.TrimSpace(t) == "" {
		o.Fail(name, validate.MsgBlank)
	}
	if bad := unknownNames(t); len(bad) > 0 {
		o.Fail(name, fmt.Sprintf("Unknown template names %s; use {{value}}, {{timestamp}}, {{device.label}}, "+
			"{{variable.label}}, {{event.label}} or {{state}}.", strings.Join(bad, ", ")))
	}
	return t
}

// variableRef is a variable found by reference.
type variableRef struct {
	key              int64
	id               string
	device, variable string
}

// resolveVariable finds the account's variable by id or "<device label>.<variable
// label>" (labels may hold dots: every split is tried; more than one match is none).
func resolveVariable(ctx context.Context, db bun.IDB, account int64, ref string) (variableRef, bool, error) {
	var found []variableRef
	q := db.NewSelect().TableExpr("variables AS v").Join("JOIN devices AS d ON d.id = v.device_id").
		ColumnExpr("v.id, v.public_id, d.label, v.label").Where("v.account_id = ?", account)
	if validate.IsID(ref) {
		q = q.Where("v.public_id = ?", ref)
	} else {
		q = q.Where("d.label || '.' || v.label = ?", strings.ToLower(ref))
	}
	rows, err := q.Limit(2).Rows(ctx)
	if err != nil {
		return variableRef{}, false, fmt.Errorf("resolve variable: %w", err)
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var v variableRef
		if err := rows.Scan(&v.key, &v.id, &v.device, &v.variable); err != nil {
			return variableRef{}, false, fmt.Errorf("resolve variable: %w", err)
		}
		found = append(found, v)
	}
	if err := rows.Err(); err != nil {
		return variableRef{}, false, fmt.Errorf("resolve variable: %w", err)
	}
	if len(found) != 1 {
		return variableRef{}, false, nil
	}
	return found[0], true, nil
}
