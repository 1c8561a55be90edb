package querybuilder

import (
	"strings"
	"testing"
	"time"
)

func ref(key int64) *Expr { return &Expr{Kind: ExprRef, Ref: Ref{Key: key}} }
func num(x float64) *Expr { return &Expr{Kind: ExprNumber, Number: x} }
func bin(op string, a, b *Expr) *Expr {
	return &Expr{Kind: ExprBinary, Op: op, Args: []*Expr{a, b}}
}
func call(op string, args ...*Expr) *Expr { return &Expr{Kind: ExprCall, Op: op, Args: args} }
func win(op string, arg *Expr, p Period, zone string) *Expr {
	return &Expr{Kind: ExprCall, Op: op, Args: []*Expr{arg}, Period: p, Zone: zone}
}

func TestSyntheticGolden(t *testing.T) {
	from, to := time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 30, 0, 0, 0, 0, time.UTC)
	shift := call("shift", ref(3))
	shift.N = 2
	cases := []struct {
		name     string
		expr     *Expr
		from, to *time.Time
		self     int64
	}{
		// ({{t}} * 9/5) + 32
		{"synthetic_fahrenheit.sql", bin("+", bin("/", bin("*", ref(3), num(9)), num(5)), num(32)), nil, nil, 0},
		// {{p}} / {{v}}: the inner join of two inputs, division by zero gives no value
		{"synthetic_two_inputs.sql", bin("/", ref(3), ref(4)), &from, &to, 0},
		{"synthetic_mean_1H_berlin.sql", win("mean", ref(3), Period{Hour, 1}, "Europe/Berlin"), nil, nil, 0},
		{"synthetic_sum_1D_kathmandu_range.sql", win("sum", bin("*", ref(3), ref(4)), Period{Day, 1}, "Asia/Kathmandu"), &from, &to, 0},
		// a live recompute of an hour's bucket: its own values read, no origin
		{"synthetic_mean_1H_utc_range.sql", win("mean", ref(3), Period{Hour, 1}, "UTC"), &from, &from, 0},
		{"synthetic_std_M.sql", win("std", ref(3), Period{Month, 1}, "UTC"), nil, nil, 0},
		{"synthetic_diff_range.sql", call("diff", ref(3)), &from, nil, 0},
		{"synthetic_shift_cumsum.sql", bin("-", call("cumsum", ref(3)), shift), &from, nil, 0},
		// the live upkeep's running sum, carried on from its own stored value
		{"synthetic_cumsum_carried.sql", call("cumsum", ref(3)), &from, nil, 7},
		{"synthetic_where.sql", call("where", bin(">", call("sqrt", ref(3)), num(2)), call("round", call("ln", ref(3))), win("max", ref(3), Period{Minute, 15}, "UTC")), nil, nil, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q, err := Synthetic(SyntheticRequest{Expr: tc.expr, From: tc.from, To: tc.to, Self: tc.self})
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name, q.SQL)
			if _, err := q.Inline(); err != nil {
				t.Fatalf("placeholders and args disagree: %v", err)
			}
		})
	}
}

// Only windows whose grid depends on the first value need it looked up.
func TestAnchoredWindows(t *testing.T) {
	free := []*Expr{win("mean", ref(1), Period{Hour, 1}, "UTC"), win("sum", ref(1), Period{Minute, 15}, "UTC"),
		win("max", ref(1), Period{Day, 1}, "Asia/Kathmandu"), win("std", ref(1), Period{Week, 1}, "UTC")}
	anchored := []*Expr{win("mean", ref(1), Period{Hour, 1}, "Europe/Berlin"), win("sum", ref(1), Period{Hour, 5}, "UTC"),
		win("max", ref(1), Period{Day, 2}, "UTC"), win("min", ref(1), Period{Minute, 7}, "UTC")}
	for _, e := range free {
		if len(e.AnchoredWindows()) != 0 {
			t.Errorf("%s %v %s: anchored", e.Op, e.Period, e.Zone)
		}
	}
	for _, e := range anchored {
		if len(bin("+", e, free[0]).AnchoredWindows()) != 1 {
			t.Errorf("%s %v %s: not anchored", e.Op, e.Period, e.Zone)
		}
	}
}

func TestSyntheticScalarRefused(t *testing.T) {
	if _, err := Synthetic(SyntheticRequest{Expr: bin("+", num(1), num(2))}); err == nil {
		t.Fatal("a constant compiled")
	}
}

// Affected must cover every output timestamp whose value a change can alter.
func TestSyntheticAffected(t *testing.T) {
	const h = int64(3600_000)
	cases := []struct {
		expr   *Expr
		lo, hi int64
	}{
		{bin("*", ref(1), num(2)), 10 * h, 11 * h},
		{win("mean", ref(1), Period{Hour, 1}, "UTC"), 10 * h, 11 * h}, // its own buckets: they lie on UTC hours
		{win("mean", ref(1), Period{Hour, 1}, "Europe/Berlin"), 9 * h, 12 * h},
		{win("mean", ref(1), Period{Hour, 5}, "UTC"), 5 * h, 16 * h},                // 5 hours do not divide a day
		{win("sum", ref(1), Period{Month, 1}, "UTC"), 30*24*h - 3*h, 30*24*h + 3*h}, // labelled 1970-01-31
		{win("sum", ref(1), Period{Day, 2}, "UTC"), 10*h - 2*25*h - h, 11*h + 2*25*h + h},
		{call("diff", ref(1)), 10 * h, Unbounded},
		{bin("+", call("cumsum", ref(1)), win("count", ref(2), Period{Minute, 7}, "UTC")), 10*h - 7*h/60, Unbounded},
	}
	for i, tc := range cases {
		lo, hi := tc.expr.Affected(10*h, 11*h)
		if lo != tc.lo || hi != tc.hi {
			t.Errorf("case %d: [%d, %d], want [%d, %d]", i, lo, hi, tc.lo, tc.hi)
		}
	}
	// a free grid's change inside buckets reaches their labels, the buckets' starts
	if lo, hi := win("sum", ref(1), Period{Minute, 30}, "UTC").Affected(10*h+h/6, 11*h+h/2+1); lo != 10*h || hi != 11*h+h/2 {
		t.Errorf("30T: [%d, %d]", lo, hi)
	}
	// calendar windows: the labels of the buckets holding the change, within an hour's
	// DST either way (labelSlack)
	berlin, _ := time.LoadLocation("Europe/Berlin")
	kathmandu, _ := time.LoadLocation("Asia/Kathmandu")
	at := func(loc *time.Location, y int, m time.Month, d, hh, mm int) int64 {
		return time.Date(y, m, d, hh, mm, 0, 0, loc).UnixMilli()
	}
	slack := labelSlack.Milliseconds()
	for _, tc := range []struct {
		e              *Expr
		from, to, l, r int64
	}{
		// a change on Wednesday 2026-03-25 and on Monday 2026-03-30 (summer time from the
		// 29th): the weeks labelled by Sunday the 29th and Sunday 5 April
		{win("mean", ref(1), Period{Week, 1}, "Europe/Berlin"), at(berlin, 2026, 3, 25, 12, 0), at(berlin, 2026, 3, 30, 0, 30),
			at(berlin, 2026, 3, 29, 0, 0), at(berlin, 2026, 4, 5, 0, 0)},
		// 23:50 local is the next UTC day's date in Kathmandu (+05:45)
		{win("sum", ref(1), Period{Day, 1}, "Asia/Kathmandu"), at(kathmandu, 2026, 1, 1, 23, 50), at(kathmandu, 2026, 1, 2, 0, 10),
			at(kathmandu, 2026, 1, 1, 0, 0), at(kathmandu, 2026, 1, 2, 0, 0)},
		{win("max", ref(1), Period{Month, 1}, "Europe/Berlin"), at(berlin, 2026, 2, 28, 23, 59), at(berlin, 2026, 3, 1, 0, 0),
			at(berlin, 2026, 2, 28, 0, 0), at(berlin, 2026, 3, 31, 0, 0)},
	} {
		if lo, hi := tc.e.Affected(tc.from, tc.to); lo != tc.l-slack || hi != tc.r+slack {
			t.Errorf("%s %v %s: [%d, %d], want [%d, %d]", tc.e.Op, tc.e.Period, tc.e.Zone, lo, hi, tc.l-slack, tc.r+slack)
		}
	}
	if !strings.Contains(SyntheticNote, "§17") {
		t.Fatal(SyntheticNote)
	}
}
