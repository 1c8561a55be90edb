package events

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/uptrace/bun"

	"github.com/sensordata/sensorapi/pkg/validate"
)

// Action types are a registry: each is one file, action_<type>.go, whose actionType
// holds the type's fields and does what differs by type (read and validate a body,
// answer it, render its templates, run a delivery, name the variable it writes), and
// whose init registers it under its name. Adding a type is that file and its entry in
// docs/openapi.yaml (EventAction); nothing here switches on the type.

// actionType is an action type's fields (as stored, or rendered) and their behaviour.
// Its fields carry JSON tags: they are stored flat beside "type" (Action.MarshalJSON).
type actionType interface {
	// read reads and validates the type's fields of an action body (its "type" read
	// already), each fault on its field of o.
	read(ctx context.Context, env readEnv, o *validate.Object)
	// fields are the response fields besides "type": every field of the type.
	fields() map[string]any
	// render is a copy with the templates substituted: what a delivery sends.
	render(v Vars) actionType
	// run performs the rendered action once (a delivery's attempt); code is the HTTP
	// status of a webhook, 0 if none. A failure no retry can fix wraps errPermanent.
	run(ctx context.Context, s *Service, at attempt) (code int, err error)
	// writes names the variable the action writes values to through the pipeline ("" if
	// none) and the field that names it: the loop check (loops.go).
	writes() (variable, field string)
}

// readEnv is what reading an action body may use.
type readEnv struct {
	db           bun.IDB
	account      int64
	allowPrivate bool // webhooks may target private addresses
}

// attempt is one try of a delivery: what running its action may use.
type attempt struct {
	delivery string // the delivery's public id (X-Event-Delivery)
	number   int    // from 1 (X-Event-Attempt)
	secret   string // the event's signing secret
	account  int64
	ts       int64 // Action.TS
}

// registration is an action type in the registry.
type registration struct {
	listed int               // its place in the "type" message's list, from 1 (API text: a new type goes last)
	zero   func() actionType // a zero value to read or decode into
}

// actionTypes is the registry: type name → its registration (each file's init).
var actionTypes = map[string]registration{}

// registerAction adds an action type to the registry.
func registerAction(name string, listed int, zero func() actionType) {
	if _, dup := actionTypes[name]; dup {
		panic("events: action type registered twice: " + name)
	}
	actionTypes[name] = registration{listed: listed, zero: zero}
}

// actionTypeNames are the registered types' names in their listed order.
func actionTypeNames() []string {
	names := make([]string, 0, len(actionTypes))
	for n := range actionTypes {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int { return actionTypes[a].listed - actionTypes[b].listed })
	return names
}

// typeMessage is the fault of an unknown type: `Choose one of "webhook", "mqtt", ...`.
func typeMessage() string {
	q := make([]string, 0, len(actionTypes))
	for _, n := range actionTypeNames() {
		q = append(q, strconv.Quote(n))
	}
	return "Choose one of " + strings.Join(q, ", ") + "."
}

// Action is one action of an event, as stored (templates unrendered) and as rendered
// into a delivery's request (templates substituted). Its JSON is flat: "type", the
// type's fields, and "ts" when rendered.
type Action struct {
	Type string
	// rendered only: the data time of the value that caused the transition, the
	// timestamp given to written dots that carry none (retries write the same dots)
	TS   int64
	spec actionType // the type's fields; nil for a type not registered
}

// MarshalJSON writes the action flat: {"type", the type's fields, "ts"}.
func (a Action) MarshalJSON() ([]byte, error) {
	m := map[string]json.RawMessage{}
	if a.spec != nil {
		b, err := json.Marshal(a.spec)
		if err != nil {
			return nil, fmt.Errorf("action %s: %w", a.Type, err)
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("action %s: %w", a.Type, err)
		}
	}
	m["type"], _ = json.Marshal(a.Type)
	if a.TS != 0 {
		m["ts"] = json.RawMessage(strconv.FormatInt(a.TS, 10))
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads a flat action into its type's fields (none for a type not
// registered: running it fails for good).
func (a *Action) UnmarshalJSON(b []byte) error {
	var head struct {
		Type string `json:"type"`
		TS   int64  `json:"ts"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return err
	}
	*a = Action{Type: head.Type, TS: head.TS}
	if r, ok := actionTypes[head.Type]; ok {
		spec := r.zero()
		if err := json.Unmarshal(b, spec); err != nil {
			return err
		}
		a.spec = spec
	}
	return nil
}

// JSON is the action's response shape: the fields of its type, all of them.
func (a Action) JSON() map[string]any {
	m := map[string]any{}
	if a.spec != nil {
		m = a.spec.fields()
	}
	m["type"] = a.Type
	return m
}

// render is the action with its templates substituted: what a delivery sends.
func (a Action) render(v Vars) Action {
	r := a
	r.TS = v.Timestamp
	if a.spec != nil {
		r.spec = a.spec.render(v)
	}
	return r
}

// writes names the variable the action writes to ("" if none) and its field.
func (a Action) writes() (variable, field string) {
	if a.spec == nil {
		return "", ""
	}
	return a.spec.writes()
}

// Vars are what templates substitute.
type Vars struct {
	Value     float64
	Timestamp int64
	Device    string // label
	Variable  string // label
	Event     string // label
	State     string // the state entered
}

var templateRe = regexp.MustCompile(`\{\{\s*([^{}]*?)\s*\}\}`)

// templateNames are the names a template may use.
var templateNames = map[string]func(Vars) string{
	"value":          func(v Vars) string { return formatValue(v.Value) },
	"timestamp":      func(v Vars) string { return strconv.FormatInt(v.Timestamp, 10) },
	"device.label":   func(v Vars) string { return v.Device },
	"variable.label": func(v Vars) string { return v.Variable },
	"event.label":    func(v Vars) string { return v.Event },
	"state":          func(v Vars) string { return v.State },
}

// Render substitutes {{name}} in a template.
func Render(t string, v Vars) string {
	return templateRe.ReplaceAllStringFunc(t, func(m string) string {
		f := templateNames[templateRe.FindStringSubmatch(m)[1]]
		if f == nil {
			return m
		}
		return f(v)
	})
}

// unknownNames lists the {{names}} of a template that are not substitutable.
func unknownNames(t string) []string {
	var out []string
	for _, m := range templateRe.FindAllStringSubmatch(t, -1) {
		if templateNames[m[1]] == nil {
			out = append(out, "{{"+m[1]+"}}")
		}
	}
	return out
}

// target names the variable a value-writing action (mqtt, set_variable) writes to:
// a public id, or device and variable labels.
type target struct {
	id               string
	device, variable string
}

func (t target) String() string {
	if t.id != "" {
		return t.id
	}
	return fmt.Sprintf("%s.%s", t.device, t.variable)
}
