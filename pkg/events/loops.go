package events

import (
	"context"
	"fmt"
	"strings"

	"github.com/uptrace/bun"

	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/validate"
)

// writes lists the variables an action list writes to (actionType.writes: those of
// set_variable and mqtt actions, written through the pipeline), with each action's
// field path.
func writes(name string, as []Action) (targets []string, paths []string) {
	for i, a := range as {
		if v, field := a.writes(); v != "" {
			targets, paths = append(targets, v), append(paths, fmt.Sprintf("%s.%d.%s", name, i, field))
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
	// 1. the account's graph of writes: other events' and synthetic variables' (readLoopGraph)
	g, err := readLoopGraph(ctx, db, e)
	if err != nil {
		return err
	}
	// 2. this event's own writes, and the labels of every id written (writes, labelsOf)
	own, ownPaths := writes("actions", e.Actions)
	b, bp := writes("backToNormal", e.BackToNormal)
	own, ownPaths = append(own, b...), append(ownPaths, bp...)
	names, err := labelsOf(ctx, db, e.AccountID, append(g.ids, idsAmong(own)...))
	if err != nil {
		return err
	}
	// 3. from each own write, a way back to the condition variable is a loop (loopFrom)
	cond := e.DeviceLabel + "." + e.VariableLabel
	errs := fault.Fields{}
	for i, t := range own {
		if msg := g.loopFrom(names.of(t), cond, names); msg != "" {
			errs.Add(ownPaths[i], msg)
		}
	}
	return errs.Err()
}

// loopEdge is a write: to a variable, via an event or a synthetic variable (named).
type loopEdge struct{ to, via string }

// loopGraph maps each variable ("<device label>.<variable label>") to the variables
// written when it changes.
type loopGraph struct {
	edges map[string][]loopEdge
	ids   []string // variables written that are named by public id
}

// readLoopGraph reads the writes of the account's other events (each from its condition
// variable) and of its synthetic variables (each from its inputs).
func readLoopGraph(ctx context.Context, db bun.IDB, e *Event) (loopGraph, error) {
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
		return loopGraph{}, fmt.Errorf("check event loops: %w", err)
	}
	g := loopGraph{edges: map[string][]loopEdge{}}
	for _, o := range others {
		for _, as := range [][]Action{o.Actions, o.BackToNormal} {
			ts, _ := writes("", as)
			for _, t := range ts {
				g.edges[o.Cond] = append(g.edges[o.Cond], loopEdge{t, "event " + o.Label})
			}
			g.ids = append(g.ids, idsAmong(ts)...)
		}
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
		return loopGraph{}, fmt.Errorf("check event loops: %w", err)
	}
	for _, d := range derived {
		g.edges[d.Input] = append(g.edges[d.Input], loopEdge{d.Synthetic, "synthetic variable " + d.Synthetic})
	}
	return g, nil
}

// loopFrom searches breadth-first from a written variable, through the graph's writes,
// for the condition variable cond; found, it is the loop's message ("" if none).
func (g loopGraph) loopFrom(written, cond string, names labels) string {
	type step struct{ at, chain string }
	seen := map[string]bool{}
	queue := []step{{written, ""}}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		if s.at == cond {
			if s.chain == "" {
				return fmt.Sprintf("This action writes to %s, this event's own condition variable: a loop.", written)
			}
			return fmt.Sprintf("This action writes to %s, which triggers %s back to this event's "+
				"condition variable %s: a loop.", written, strings.TrimPrefix(s.chain, ", "), cond)
		}
		if seen[s.at] {
			continue
		}
		seen[s.at] = true
		for _, ed := range g.edges[s.at] {
			queue = append(queue, step{names.of(ed.to), s.chain + ", " + ed.via})
		}
	}
	return ""
}

// idsAmong are the public ids among variable references.
func idsAmong(refs []string) []string {
	var ids []string
	for _, t := range refs {
		if validate.IsID(t) {
			ids = append(ids, t)
		}
	}
	return ids
}

// labels maps variable public ids to "<device label>.<variable label>".
type labels map[string]string

// of is a reference by labels: an id's labels, or the reference as it is.
func (l labels) of(ref string) string {
	if n, ok := l[ref]; ok {
		return n
	}
	return ref
}

// labelsOf maps variable public ids of the account to "<device label>.<variable label>".
func labelsOf(ctx context.Context, db bun.IDB, account int64, ids []string) (labels, error) {
	out := labels{}
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
