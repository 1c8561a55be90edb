// Package loadgen makes reproducible sensor data: the same flags give the same dots,
// so benchmarks and people trying the service see the same numbers.
package loadgen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/sensordata/sensorapi/pkg/ingest"
)

// Spec describes a data set: Devices × Variables series of Points dots each, spaced
// Interval apart from Start.
type Spec struct {
	Devices, Variables, Points int
	Start                      time.Time
	Interval                   time.Duration
	Seed                       uint64
	Batch                      int // dots per request
}

// Batch is one request's worth of dots for one device.
type Batch struct {
	Device string
	Dots   []ingest.Dot // Target is the variable label
}

// Total is the number of dots in the data set.
func (s Spec) Total() int { return s.Devices * s.Variables * s.Points }

// DeviceLabel and VariableLabel name the generated series.
func DeviceLabel(d int) string   { return fmt.Sprintf("device-%d", d) }
func VariableLabel(v int) string { return fmt.Sprintf("var-%d", v) }

// Batches calls fn for each batch in order: per device, points in time order, all of
// the device's variables interleaved (as a gateway would send them). It stops at the
// first error.
func (s Spec) Batches(fn func(Batch) error) error {
	per := max(1, s.Batch/max(1, s.Variables))
	for d := 0; d < s.Devices; d++ {
		rngs := make([]*rand.Rand, s.Variables)
		for v := range rngs {
			rngs[v] = rand.New(rand.NewPCG(s.Seed, uint64(d)<<32|uint64(v)))
		}
		for p0 := 0; p0 < s.Points; p0 += per {
			n := min(per, s.Points-p0)
			b := Batch{Device: DeviceLabel(d), Dots: make([]ingest.Dot, 0, n*s.Variables)}
			for p := p0; p < p0+n; p++ {
				ts := s.Start.Add(time.Duration(p) * s.Interval).UnixMilli()
				for v, rng := range rngs {
					b.Dots = append(b.Dots, ingest.Dot{Target: VariableLabel(v), TS: ts, Value: value(rng, p, v)})
				}
			}
			if err := fn(b); err != nil {
				return err
			}
		}
	}
	return nil
}

// value is a daily cycle plus noise, rounded to 2 decimals like a real sensor.
func value(rng *rand.Rand, p, v int) float64 {
	x := 20 + 5*math.Sin(float64(p)/1200*math.Pi) + float64(v) + rng.NormFloat64()
	return math.Round(x*100) / 100
}

// DeviceBody encodes a batch as the device route's body, grouping dots by variable.
func DeviceBody(b Batch) []byte {
	groups := map[string][]ingest.Dot{}
	var order []string
	for _, d := range b.Dots {
		if _, ok := groups[d.Target]; !ok {
			order = append(order, d.Target)
		}
		groups[d.Target] = append(groups[d.Target], d)
	}
	buf := make([]byte, 0, 48*len(b.Dots))
	buf = append(buf, '{')
	for i, label := range order {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = strconv.AppendQuote(buf, label)
		buf = append(buf, ":["...)
		for j, d := range groups[label] {
			if j > 0 {
				buf = append(buf, ',')
			}
			buf = append(buf, `{"value":`...)
			buf = strconv.AppendFloat(buf, d.Value, 'g', -1, 64)
			buf = append(buf, `,"timestamp":`...)
			buf = strconv.AppendInt(buf, d.TS, 10)
			buf = append(buf, '}')
		}
		buf = append(buf, ']')
	}
	return append(buf, '}')
}
