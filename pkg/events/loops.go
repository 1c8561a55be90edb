package events

import (
	"context"
	"fmt"
	"strings"

	"github.com/uptrace/bun"

	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/validate"
)

// writes lists the variables an action list writes to (set_variable and mqtt
// actions both write values through the pipeline), with each action's field path.
func writes(name string, as []Action) (targets []string, paths []string) {
	for i, a := range as {
		switch a.Type {
		case SetVariable:
			targets, paths = append(targets, a.Variable), append(paths, fmt.Sprintf("%s.%d.variable", name, i))
		case MQTT:
			if d, v, ok := topicTarget(a.Topic); ok {
				targets, paths = append(targets, d+"."+v), append(paths, fmt.Sprintf("%s.%d.topic", name, i))
			}
		}
	}
	return targets, paths
}

// checkLoops refuses an event whose actions could trigger it again: an action that
// writes to its own condition variable, or to the condition variable of another
// event whose actions lead back to it, through any chain of events of the account.
// Variables are compared by "<device label>.<variable label>" (ids are resolved); a
// write to an input of a synthetic variable counts as a write to it.
func checkLoops(ctx context.Context, db bun.IDB, e *Event) error {
	var others []struct {
		ID           int64    `bun:"id"`
		Label        string   `bun:"label"`
		Cond         string   `bun:"cond"`
		Actions      []Action `bun:"actions,type:jsonb"`
		BackToNormal []Action `bun:"back_to_normal,type:jsonb"`
	}
	err := db.NewSelect().TableExpr("events AS e").Join("JOIN variables AS v ON v.id = e.variable_id").
		Join("JOIN devices AS d ON d.id = v.device_id").
		ColumnExpr("e.id, e.label, d.label || '.' || v.label AS cond, e.actions, e.back_to_normal").
		Where("e.account_id = ?", e.AccountID).Where("e.id != ?", e.ID).Scan(ctx, &others)
	if err != nil {
		return fmt.Errorf("check event loops: %w", err)
	}
	// edges: condition variable → (variables written, by which event)
	type edge struct{ to, via string }
	edges := map[string][]edge{}
	var ids []string
	add := func(cond, via string, as []Action) {
		ts, _ := writes("", as)
		for _, t := range ts {
			edges[cond] = append(edges[cond], edge{t, via})
			if validate.IsID(t) {
				ids = append(ids, t)
			}
		}
	}
	for _, o := range others {
		add(o.Cond, o.Label, o.Actions)
		add(o.Cond, o.Label, o.BackToNormal)
	}
	// a write to an input of a synthetic variable writes that variable too
	var derived []struct {
		Input     string `bun:"input"`
		Synthetic string `bun:"synthetic"`
	}
	err = db.NewRaw(`SELECT di.label || '.' || vi.label AS input, ds.label || '.' || vs.label AS synthetic
		FROM synthetic_variables s CROSS JOIN unnest(s.inputs) AS i(id)
		JOIN variables vi ON vi.id = i.id JOIN devices di ON di.id = vi.device_id
		JOIN variables vs ON vs.id = s.variable_id JOIN devices ds ON ds.id = vs.device_id
		WHERE vs.account_id = ?`, e.AccountID).Scan(ctx, &derived)
	if err != nil {
		return fmt.Errorf("check event loops: %w", err)
	}
	for _, d := range derived {
		edges[d.Input] = append(edges[d.Input], edge{d.Synthetic, "synthetic variable " + d.Synthetic})
	}
	own, ownPaths := writes("actions", e.Actions)
	b, bp := writes("backToNormal", e.BackToNormal)
	own, ownPaths = append(own, b...), append(ownPaths, bp...)
	for _, t := range own {
		if validate.IsID(t) {
			ids = append(ids, t)
		}
	}
	names, err := labelsOf(ctx, db, e.AccountID, ids)
	if err != nil {
		return err
	}
	name := func(t string) string {
		if n, ok := names[t]; ok {
			return n
		}
		return t
	}
	cond := e.DeviceLabel + "." + e.VariableLabel
	errs := fault.Fields{}
	for i, t := range own {
		// breadth-first from the written variable, through other events' writes
		seen := map[string]bool{}
		type step struct{ at, chain string }
		queue := []step{{name(t), ""}}
		for len(queue) > 0 {
			s := queue[0]
			queue = queue[1:]
			if s.at == cond {
				msg := fmt.Sprintf("This action writes to %s, this event's own condition variable: a loop.", name(t))
				if s.chain != "" {
					msg = fmt.Sprintf("This action writes to %s, which triggers %s back to this event's "+
						"condition variable %s: a loop.", name(t), strings.TrimPrefix(s.chain, ", "), cond)
				}
				errs.Add(ownPaths[i], msg)
				break
			}
			if seen[s.at] {
				continue
			}
			seen[s.at] = true
			for _, ed := range edges[s.at] {
				via := ed.via
				if !strings.HasPrefix(via, "synthetic variable ") {
					via = "event " + via
				}
				queue = append(queue, step{name(ed.to), s.chain + ", " + via})
			}
		}
	}
	return errs.Err()
}

// labelsOf maps variable public ids of the account to "<device label>.<variable label>".
func labelsOf(ctx context.Context, db bun.IDB, account int64, ids []string) (map[string]string, error) {
	out := map[string]string{}
	if len(ids) == 0 {
		return out, nil
	}
	var rows []struct {
		ID   string `bun:"public_id"`
		Name string `bun:"name"`
	}
	err := db.NewSelect().TableExpr("variables AS v").Join("JOIN devices AS d ON d.id = v.device_id").
		ColumnExpr("v.public_id, d.label || '.' || v.label AS name").
		Where("v.account_id = ?", account).Where("v.public_id IN (?)", bun.List(ids)).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("check event loops: %w", err)
	}
	for _, r := range rows {
		out[r.ID] = r.Name
	}
	return out, nil
}
