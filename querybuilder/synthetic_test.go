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
	}{
		// ({{t}} * 9/5) + 32
		{"synthetic_fahrenheit.sql", bin("+", bin("/", bin("*", ref(3), num(9)), num(5)), num(32)), nil, nil},
		// {{p}} / {{v}}: the inner join of two inputs, division by zero gives no value
		{"synthetic_two_inputs.sql", bin("/", ref(3), ref(4)), &from, &to},
		{"synthetic_mean_1H_berlin.sql", win("mean", ref(3), Period{Hour, 1}, "Europe/Berlin"), nil, nil},
		{"synthetic_sum_1D_kathmandu_range.sql", win("sum", bin("*", ref(3), ref(4)), Period{Day, 1}, "Asia/Kathmandu"), &from, &to},
		{"synthetic_std_M.sql", win("std", ref(3), Period{Month, 1}, "UTC"), nil, nil},
		{"synthetic_diff_range.sql", call("diff", ref(3)), &from, nil},
		{"synthetic_shift_cumsum.sql", bin("-", call("cumsum", ref(3)), shift), &from, nil},
		{"synthetic_where.sql", call("where", bin(">", call("sqrt", ref(3)), num(2)), call("round", call("ln", ref(3))), win("max", ref(3), Period{Minute, 15}, "UTC")), nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q, err := Synthetic(SyntheticRequest{Expr: tc.expr, From: tc.from, To: tc.to})
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
		{win("mean", ref(1), Period{Hour, 1}, "UTC"), 9 * h, 12 * h},
		{win("sum", ref(1), Period{Month, 1}, "UTC"), 10*h - 32*24*h, 11*h + 32*24*h},
		{call("diff", ref(1)), 10 * h, Unbounded},
		{bin("+", call("cumsum", ref(1)), win("count", ref(2), Period{Minute, 30}, "UTC")), 10*h - h/2, Unbounded},
	}
	for i, tc := range cases {
		lo, hi := tc.expr.Affected(10*h, 11*h)
		if lo != tc.lo || hi != tc.hi {
			t.Errorf("case %d: [%d, %d], want [%d, %d]", i, lo, hi, tc.lo, tc.hi)
		}
	}
	if !strings.Contains(SyntheticNote, "§17") {
		t.Fatal(SyntheticNote)
	}
}
