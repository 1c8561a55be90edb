package ingest

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sensordata/sensorapi/pkg/values"
)

// Bulk writes a load too large for a message, a history import (pkg/importer), as
// the pipeline writes a batch of one: the storage budget admits it, load writes its
// rows in the transaction (values.Staging.Write), the followers Mark its changes in
// it, and once it committed they are told (Committed) and the last values notified.
// Its changes carry no rows (Change.Values): the watchers read them from the database,
// as they do for every write they were not handed (events: from their last evaluated
// value on). The transaction has no statement timeout: the body limit bounds it, and
// a client that goes away cancels it.
func (p *Pipeline) Bulk(ctx context.Context, load func(ctx context.Context, tx pgx.Tx, store *values.Store) (values.StagedWritten, error)) error {
	if p.conf.Admit != nil {
		if err := p.conf.Admit(); err != nil {
			return err
		}
	}
	var w values.StagedWritten
	var changes []Change
	err := pgx.BeginFunc(ctx, p.store.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL statement_timeout = 0`); err != nil {
			return fmt.Errorf("import: %w", err)
		}
		var err error
		if w, err = load(ctx, tx, p.store); err != nil {
			return err
		}
		changes = make([]Change, len(w.Spans))
		for i, s := range w.Spans {
			changes[i] = Change{Variable: s.Variable, From: s.From, To: s.To}
		}
		return p.mark(ctx, tx, changes)
	})
	if err != nil {
		return p.refused(err)
	}
	p.committed(changes)
	p.handOff(ctx, w.Moved)
	if p.conf.Written != nil {
		p.conf.Written(int(w.Rows))
	}
	return nil
}

// RawHorizon is the raw horizon in ms (ok false: none): a bulk load refuses each row
// before it, as a message is refused (checkHorizon).
func (p *Pipeline) RawHorizon(ctx context.Context) (int64, bool) {
	if p.conf.Horizon == nil {
		return 0, false
	}
	h, ok := p.conf.Horizon(ctx)
	return h.UnixMilli(), ok
}

// MsgHorizon is the message of a dot older than the raw horizon h (ms).
func MsgHorizon(h int64) string {
	return fmt.Sprintf("Values older than the raw horizon (%d) are no longer kept raw (retention); write timestamps from %d on.", h, h)
}

// DeviceTargets finds the device with that label and its variables with those labels
// in tx, creating those missing (name = label) as posting does; a disabled device is
// fault.DeviceDisabled. It returns the targets and each label's key.
func DeviceTargets(ctx context.Context, tx pgx.Tx, account int64, device string, labels []string) (values.Targets, map[string]int64, error) {
	dev, err := upsertDevice(ctx, tx, account, device)
	if err != nil {
		return values.Targets{}, nil, err
	}
	ids, err := upsertVariables(ctx, tx, account, dev, labels)
	if err != nil {
		return values.Targets{}, nil, err
	}
	return newTargets(values.Ref{ID: dev, Label: device}, ids), ids, nil
}

// VariableTarget resolves a variable by public id within the account in tx (404 when
// it holds none; 423 when its device is disabled).
func VariableTarget(ctx context.Context, tx pgx.Tx, account int64, id string) (values.Targets, int64, error) {
	dots := []Dot{{Target: id}}
	rows, t, err := resolveIDs(ctx, tx, account, dots, variableNotFound)
	if err != nil {
		return values.Targets{}, 0, err
	}
	return t, rows[0].Variable, nil
}
