package synthetic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/querybuilder"
)

// MaxDepth is the longest chain of synthetic variables (API.md §17): one reading
// another that reads another... at most 5 deep.
const MaxDepth = 5

// Field is the body field of the expression.
const Field = "syntheticExpression"

// settle is how long after a definition the whole history is computed once more: an
// instance that had not yet heard of the new inputs (the graph reaches the others by
// notification, within milliseconds) may have written to them without marking the
// variable meanwhile (docs/synthetic.md).
const settle = 3 * time.Second

var publicID = regexp.MustCompile(`^[0-9a-f]{24}$`)

// AccountResolver resolves references within an account in tx: a 24-hex id, or
// "<device label>.<variable label>" (labels may hold dots: every split is tried, and
// one must match).
func AccountResolver(ctx context.Context, tx Tx, account int64) Resolver {
	return func(ref string) (querybuilder.Ref, bool, error) {
		var keys []int64
		each := func(scan func(...any) error) error {
			var k int64
			if err := scan(&k); err != nil {
				return err
			}
			keys = append(keys, k)
			return nil
		}
		if publicID.MatchString(ref) {
			if err := tx.Query(ctx, each, `SELECT id FROM variables WHERE account_id = $1 AND public_id = $2`, account, ref); err != nil {
				return querybuilder.Ref{}, false, fmt.Errorf("resolve reference: %w", err)
			}
		}
		ref = strings.ToLower(ref)
		for i := strings.IndexByte(ref, '.'); len(keys) == 0 && i >= 0; {
			if err := tx.Query(ctx, each, `SELECT v.id FROM variables v JOIN devices d ON d.id = v.device_id
				WHERE d.account_id = $1 AND d.label = $2 AND v.label = $3`, account, ref[:i], ref[i+1:]); err != nil {
				return querybuilder.Ref{}, false, fmt.Errorf("resolve reference: %w", err)
			}
			j := strings.IndexByte(ref[i+1:], '.')
			if j < 0 {
				break
			}
			i += j + 1
		}
		if len(keys) != 1 {
			return querybuilder.Ref{}, false, nil
		}
		return querybuilder.Ref{Key: keys[0]}, true, nil
	}
}

// Invalid is the invalid fault of a bad expression.
func Invalid(err error) error {
	var e *Error
	if errors.As(err, &e) {
		return fault.Invalid(Field, e.Error())
	}
	return err
}

// Define makes the variable key (of account) synthetic with the expression text, or
// changes its expression, in tx: it parses and resolves the text, checks the graph,
// stores the definition and computes the whole history. The caller holds the
// variable's row lock. Errors of the expression are invalid faults on syntheticExpression.
func Define(ctx context.Context, tx Tx, account, key int64, text string) error {
	expr, err := Parse(text, AccountResolver(ctx, tx, account))
	if err != nil {
		return Invalid(err)
	}
	inputs := make([]int64, 0, 4)
	for _, r := range expr.Refs() {
		inputs = append(inputs, r.Key)
	}
	// one definition at a time per account: two concurrent ones could close a cycle
	// that neither sees
	if err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('sensorapi_synthetic'), $1::int)`, account); err != nil {
		return fmt.Errorf("synthetic: lock the graph: %w", err)
	}
	if err := checkGraph(ctx, tx, account, key, inputs); err != nil {
		return err
	}
	raw, err := json.Marshal(expr)
	if err != nil {
		return err
	}
	positional := expr.HasPositional()
	err = tx.Exec(ctx, `INSERT INTO synthetic_variables (variable_id, account_id, expression, inputs, positional)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (variable_id) DO UPDATE SET expression = EXCLUDED.expression, inputs = EXCLUDED.inputs,
			positional = EXCLUDED.positional, firsts = '{}'`, key, account, string(raw), inputs, positional)
	if err != nil {
		return fmt.Errorf("synthetic: store definition: %w", err)
	}
	if err := tx.Exec(ctx, `UPDATE variables SET type = 'synthetic', synthetic_expression = $2 WHERE id = $1`, key, text); err != nil {
		return fmt.Errorf("synthetic: store expression: %w", err)
	}
	d := &Definition{Key: key, Account: account, Expr: expr, Inputs: inputs, Positional: positional, Firsts: []int64{}}
	if _, err := Recompute(ctx, tx, d, [][2]int64{{0, MaxTimestamp}}); err != nil {
		return err
	}
	return addDirty(ctx, tx, []int64{key}, []int64{0}, []int64{MaxTimestamp}, settle)
}

// checkGraph refuses a definition of key reading inputs that closes a cycle or makes a
// chain deeper than MaxDepth, naming the variables.
func checkGraph(ctx context.Context, tx Tx, account, key int64, inputs []int64) error {
	// 1. the account's graph, with key reading inputs (readGraph)
	g, err := readGraph(ctx, tx, account, key)
	if err != nil {
		return err
	}
	g.inputs[key] = inputs
	if slices.Contains(inputs, key) {
		return fault.Invalid(Field, fmt.Sprintf("The expression reads its own variable {{%s}}: a cycle.", g.names[key]))
	}
	// 2. every variable's depth, key's first: a cycle is named from the variable being
	// defined (visit)
	order := []int64{key}
	for v := range g.inputs {
		order = append(order, v)
	}
	for _, v := range order {
		d, cycle := g.visit(v)
		if cycle != nil {
			parts := make([]string, len(cycle))
			for i, c := range cycle {
				parts[i] = "{{" + g.names[c] + "}}"
			}
			return fault.Invalid(Field, "The expression closes a cycle: "+strings.Join(parts, " reads ")+".")
		}
		if d > MaxDepth {
			return fault.Invalid(Field, fmt.Sprintf(
				"Synthetic variables may be chained at most %d deep; with this expression {{%s}} would be %d deep.", MaxDepth, g.names[v], d))
		}
	}
	return nil
}

// graph is an account's synthetic variables: each one's inputs and name
// ("<device label>.<variable label>"), and the depths visit found.
type graph struct {
	inputs map[int64][]int64
	names  map[int64]string
	depth  map[int64]int
	path   []int64 // the variables being visited
}

// readGraph reads the account's synthetic variables, and the name of key (synthetic or
// not yet).
func readGraph(ctx context.Context, tx Tx, account, key int64) (*graph, error) {
	g := &graph{inputs: map[int64][]int64{}, names: map[int64]string{}, depth: map[int64]int{}}
	err := tx.Query(ctx, func(scan func(...any) error) error {
		var id int64
		var in []int64
		var name, inputs string
		if err := scan(&id, &inputs, &name); err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(inputs), &in); err != nil {
			return err
		}
		g.inputs[id], g.names[id] = in, name
		return nil
	}, `SELECT s.variable_id, array_to_json(s.inputs)::text, d.label || '.' || v.label FROM synthetic_variables s
		JOIN variables v ON v.id = s.variable_id JOIN devices d ON d.id = v.device_id
		WHERE s.account_id = $1`, account)
	if err != nil {
		return nil, fmt.Errorf("synthetic: read the graph: %w", err)
	}
	if _, ok := g.names[key]; !ok {
		err := tx.Query(ctx, func(scan func(...any) error) error { var n string; err := scan(&n); g.names[key] = n; return err },
			`SELECT d.label || '.' || v.label FROM variables v JOIN devices d ON d.id = v.device_id WHERE v.id = $1`, key)
		if err != nil {
			return nil, err
		}
	}
	return g, nil
}

// visit is v's depth: 1 + the deepest synthetic input's (0 for a raw variable); a path
// back to a variable being visited is a cycle, returned from it to itself.
func (g *graph) visit(v int64) (int, []int64) {
	if d, ok := g.depth[v]; ok {
		return d, nil
	}
	if i := slices.Index(g.path, v); i >= 0 {
		return 0, append(slices.Clone(g.path[i:]), v)
	}
	in, synthetic := g.inputs[v]
	if !synthetic {
		return 0, nil
	}
	g.path = append(g.path, v)
	d := 1
	for _, u := range in {
		du, cycle := g.visit(u)
		if cycle != nil {
			return 0, cycle
		}
		d = max(d, du+1)
	}
	g.path = g.path[:len(g.path)-1]
	g.depth[v] = d
	return d, nil
}
