package events

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/uptrace/bun"

	"github.com/sensordata/sensorapi/pkg/ingest"
	"github.com/sensordata/sensorapi/pkg/validate"
)

// SetVariable is the action type of a value written to a variable of the account
// (created when missing) through the pipeline.
const SetVariable = "set_variable"

func init() { registerAction(SetVariable, 3, func() actionType { return &setVariableAction{} }) }

// setVariableAction is a set_variable action's fields.
type setVariableAction struct {
	// Variable is a variable reference: an id, or "<device label>.<variable label>".
	Variable string `json:"variable,omitempty"`
	Value    string `json:"value,omitempty"`
}

func (a *setVariableAction) read(ctx context.Context, env readEnv, o *validate.Object) {
	o.Require("variable", "value")
	if ref, ok := o.String("variable", 300); ok {
		t, msg, err := resolveTarget(ctx, env.db, env.account, ref)
		switch {
		case err != nil:
			o.Fail("variable", "The variable could not be looked up; retry.")
		case msg != "":
			o.Fail("variable", msg)
		}
		a.Variable = t.String()
	}
	a.Value = template(o, "value", true)
	if a.Value != "" && len(templateRe.FindAllString(a.Value, -1)) == 0 {
		if f, err := strconv.ParseFloat(strings.TrimSpace(a.Value), 64); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			o.Fail("value", "Enter a number or a template that renders one, such as {{value}}.")
		}
	}
}

func (a *setVariableAction) fields() map[string]any {
	return map[string]any{"variable": a.Variable, "value": a.Value}
}

func (a *setVariableAction) render(v Vars) actionType {
	r := *a
	r.Value = Render(a.Value, v)
	return &r
}

// run writes the rendered value to the variable through the pipeline.
func (a *setVariableAction) run(ctx context.Context, s *Service, at attempt) (int, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(a.Value), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("%w: the value %q is not a finite number", errPermanent, a.Value)
	}
	t, ok := parseTarget(a.Variable)
	if !ok {
		return 0, fmt.Errorf("%w: bad variable reference %q", errPermanent, a.Variable)
	}
	return 0, s.write(ctx, at.account, t, []ingest.Dot{{Target: t.variable, Value: f, TS: at.ts}})
}

func (a *setVariableAction) writes() (string, string) { return a.Variable, "variable" }

// resolveTarget reads a set_variable target: an existing variable by id or labels, or
// labels of a variable the write will create (split at the last dot). msg is a
// validation message.
func resolveTarget(ctx context.Context, db bun.IDB, account int64, ref string) (target, string, error) {
	v, found, err := resolveVariable(ctx, db, account, ref)
	switch {
	case err != nil:
		return target{}, "", err
	case found && validate.IsID(ref):
		return target{id: v.id}, "", nil
	case found:
		return target{device: v.device, variable: v.variable}, "", nil
	case validate.IsID(ref):
		return target{}, fmt.Sprintf("Variable '%s' was not found.", ref), nil
	}
	i := strings.LastIndex(ref, ".")
	if i < 0 {
		return target{}, `Enter a variable id or "<device label>.<variable label>".`, nil
	}
	d, okd := validate.Label(ref[:i])
	vl, okv := validate.Label(ref[i+1:])
	if !okd || !okv {
		return target{}, `Enter a variable id or "<device label>.<variable label>".`, nil
	}
	return target{device: d, variable: vl}, "", nil
}

// parseTarget reads a stored target: an id, or "<device>.<variable>" split at the last dot.
func parseTarget(ref string) (target, bool) {
	if len(ref) == 24 && !strings.Contains(ref, ".") {
		return target{id: ref}, true
	}
	i := strings.LastIndex(ref, ".")
	if i <= 0 || i == len(ref)-1 {
		return target{}, false
	}
	return target{device: ref[:i], variable: ref[i+1:]}, true
}
