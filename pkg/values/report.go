package values

// The storage report tells what a stored point costs on disk: bytes per point of each
// table that holds values (raw values and the rollup tiers), split into heap, indexes
// and TOAST (`sensorapi storage report`, docs/operations.md "Storage per point").

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The hypertables of raw values: rows, and packed days (one row per variable and day).
const (
	RowsTable   = "values"
	PackedTable = "values_packed"
)

// RawTables are the tables of raw values in both layouts, as regclass text: retention
// drops their chunks alike.
var RawTables = []string{`"` + RowsTable + `"`, PackedTable}

// Tables are the hypertables that hold values: raw values in rows and packed, then the
// rollup tiers, finest first.
var Tables = []string{RowsTable, PackedTable, "value_minutes", "value_quarters", "value_days"}

// PointsSQL is the aggregate counting the raw values that rows of a table (its name,
// quoted or not) hold: a packed row holds n; a tile none.
func PointsSQL(table string) string {
	switch strings.Trim(table, `"`) {
	case RowsTable:
		return "count(*)"
	case PackedTable:
		return "coalesce(sum(n), 0)::bigint"
	}
	return "0::bigint"
}

// Table is what one table occupies.
type Table struct {
	Name                    string
	Rows                    int64 // rows of the table
	Points                  int64 // raw values it holds (the two raw layouts)
	Heap, Index, Toast, All int64 // bytes
}

// Report is the space of every table holding values against the raw points stored.
type Report struct {
	Points int64 // raw values, both layouts
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
// and raw points exactly: the report is an operator's measurement, not a dashboard's
// estimate.
const tableSQL = `SELECT s.table_bytes, s.index_bytes, s.toast_bytes, s.total_bytes, c.rows, c.points
FROM hypertable_detailed_size(%s::regclass) s, (SELECT count(*), %s FROM %s) c(rows, points)`

// Measure reads the size and rows of every table in Tables.
func Measure(ctx context.Context, pool *pgxpool.Pool) (Report, error) {
	var r Report
	for _, name := range Tables {
		t := Table{Name: name}
		quoted := `"` + name + `"`
		q := fmt.Sprintf(tableSQL, "'"+quoted+"'", PointsSQL(name), quoted)
		if err := pool.QueryRow(ctx, q).Scan(&t.Heap, &t.Index, &t.Toast, &t.All, &t.Rows, &t.Points); err != nil {
			return Report{}, fmt.Errorf("measure %s: %w", name, err)
		}
		r.Points += t.Points
		r.Tables = append(r.Tables, t)
	}
	return r, nil
}

// Print writes the report as a table: bytes per raw point of each part.
func (r Report) Print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "table\trows\tpoints\theap B/pt\tindex B/pt\ttoast B/pt\ttotal B/pt\ttotal MiB\t\n")
	for _, t := range r.Tables {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n", t.Name, t.Rows, t.Points,
			r.PerPoint(t.Heap), r.PerPoint(t.Index), r.PerPoint(t.Toast), r.PerPoint(t.All), mib(t.All))
	}
	fmt.Fprintf(tw, "all\t\t%d\t\t\t\t%.1f\t%.1f\t\n", r.Points, r.PerPoint(r.Total()), mib(r.Total()))
	return tw.Flush()
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
