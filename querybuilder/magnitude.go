package querybuilder

import "math"

// PostgreSQL's float8 +, -, *, / raise "value out of range" where IEEE arithmetic gives
// ±Infinity (or, for * and /, rounds a nonzero result to 0), and PostgreSQL will not
// inline a guard function whose argument is a large expression named twice: it calls it
// row by row (a year's backfill went past its 30 s timeout). So a pointwise expression is
// compiled twice: plain operators for the rows whose inputs lie in a range where no
// intermediate result can overflow or underflow (proven here from the expression's
// constants), and the guarded operators of sql/20261129000001_ieee_arithmetic.up.sql for
// the other rows (ieeeRange).

// magnitude bounds the decimal exponents of the nonzero values an expression can take:
// lo ≤ log10|v| ≤ hi. A node that is always 0 (or NULL) has zero set and no bounds.
type magnitude struct {
	lo, hi float64
	zero   bool
}

// Limits of the decimal exponent of a result PostgreSQL accepts: the largest double
// (1.797e308), and the smallest subnormal (4.9e-324), below which a product or quotient
// rounds to 0 and raises "underflow".
const (
	maxExp = 308.25
	minExp = -323.3
)

var (
	log2     = math.Log10(2)
	ulpDigit = 16.0 // a nonzero a ± b is at least 2^-53 of the smaller operand
)

// boundsChecker walks a pointwise tree with every leaf (reference, series or window
// value) between 10^-leaf and 10^leaf in magnitude, or 0, and records whether an
// operation that raises could leave PostgreSQL's range.
type boundsChecker struct {
	leaf    float64
	unsafe  bool // an operation that raises may see a result out of range
	raising bool // the tree has an operation that raises
}

func (b *boundsChecker) of(n *Expr) magnitude {
	switch {
	case n.Kind == ExprNumber:
		if n.Number == 0 {
			return magnitude{zero: true}
		}
		e := math.Log10(math.Abs(n.Number))
		return magnitude{lo: e, hi: e}
	case n.Kind == ExprRef || n.IsWindow() || (n.Kind == ExprCall && Functions[n.Op].Kind == FuncSeries):
		return magnitude{lo: -b.leaf, hi: b.leaf}
	}
	a := make([]magnitude, len(n.Args))
	for i, x := range n.Args {
		a[i] = b.of(x)
	}
	switch n.Kind {
	case ExprUnary:
		if n.Op == "-" {
			return a[0]
		}
		return magnitude{} // not: 0 or 1
	case ExprBinary:
		if n.Op == "^" {
			return power(a[0], n.Args[1])
		}
		return b.binary(n.Op, a[0], a[1])
	}
	return b.call(n, a)
}

func (b *boundsChecker) binary(op string, x, y magnitude) magnitude {
	switch op {
	case "+", "-":
		return b.check(sum(x, y), false)
	case "*":
		return b.check(product(x, y), true)
	case "/":
		return b.check(quotient(x, y), true)
	case "%": // x - y * floor(x / y)
		q := b.check(quotient(x, y), true)
		f := floorOf(q)
		return b.check(sum(x, b.check(product(y, f), true)), false)
	}
	return magnitude{} // comparisons, and, or: 0 or 1
}

func (b *boundsChecker) call(n *Expr, a []magnitude) magnitude {
	switch n.Op {
	case "abs":
		return a[0]
	case "floor", "ceil":
		return floorOf(a[0])
	case "round":
		d := float64(-n.N)
		if a[0].zero {
			return a[0]
		}
		return magnitude{lo: math.Min(a[0].lo, d), hi: math.Max(a[0].hi, d) + log2}
	case "sin", "cos":
		return magnitude{lo: math.Min(a[0].lo, -20), hi: 0}
	case "tan":
		return magnitude{lo: math.Min(a[0].lo, -20), hi: 17}
	case "sqrt":
		return magnitude{lo: a[0].lo / 2, hi: a[0].hi / 2, zero: a[0].zero}
	case "ln", "log10":
		return magnitude{lo: -ulpDigit, hi: math.Log10(math.Max(math.Abs(a[0].hi), math.Abs(a[0].lo))*math.Ln10 + 1)}
	case "exp": // guarded: NULL above maxLn, 0 below minLn
		m := math.Pow(10, a[0].hi) * math.Log10E
		return magnitude{lo: math.Max(-m, -307.7), hi: math.Min(m, maxExp)}
	case "min", "max":
		return union(a[0], a[1])
	case "where":
		return union(a[1], a[2])
	}
	return magnitude{lo: minExp, hi: maxExp} // unknown: anything
}

// check records whether a result of an operation that raises can leave the range
// (underflow counts for * and / only: + and - do not raise on it).
func (b *boundsChecker) check(m magnitude, underflows bool) magnitude {
	b.raising = true
	if !m.zero && (m.hi >= maxExp || (underflows && m.lo <= minExp)) {
		b.unsafe = true
	}
	return m
}

// power bounds x ^ y, guarded (NULL outside the doubles): |x|^c for a constant exponent
// c, else anything a double can be.
func power(x magnitude, y *Expr) magnitude {
	all := magnitude{lo: -307.7, hi: maxExp}
	if y.Kind != ExprNumber {
		return all
	}
	if x.zero {
		return magnitude{} // 0 or 1
	}
	c := y.Number
	lo, hi := math.Min(c*x.lo, c*x.hi), math.Max(c*x.lo, c*x.hi)
	return magnitude{lo: math.Max(math.Min(lo, 0), all.lo), hi: math.Min(math.Max(hi, 0), all.hi)}
}

// sum bounds x ± y: up to twice the larger, down to a cancellation's last bit.
func sum(x, y magnitude) magnitude {
	u := union(x, y)
	if x.zero || y.zero {
		return u
	}
	return magnitude{lo: u.lo - ulpDigit, hi: u.hi + log2}
}

func product(x, y magnitude) magnitude {
	if x.zero || y.zero {
		return magnitude{zero: true}
	}
	return magnitude{lo: x.lo + y.lo, hi: x.hi + y.hi}
}

func quotient(x, y magnitude) magnitude {
	if x.zero || y.zero { // 0 / y, or x / 0 (NULL)
		return magnitude{zero: true}
	}
	return magnitude{lo: x.lo - y.hi, hi: x.hi - y.lo}
}

// floorOf bounds floor and ceil: 0, or at least 1 in magnitude.
func floorOf(x magnitude) magnitude {
	if x.zero {
		return x
	}
	return magnitude{lo: 0, hi: math.Max(x.hi, 0) + log2}
}

func union(x, y magnitude) magnitude {
	switch {
	case x.zero:
		return y
	case y.zero:
		return x
	}
	return magnitude{lo: math.Min(x.lo, y.lo), hi: math.Max(x.hi, y.hi)}
}

// leafRanges are the input ranges tried, widest first: inputs within ±10^r (and at least
// 10^-r, or 0) take the plain operators.
var leafRanges = []float64{30, 15, 8, 4, 2, 1}

// ieeeRange is the widest leaf range in which the plain operators of the pointwise tree
// e cannot raise; needed is false when e has no operator that raises at all, and ok
// false when no range is safe (then every row takes the guarded operators).
func ieeeRange(e *Expr) (r float64, needed, ok bool) {
	for _, r := range leafRanges {
		b := &boundsChecker{leaf: r}
		b.of(e)
		if !b.raising {
			return 0, false, true
		}
		if !b.unsafe {
			return r, true, true
		}
	}
	return 0, true, false
}
