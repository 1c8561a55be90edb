package analytics

import (
	"fmt"
	"strings"

	"github.com/sensordata/sensorapi/pkg/gapfill"
	"github.com/sensordata/sensorapi/pkg/validate"
	"github.com/sensordata/sensorapi/querybuilder"
)

// Limits of the time-aware fields (API.md §20).
const (
	maxGapSeconds = 1e12 // beyond every timestamp the service stores
	maxFillLimit  = 1000000
)

// readSignal reads method and max_gap (E7, E8, E9); they shape only the time-aware
// aggregations.
func readSignal(o *validate.Object) querybuilder.Signal {
	var s querybuilder.Signal
	if m, ok := o.String("method", 0); ok {
		switch m {
		case "locf":
		case "linear":
			s.Linear = true
		default:
			o.Fail("method", fmt.Sprintf("\"%s\" is not a valid choice. Choose one of locf, linear.", m))
		}
	}
	if n, ok := o.Number("max_gap", 0, maxGapSeconds); ok {
		if f, _ := n.Float64(); f > 0 {
			s.MaxGap = f
		} else {
			o.Fail("max_gap", "Ensure this value is greater than 0.")
		}
	}
	return s
}

// readFill reads E8's fill, fill_limit and extend.
func readFill(o *validate.Object) (fill gapfill.Method, limit int, extend bool) {
	if s, ok := o.String("fill", 0); ok {
		m, err := gapfill.Parse(s)
		if err != nil {
			names := make([]string, len(gapfill.Methods))
			for i, m := range gapfill.Methods {
				names[i] = string(m)
			}
			o.Fail("fill", fmt.Sprintf("\"%s\" is not a valid choice. Choose one of %s.", s, strings.Join(names, ", ")))
		}
		fill = m
	}
	if n, ok := o.Int("fill_limit", 1, maxFillLimit); ok {
		limit = int(n)
	}
	if b, ok := o.Bool("extend"); ok {
		extend = b
	}
	return fill, limit, extend
}

// filled is rows without seed rows, each variable's empty buckets filled by r.Fill
// (rows are ordered by variable, newest first).
func (r *Resample) filled(rows []Row) []Row {
	if r.Fill == gapfill.None || r.Fill == "" {
		return rows
	}
	out := make([]Row, 0, len(rows))
	seeds := map[int64]*float64{}
	for _, row := range rows {
		if row.Seed {
			seeds[row.Ord] = row.Value
			continue
		}
		out = append(out, row)
	}
	for lo := 0; lo < len(out); {
		hi := lo
		for hi < len(out) && out[hi].Ord == out[lo].Ord {
			hi++
		}
		fillSeries(r.Fill, out[lo:hi], r.FillLimit, seeds[out[lo].Ord])
		lo = hi
	}
	return out
}

// fillSeries fills one variable's rows (newest first) oldest first, as pandas would.
func fillSeries(m gapfill.Method, rows []Row, limit int, seed *float64) {
	n := len(rows)
	xs, ys := make([]int64, n), make([]*float64, n)
	for i := range rows {
		row := rows[n-1-i]
		if row.TS != nil {
			xs[i] = *row.TS
		}
		ys[i] = row.Value
	}
	gapfill.Fill(m, xs, ys, limit, seed)
	for i := range rows {
		rows[n-1-i].Value = ys[i]
	}
}
