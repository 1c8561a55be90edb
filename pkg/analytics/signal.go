package analytics

import (
	"fmt"
	"slices"
	"strings"

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

// readSeries reads E8's fill, fill_limit and extend.
func readSeries(o *validate.Object) querybuilder.Series {
	var x querybuilder.Series
	if s, ok := o.String("fill", 0); ok {
		if slices.Contains(querybuilder.Fills, querybuilder.Fill(s)) {
			x.Fill = querybuilder.Fill(s)
		} else {
			names := make([]string, len(querybuilder.Fills))
			for i, m := range querybuilder.Fills {
				names[i] = string(m)
			}
			o.Fail("fill", fmt.Sprintf("\"%s\" is not a valid choice. Choose one of %s.", s, strings.Join(names, ", ")))
		}
	}
	if n, ok := o.Int("fill_limit", 1, maxFillLimit); ok {
		x.FillLimit = int(n)
	}
	if b, ok := o.Bool("extend"); ok {
		x.Extend = b
	}
	return x
}
