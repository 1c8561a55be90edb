package ingest

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Change is what one committed write did to one variable's values: it wrote (or, when
// Deleted, removed) values with timestamps in [From, To] (Unix ms).
type Change struct {
	Variable int64
	From, To int64
	Deleted  bool
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

// changesOf summarises rows sorted by (variable, ts) as one Change per variable.
func changesOf(rows []row) []Change {
	var out []Change
	for i, r := range rows {
		if i == 0 || rows[i-1].variable != r.variable {
			out = append(out, Change{Variable: r.variable, From: r.ts, To: r.ts})
			continue
		}
		out[len(out)-1].To = r.ts
	}
	return out
}

// mark tells the store's followers about changes inside the writing transaction.
func (s *Store) mark(ctx context.Context, tx pgx.Tx, changes []Change) error {
	for _, f := range s.Followers {
		if err := f.Mark(ctx, tx, changes); err != nil {
			return fmt.Errorf("follow written values: %w", err)
		}
	}
	return nil
}

// committed tells the store's followers about changes that committed.
func (s *Store) committed(changes []Change) {
	for _, f := range s.Followers {
		f.Committed(changes)
	}
}
