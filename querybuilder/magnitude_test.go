package querybuilder

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestIEEERange: the input range in which each expression takes the plain operators.
func TestIEEERange(t *testing.T) {
	cases := []struct {
		name       string
		expr       *Expr
		r          float64
		needed, ok bool
	}{
		{"fahrenheit", bin("+", bin("/", bin("*", ref(3), num(9)), num(5)), num(32)), 30, true, true},
		{"no operator that raises", call("abs", bin(">", ref(3), num(5))), 0, false, true},
		{"a large constant", bin("*", ref(3), num(1e300)), 8, true, true},
		{"exp, then a product", bin("*", call("exp", ref(3)), num(2)), 2, true, true},
		// 1e-15 − 1e-15·(1 + 2^-52) is 2.2e-31: 1e280 over it overflows, so not 1e±15
		{"a quotient of a difference", bin("/", num(1e280), bin("-", ref(3), ref(4))), 8, true, true},
		{"a square", bin("*", bin("^", ref(3), num(2)), ref(4)), 30, true, true},
		{"a power of a variable", bin("*", bin("^", ref(3), ref(4)), num(2)), 0, true, false},
		{"past the largest double whatever the input", bin("-", bin("*", ref(3), num(2)), num(1e308)), 0, true, false},
	}
	for _, tc := range cases {
		r, needed, ok := ieeeRange(tc.expr)
		if r != tc.r || needed != tc.needed || ok != tc.ok {
			t.Errorf("%s: range %g needed %v ok %v, want %g %v %v", tc.name, r, needed, ok, tc.r, tc.needed, tc.ok)
		}
	}
}

// TestIEEERangeHolds evaluates random trees of + - * / % over random inputs in the range
// ieeeRange chose, as Go's IEEE arithmetic does: no intermediate result may leave the
// range PostgreSQL accepts (an infinity, or a nonzero product or quotient rounded to 0).
func TestIEEERangeHolds(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 26))
	ops := []string{"+", "-", "*", "/", "%"}
	var tree func(depth int) *Expr
	tree = func(depth int) *Expr {
		if depth == 0 || rng.IntN(3) == 0 {
			if rng.IntN(2) == 0 {
				return ref(1)
			}
			return num(math.Pow(10, float64(rng.IntN(200)-100)) * (rng.Float64() + 0.5))
		}
		return bin(ops[rng.IntN(len(ops))], tree(depth-1), tree(depth-1))
	}
	checked := 0
	for range 3000 {
		e := tree(4)
		r, needed, ok := ieeeRange(e)
		if !needed || !ok {
			continue
		}
		checked++
		for range 20 {
			x := math.Pow(10, (rng.Float64()*2-1)*r) * float64(1-2*rng.IntN(2))
			if bad := evalRaises(e, x); bad != "" {
				t.Fatalf("range 1e±%g: %s with x = %g", r, bad, x)
			}
		}
	}
	if checked < 300 {
		t.Fatalf("only %d trees had a plain range", checked)
	}
}

// evalRaises evaluates e at x (every reference) and names the first operation whose
// result PostgreSQL would refuse.
func evalRaises(e *Expr, x float64) string {
	var bad string
	var eval func(n *Expr) (float64, bool) // false: NULL
	eval = func(n *Expr) (float64, bool) {
		switch n.Kind {
		case ExprNumber:
			return n.Number, true
		case ExprRef:
			return x, true
		}
		a, okA := eval(n.Args[0])
		b, okB := eval(n.Args[1])
		if !okA || !okB || bad != "" {
			return 0, false
		}
		var v float64
		switch n.Op {
		case "+":
			v = a + b
		case "-":
			v = a - b
		case "*":
			v = a * b
		case "/", "%":
			if b == 0 {
				return 0, false
			}
			v = a / b
			if n.Op == "%" {
				if math.IsInf(v, 0) || (v == 0 && a != 0) {
					bad = "% (quotient)"
				}
				p := b * math.Floor(v)
				if math.IsInf(p, 0) {
					bad = "% (product)"
				}
				v = a - p
			}
		}
		if math.IsInf(v, 0) || (v == 0 && (n.Op == "*" || n.Op == "/") && a != 0 && b != 0) {
			bad = n.Op
		}
		return v, true
	}
	eval(e)
	return bad
}
