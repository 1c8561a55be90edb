package csvout_test

import (
	"bytes"
	"encoding/csv"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/sensordata/sensorapi/pkg/csvout"
)

// TestNumberReadsBackBitExact: every number is written in a form strconv.ParseFloat
// reads back to the same bits (-0, subnormals, the extremes, a million random bit
// patterns), and in the JSON answers' digits.
func TestNumberReadsBackBitExact(t *testing.T) {
	check := func(v float64) {
		s := csvout.Number(v)
		got, err := strconv.ParseFloat(s, 64)
		if err != nil || math.Float64bits(got) != math.Float64bits(v) {
			t.Fatalf("%v (%#x) written %q, reads back %v (%v)", v, math.Float64bits(v), s, got, err)
		}
	}
	for v, want := range map[float64]string{sum(0.1, 0.2): "0.30000000000000004", 1e-300: "1e-300", 5e-324: "5e-324",
		math.Copysign(0, -1): "-0", 0: "0", 1e21: "1e+21", 1e20: "100000000000000000000", 1e-7: "1e-7",
		0.000001: "0.000001", 123456789.125: "123456789.125", math.MaxFloat64: "1.7976931348623157e+308"} {
		if got := csvout.Number(v); got != want {
			t.Errorf("Number(%v) = %q, want %q", v, got, want)
		}
		check(v)
	}
	rng := rand.New(rand.NewPCG(43, 21))
	for range 1_000_000 {
		if v := math.Float64frombits(rng.Uint64()); !math.IsNaN(v) && !math.IsInf(v, 0) {
			check(v)
		}
	}
}

// sum adds at run time (0.1 + 0.2 as constants is exactly 0.3).
func sum(a, b float64) float64 { return a + b }

// TestRecordsQuoteAndZone: contexts that need quoting read back as written; ISO times
// carry the zone's offset at each instant; null is an empty cell.
func TestRecordsQuoteAndZone(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := csvout.NewWriter(&buf, berlin)
	winter := time.Date(2026, 10, 25, 1, 0, 0, 0, time.UTC).UnixMilli() // 02:00 CET, just after the change
	one := 1.5
	for _, err := range []error{
		w.Header("timestamp", "value", "context", "created_at"),
		w.Dot(winter-1, 2, []byte(`{"a": "x, \"y\"\nz"}`), winter),
		w.Dot(winter, -0.5, nil, winter),
		w.Row(winter, []*float64{&one, nil}),
		w.Point("v", winter, nil),
		w.Flush(),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	r := csv.NewReader(&buf)
	r.FieldsPerRecord = -1 // the three shapes in one test
	records, err := r.ReadAll()
	want := [][]string{
		{"timestamp", "value", "context", "created_at"},
		{"2026-10-25T02:59:59.999+02:00", "2", `{"a":"x, \"y\"\nz"}`, "2026-10-25T02:00:00.000+01:00"},
		{"2026-10-25T02:00:00.000+01:00", "-0.5", "{}", "2026-10-25T02:00:00.000+01:00"},
		{"2026-10-25T02:00:00.000+01:00", "1.5", ""},
		{"v", "2026-10-25T02:00:00.000+01:00", ""},
	}
	if err != nil || !reflect.DeepEqual(records, want) {
		t.Fatalf("%v\n%q\nwant %q", err, records, want)
	}
	if d := csvout.Disposition("values-x"); d != `attachment; filename="values-x.csv"` {
		t.Errorf("Disposition %q", d)
	}
}

// TestDotWithoutContextAsEncodingCSV: a dot without a context, which Dot writes without
// encoding/csv, is the bytes encoding/csv writes for the same fields, whatever the
// number's form and in either time format.
func TestDotWithoutContextAsEncodingCSV(t *testing.T) {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, zone := range []*time.Location{nil, tokyo} {
		var got, want bytes.Buffer
		w, plain := csvout.NewWriter(&got, zone), csv.NewWriter(&want)
		for i := range 10_000 {
			v := math.Float64frombits(rng.Uint64())
			if math.IsNaN(v) || math.IsInf(v, 0) {
				v = float64(i) * -1e-7
			}
			ts, created := rng.Int64N(1<<42)-1<<40, rng.Int64N(1<<42)
			if err := w.Dot(ts, v, nil, created); err != nil {
				t.Fatal(err)
			}
			_ = plain.Write([]string{w.Time(ts), csvout.Number(v), "{}", w.Time(created)})
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		plain.Flush()
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("zone %v: Dot wrote other bytes than encoding/csv", zone)
		}
	}
}
