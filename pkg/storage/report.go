// Package storage tells what a stored point costs on disk: bytes per point of each
// table that holds values (raw values and the rollup tiers), split into heap, indexes
// and TOAST (`sensorapi storage report`, docs/operations.md "Storage per point").
package storage

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Tables are the hypertables that hold values, finest first.
var Tables = []string{"values", "value_minutes", "value_quarters", "value_days"}

// Table is what one table occupies.
type Table struct {
	Name                    string
	Rows                    int64
	Heap, Index, Toast, All int64 // bytes
}

// Report is the space of every table holding values against the raw points stored.
type Report struct {
	Points int64 // raw values
	Tables []Table
}

// Total is the bytes of every table.
func (r Report) Total() int64 {
	var n int64
	for _, t := range r.Tables {
		n += t.All
	}
	return n
}

// PerPoint divides bytes by the raw points (0 without points).
func (r Report) PerPoint(bytes int64) float64 {
	if r.Points == 0 {
		return 0
	}
	return float64(bytes) / float64(r.Points)
}

// tableSQL sums a hypertable's chunks (hypertable_detailed_size) and counts its rows
// exactly: the report is an operator's measurement, not a dashboard's estimate.
const tableSQL = `SELECT s.table_bytes, s.index_bytes, s.toast_bytes, s.total_bytes,
	(SELECT count(*) FROM %s)
FROM hypertable_detailed_size(%s::regclass) s`

// Measure reads the size and rows of every table in Tables.
func Measure(ctx context.Context, pool *pgxpool.Pool) (Report, error) {
	var r Report
	for _, name := range Tables {
		t := Table{Name: name}
		quoted := `"` + name + `"`
		q := fmt.Sprintf(tableSQL, quoted, "'"+quoted+"'")
		if err := pool.QueryRow(ctx, q).Scan(&t.Heap, &t.Index, &t.Toast, &t.All, &t.Rows); err != nil {
			return Report{}, fmt.Errorf("measure %s: %w", name, err)
		}
		if name == "values" {
			r.Points = t.Rows
		}
		r.Tables = append(r.Tables, t)
	}
	return r, nil
}

// Print writes the report as a table: bytes per raw point of each part.
func (r Report) Print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "table\trows\theap B/pt\tindex B/pt\ttoast B/pt\ttotal B/pt\ttotal MiB\t\n")
	for _, t := range r.Tables {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n", t.Name, t.Rows,
			r.PerPoint(t.Heap), r.PerPoint(t.Index), r.PerPoint(t.Toast), r.PerPoint(t.All), mib(t.All))
	}
	fmt.Fprintf(tw, "all\t%d points\t\t\t\t%.1f\t%.1f\t\n", r.Points, r.PerPoint(r.Total()), mib(r.Total()))
	return tw.Flush()
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
