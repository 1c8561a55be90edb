// Package importer is the history import (API.md §21): a CSV or NDJSON body, gzipped
// or not, read line by line into a binary COPY of the values store's staging table
// (values.Stage), then written with the meaning of any write through the ingestion
// pipeline's Bulk (one transaction: every row or none; followers told). Each line is
// validated as a posted dot is (pkg/ingest); a bad line fails the import naming it.
// Server memory stays flat whatever the body's size: no row is held after it was
// copied.
package importer

import (
	"context"
	"io"

	"github.com/jackc/pgx/v5"
	"github.com/klauspost/compress/gzip"

	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/ingest"
	"github.com/sensordata/sensorapi/pkg/values"
)

// Target is where an import writes: a variable by public id, a variable by device and
// variable labels (both created when missing, as posting does), or, with neither, a
// collection whose lines name their device and variable labels (created likewise).
type Target struct {
	VariableID       string
	Device, Variable string // labels, already validated
}

func (t Target) collection() bool { return t.VariableID == "" && t.Device == "" }

// Body is an import's request body.
type Body struct {
	Reader io.Reader
	Gzip   bool  // Content-Encoding: gzip
	NDJSON bool  // application/x-ndjson; else text/csv
	Limit  int64 // decompressed bytes at most (gzip); 0: none
}

// Result is what an import wrote: its rows and the variables they went to.
type Result struct {
	Rows      int64 `json:"rows"`
	Variables int   `json:"variables"`
}

// Importer runs imports through the pipeline.
type Importer struct {
	Pipeline *ingest.Pipeline
}

// Import reads the body and writes its rows to the target in the account, all or
// nothing. p validates the dots (its Now is the timestamp of lines without one).
func (im *Importer) Import(ctx context.Context, account int64, to Target, body Body, p *ingest.Parser) (Result, error) {
	r, err := decoded(body)
	if err != nil {
		return Result{}, err
	}
	src := &rowSource{parser: p, labels: to.collection(), slots: map[slotKey]int{}}
	src.horizon, src.hasHorizon = im.Pipeline.RawHorizon(ctx)
	if body.NDJSON {
		src.lines = newNDJSON(r)
	} else {
		c, err := newCSV(r, to.collection())
		if err != nil {
			return Result{}, err
		}
		src.lines, src.cols = c, c.cols
	}
	var res Result
	err = im.Pipeline.Bulk(ctx, func(ctx context.Context, tx pgx.Tx, store *values.Store) (values.StagedWritten, error) {
		keys, t, err := resolveTarget(ctx, tx, account, to)
		if err != nil {
			return values.StagedWritten{}, err
		}
		st, err := store.Stage(ctx, tx, src)
		if src.failed() {
			return values.StagedWritten{}, src.Err()
		}
		if err != nil {
			return values.StagedWritten{}, err
		}
		defer st.Close()
		if to.collection() {
			if keys, t, err = resolveSlots(ctx, tx, account, src.order); err != nil {
				return values.StagedWritten{}, err
			}
		}
		w, err := st.Write(ctx, tx, keys, t)
		res = Result{Rows: w.Rows, Variables: len(w.Spans)}
		return w, err
	})
	return res, err
}

// decoded is the body's text: gunzipped when it is gzip, its decompressed size held to
// the limit (a small body may inflate a thousandfold).
func decoded(b Body) (io.Reader, error) {
	if !b.Gzip {
		return b.Reader, nil
	}
	z, err := gzip.NewReader(b.Reader)
	if err != nil {
		return nil, fault.Invalid("body", "The body is not gzip data (Content-Encoding: gzip).")
	}
	if b.Limit <= 0 {
		return z, nil
	}
	return &limited{r: z, left: b.Limit}, nil
}

// limited fails with fault.TooLarge past its limit.
type limited struct {
	r    io.Reader
	left int64
}

func (l *limited) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, fault.TooLarge
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return n, fault.TooLarge
	}
	return n, err
}

// resolveTarget resolves a one-variable target in tx (creating a labelled one); a
// collection's targets are resolved after its rows were read (resolveSlots).
func resolveTarget(ctx context.Context, tx pgx.Tx, account int64, to Target) ([]int64, values.Targets, error) {
	switch {
	case to.VariableID != "":
		t, key, err := ingest.VariableTarget(ctx, tx, account, to.VariableID)
		return []int64{key}, t, err
	case to.Device != "":
		t, ids, err := ingest.DeviceTargets(ctx, tx, account, to.Device, []string{to.Variable})
		return []int64{ids[to.Variable]}, t, err
	}
	return nil, values.Targets{}, nil
}

// resolveSlots finds or creates the devices and variables of a collection's slots, in
// slot order.
func resolveSlots(ctx context.Context, tx pgx.Tx, account int64, order []slotKey) ([]int64, values.Targets, error) {
	byDevice := map[string][]string{}
	var devices []string
	for _, k := range order {
		if _, ok := byDevice[k.device]; !ok {
			devices = append(devices, k.device)
		}
		byDevice[k.device] = append(byDevice[k.device], k.variable)
	}
	t := values.Targets{Variables: map[int64]string{}}
	ids := map[slotKey]int64{}
	for _, d := range devices {
		dt, vars, err := ingest.DeviceTargets(ctx, tx, account, d, byDevice[d])
		if err != nil {
			return nil, values.Targets{}, err
		}
		t.Add(dt)
		for label, id := range vars {
			ids[slotKey{d, label}] = id
		}
	}
	keys := make([]int64, len(order))
	for i, k := range order {
		keys[i] = ids[k]
	}
	return keys, t, nil
}
