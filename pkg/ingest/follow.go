package ingest

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sensordata/sensorapi/pkg/values"
)

// Change is what one committed write did to one variable's values: it wrote (or, when
// Deleted, removed) values with timestamps in [From, To] (Unix ms).
//
// For a variable a follower watches (Watcher), a write through the pipeline also
// carries its rows and the chain it belongs to: Values are the rows written, oldest
// first, and Prev the variable's newest timestamp before this write (HasPrev false: it
// held no value), read under the lock of the variable's row that every write of its
// values takes until it commits. So the writes of one variable, on any instance, form
// a chain in commit order: each one's Prev is the newest timestamp of all the values
// committed before it (those of a delete aside: a Deleted change breaks the chain).
type Change struct {
	Variable int64
	From, To int64
	Deleted  bool
	Prev     int64
	HasPrev  bool
	Values   []Point // nil unless watched
}

// Point is one written value: its timestamp (Unix ms) and number.
type Point struct {
	TS    int64
	Value float64
}

// Watcher is a Follower that needs the rows and the chain (Change.Values, Prev) of the
// writes of some variables. Watches must be cheap (an in-memory set): it runs for
// every variable of every batch.
type Watcher interface {
	Watches(variable int64) bool
}

// Follower reacts to values as they are written: derived series (pkg/synthetic) and
// event conditions (pkg/events). Every write of values, through the pipeline or a
// range delete, tells each follower of the store twice:
//
//   - Mark runs inside the writing transaction, after its rows are written: what must
//     commit with the values (a durable to-do, so that a crash after the commit loses
//     no reaction) goes here. It must be cheap for variables it does not follow (an
//     in-memory set), since it sits on every batch's path; an error fails the write.
//   - Committed runs after the commit: it must not block (it wakes a worker).
type Follower interface {
	Mark(ctx context.Context, tx pgx.Tx, changes []Change) error
	Committed(changes []Change)
}

// changesOf summarises rows sorted by (variable, ts) as one Change per variable; the
// variables in prev (watched ones, with their newest timestamp before the write, or
// nil) carry their rows and Prev.
func changesOf(rows []values.Row, prev map[int64]*int64) []Change {
	var out []Change
	var points []Point // the watched variables' rows, each one's a slice of it
	if len(prev) > 0 {
		points = make([]Point, 0, len(rows))
	}
	first := 0 // the first row of the current variable
	for i, r := range rows {
		if i == 0 || rows[i-1].Variable != r.Variable {
			out = append(out, Change{Variable: r.Variable, From: r.TS, To: r.TS})
			first = len(points)
		} else {
			out[len(out)-1].To = r.TS
		}
		p, ok := prev[r.Variable]
		if !ok {
			continue
		}
		points = append(points, Point{TS: r.TS, Value: r.Value}) // within its capacity: never moved
		c := &out[len(out)-1]
		c.Values = points[first:len(points):len(points)]
		if p != nil {
			c.Prev, c.HasPrev = *p, true
		}
	}
	return out
}

// mark tells the pipeline's followers about changes inside the writing transaction.
func (p *Pipeline) mark(ctx context.Context, tx pgx.Tx, changes []Change) error {
	for _, f := range p.followers {
		if err := f.Mark(ctx, tx, changes); err != nil {
			return fmt.Errorf("follow written values: %w", err)
		}
	}
	return nil
}

// committed tells the pipeline's followers about changes that committed.
func (p *Pipeline) committed(changes []Change) {
	for _, f := range p.followers {
		f.Committed(changes)
	}
}
