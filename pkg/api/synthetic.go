package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/model"
	"github.com/sensordata/sensorapi/pkg/synthetic"
	"github.com/sensordata/sensorapi/querybuilder"
)

// syntheticField takes syntheticExpression out of a Variable body (nil: not sent), and
// a "type" that only restates what the expression makes it (API.md §5, §17).
func syntheticField(raw map[string]json.RawMessage) (*string, error) {
	r, ok := raw[synthetic.Field]
	if !ok {
		return nil, nil
	}
	delete(raw, synthetic.Field)
	var expr string
	if err := json.Unmarshal(r, &expr); err != nil {
		return nil, fault.Invalid(synthetic.Field, "Not a valid string.")
	}
	if t, ok := raw["type"]; ok {
		var typ string
		_ = json.Unmarshal(t, &typ)
		want := "raw"
		if expr != "" {
			want = "synthetic"
		}
		if typ != want {
			return nil, fault.Invalid("type", "The type follows syntheticExpression: \""+want+"\" here.")
		}
		delete(raw, "type")
	}
	return &expr, nil
}

// redefine applies a sent syntheticExpression to a Variable being updated: a synthetic
// one gets the new expression and its history recomputed; a raw one becomes synthetic
// only while it holds no values (they would be lost); "" on a synthetic one is refused.
func (s *Server) redefine(ctx context.Context, tx bun.Tx, v *model.Variable, expr *string) error {
	switch {
	case expr == nil, *expr == "" && v.Type != "synthetic":
		return nil
	case *expr == "":
		return fault.Invalid(synthetic.Field, "A synthetic variable cannot become raw: its values come from its expression. Create a raw variable instead.")
	case v.Type != "synthetic":
		var has bool
		if err := tx.NewRaw(`SELECT EXISTS (SELECT 1 FROM "values" WHERE variable_id = ?)`, v.ID).Scan(ctx, &has); err != nil {
			return err
		}
		if has {
			return fault.Invalid(synthetic.Field, "This raw variable holds values: a variable with values cannot become synthetic. Create a new variable with the expression.")
		}
	case *expr == v.SyntheticExpression:
		return nil // the same text: nothing to recompute
	}
	return synthetic.Define(ctx, synthetic.SQLTx(tx.Tx), v.AccountID, v.ID, *expr)
}

// explainSynthetic answers GET …/variables/<id>/?explain=sql: the statement that
// computes a synthetic Variable's whole history (API.md §17).
func (s *Server) explainSynthetic(c *gin.Context, v *model.Variable) error {
	if mode := c.Query("explain"); mode != "sql" {
		return fault.Invalid("explain", "\""+mode+"\" is not a valid choice here: use sql.")
	}
	var q querybuilder.Query
	err := s.DB.RunInTx(c, nil, func(ctx context.Context, tx bun.Tx) error {
		var err error
		q, err = synthetic.Statement(ctx, synthetic.SQLTx(tx.Tx), v.ID)
		return err
	})
	if errors.Is(err, synthetic.ErrNotSynthetic) {
		return fault.Invalid("explain", "This variable is raw: only a synthetic variable has a statement that computes it.")
	}
	if err != nil {
		return err
	}
	psql, err := q.Inline()
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"sql": q.SQL, "args": q.Args, "psql": psql + ";", "notes": q.Notes})
	return nil
}
