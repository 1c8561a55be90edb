// Package synthetic holds synthetic variables (API.md §17): the expression parser, the
// dependency graph and its checks, the backfill and the live upkeep of derived values
// after writes to their inputs commit. The expressions compile to SQL in querybuilder
// (querybuilder.Synthetic), where a window function buckets exactly as E8 does.
package synthetic

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"

	"github.com/sensordata/sensorapi/pkg/analytics"
	"github.com/sensordata/sensorapi/querybuilder"
)

// The grammar, loosest binding first (docs/synthetic.md):
//
//	expr    = and { "or" and }
//	and     = not { "and" not }
//	not     = "not" not | compare
//	compare = sum [ ("<" | "<=" | ">" | ">=" | "==" | "!=") sum ]
//	sum     = product { ("+" | "-") product }
//	product = unary { ("*" | "/" | "%") unary }
//	unary   = ("-" | "+") unary | power
//	power   = primary [ "^" unary ]            (right-associative: 2^3^2 = 2^9)
//	primary = number | reference | string | call | "(" expr ")"
//	call    = name "(" [ expr { "," expr } ] ")"
//	reference = "{{" variable id | device label "." variable label "}}"
var exprLexer = lexer.MustSimple([]lexer.SimpleRule{
	{Name: "Ref", Pattern: `\{\{[^{}]*\}\}`},
	{Name: "String", Pattern: `"[^"]*"|'[^']*'`},
	{Name: "Number", Pattern: `(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?`},
	{Name: "Ident", Pattern: `[A-Za-z_][A-Za-z0-9_]*`},
	{Name: "Op", Pattern: `<=|>=|==|!=|[-+*/%^<>(),]`},
	{Name: "Whitespace", Pattern: `\s+`},
})

type orExpr struct {
	Head *andExpr   `parser:"@@"`
	Tail []*andExpr `parser:"( 'or' @@ )*"`
}

type andExpr struct {
	Head *notExpr   `parser:"@@"`
	Tail []*notExpr `parser:"( 'and' @@ )*"`
}

type notExpr struct {
	Pos lexer.Position
	Not *notExpr `parser:"  'not' @@"`
	Cmp *cmpExpr `parser:"| @@"`
}

type cmpExpr struct {
	Left  *sumExpr `parser:"@@"`
	Op    string   `parser:"( @( '<' '=' | '>' '=' | '=' '=' | '!' '=' | '<=' | '>=' | '==' | '!=' | '<' | '>' )"`
	Right *sumExpr `parser:"  @@ )?"`
}

type sumExpr struct {
	Head *prodExpr  `parser:"@@"`
	Tail []*sumTail `parser:"@@*"`
}

type sumTail struct {
	Pos lexer.Position
	Op  string    `parser:"@( '+' | '-' )"`
	X   *prodExpr `parser:"@@"`
}

type prodExpr struct {
	Head *unaryExpr  `parser:"@@"`
	Tail []*prodTail `parser:"@@*"`
}

type prodTail struct {
	Pos lexer.Position
	Op  string     `parser:"@( '*' | '/' | '%' )"`
	X   *unaryExpr `parser:"@@"`
}

type unaryExpr struct {
	Pos   lexer.Position
	Op    string     `parser:"  @( '-' | '+' )"`
	X     *unaryExpr `parser:"  @@"`
	Power *powExpr   `parser:"| @@"`
}

type powExpr struct {
	Base *primary   `parser:"@@"`
	Exp  *unaryExpr `parser:"( '^' @@ )?"`
}

type primary struct {
	Pos    lexer.Position
	Number *string `parser:"  @Number"`
	Ref    *string `parser:"| @Ref"`
	String *string `parser:"| @String"`
	Call   *call   `parser:"| @@"`
	Group  *orExpr `parser:"| '(' @@ ')'"`
}

type call struct {
	Pos  lexer.Position
	Name string    `parser:"@Ident '('"`
	Args []*orExpr `parser:"( @@ ( ',' @@ )* )? ')'"`
}

var parser = participle.MustBuild[orExpr](participle.Lexer(exprLexer), participle.Elide("Whitespace"),
	participle.UseLookahead(2))

// MaxLength bounds an expression's text.
const MaxLength = 2000

// Error is a fault of an expression's text, at a position (1-based, in characters).
type Error struct {
	Pos int
	Msg string
}

func (e *Error) Error() string {
	if e.Pos > 0 {
		return fmt.Sprintf("%s (at position %d)", e.Msg, e.Pos)
	}
	return e.Msg
}

// Resolver finds the variable a reference names ("<id>" or "<device>.<variable>", as
// written between the braces); ok false: unknown.
type Resolver func(ref string) (querybuilder.Ref, bool, error)

// Parse reads an expression and resolves its references. Faults of the text are
// *Error; a resolver's failure is returned as it is.
func Parse(text string, resolve Resolver) (*querybuilder.Expr, error) {
	if strings.TrimSpace(text) == "" {
		return nil, &Error{Msg: "The expression is empty."}
	}
	if len([]rune(text)) > MaxLength {
		return nil, &Error{Msg: fmt.Sprintf("The expression is longer than %d characters.", MaxLength)}
	}
	tree, err := parser.ParseString("", text)
	if err != nil {
		var pe participle.Error
		if errors.As(err, &pe) {
			return nil, &Error{Pos: column(text, pe.Position()), Msg: "Syntax error: " + readable(pe.Message()) + "."}
		}
		return nil, &Error{Msg: "Syntax error: " + err.Error() + "."}
	}
	b := builder{text: text, resolve: resolve}
	e, err := b.or(tree)
	if err != nil {
		return nil, err
	}
	if e.IsScalar() {
		return nil, &Error{Msg: "The expression references no variable: write {{<variable id>}} or {{<device label>.<variable label>}}."}
	}
	return e, nil
}

// grammarNames are the grammar's own names in participle's messages.
var grammarNames = regexp.MustCompile(`\(expected [A-Z][A-Za-z]*\)`)

// readable rewrites participle's messages in the expression's terms.
func readable(msg string) string {
	msg = strings.ReplaceAll(msg, `token "<EOF>"`, "end of the expression")
	msg = strings.ReplaceAll(msg, "lexer: invalid input text", "unexpected text")
	return grammarNames.ReplaceAllString(msg, "(expected a number, a {{reference}}, a function call or a parenthesis)")
}

// column is a lexer position as a 1-based character position in text.
func column(text string, p lexer.Position) int {
	if p.Offset < 0 || p.Offset > len(text) {
		return p.Column
	}
	return len([]rune(text[:p.Offset])) + 1
}

type builder struct {
	text    string
	resolve Resolver
}

func (b *builder) errAt(p lexer.Position, format string, args ...any) error {
	return &Error{Pos: column(b.text, p), Msg: fmt.Sprintf(format, args...)}
}

func binary(op string, l, r *querybuilder.Expr) *querybuilder.Expr {
	return &querybuilder.Expr{Kind: querybuilder.ExprBinary, Op: op, Args: []*querybuilder.Expr{l, r}}
}

func (b *builder) or(x *orExpr) (*querybuilder.Expr, error) {
	e, err := b.and(x.Head)
	for _, t := range x.Tail {
		if err != nil {
			return nil, err
		}
		var r *querybuilder.Expr
		if r, err = b.and(t); err == nil {
			e = binary("or", e, r)
		}
	}
	return e, err
}

func (b *builder) and(x *andExpr) (*querybuilder.Expr, error) {
	e, err := b.not(x.Head)
	for _, t := range x.Tail {
		if err != nil {
			return nil, err
		}
		var r *querybuilder.Expr
		if r, err = b.not(t); err == nil {
			e = binary("and", e, r)
		}
	}
	return e, err
}

func (b *builder) not(x *notExpr) (*querybuilder.Expr, error) {
	if x.Not != nil {
		e, err := b.not(x.Not)
		if err != nil {
			return nil, err
		}
		return &querybuilder.Expr{Kind: querybuilder.ExprUnary, Op: "not", Args: []*querybuilder.Expr{e}}, nil
	}
	l, err := b.sum(x.Cmp.Left)
	if err != nil || x.Cmp.Right == nil {
		return l, err
	}
	r, err := b.sum(x.Cmp.Right)
	if err != nil {
		return nil, err
	}
	return binary(x.Cmp.Op, l, r), nil
}

func (b *builder) sum(x *sumExpr) (*querybuilder.Expr, error) {
	e, err := b.prod(x.Head)
	for _, t := range x.Tail {
		if err != nil {
			return nil, err
		}
		var r *querybuilder.Expr
		if r, err = b.prod(t.X); err == nil {
			e = binary(t.Op, e, r)
		}
	}
	return e, err
}

func (b *builder) prod(x *prodExpr) (*querybuilder.Expr, error) {
	e, err := b.unary(x.Head)
	for _, t := range x.Tail {
		if err != nil {
			return nil, err
		}
		var r *querybuilder.Expr
		if r, err = b.unary(t.X); err == nil {
			e = binary(t.Op, e, r)
		}
	}
	return e, err
}

func (b *builder) unary(x *unaryExpr) (*querybuilder.Expr, error) {
	if x.X != nil {
		e, err := b.unary(x.X)
		if err != nil || x.Op == "+" {
			return e, err
		}
		if e.Kind == querybuilder.ExprNumber {
			e.Number = -e.Number
			return e, nil
		}
		return &querybuilder.Expr{Kind: querybuilder.ExprUnary, Op: "-", Args: []*querybuilder.Expr{e}}, nil
	}
	base, err := b.primary(x.Power.Base, false)
	if err != nil || x.Power.Exp == nil {
		return base, err
	}
	exp, err := b.unary(x.Power.Exp)
	if err != nil {
		return nil, err
	}
	return binary("^", base, exp), nil
}

// primary reads an operand; a string is only allowed where stringOK (a window's
// period and zone, read by call).
func (b *builder) primary(x *primary, stringOK bool) (*querybuilder.Expr, error) {
	switch {
	case x.Number != nil:
		f, err := strconv.ParseFloat(*x.Number, 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, b.errAt(x.Pos, "The number %s is out of range.", *x.Number)
		}
		return &querybuilder.Expr{Kind: querybuilder.ExprNumber, Number: f}, nil
	case x.Ref != nil:
		inner := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(*x.Ref, "{{"), "}}"))
		if inner == "" {
			return nil, b.errAt(x.Pos, "Empty reference %s: write {{<variable id>}} or {{<device label>.<variable label>}}.", *x.Ref)
		}
		ref, ok, err := b.resolve(inner)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, b.errAt(x.Pos, "Unknown variable reference {{%s}}: no variable of the account has that id or device and variable label.", inner)
		}
		return &querybuilder.Expr{Kind: querybuilder.ExprRef, Ref: ref}, nil
	case x.String != nil:
		return nil, b.errAt(x.Pos, "A string (%s) is only allowed as the period or time zone of a window function.", *x.String)
	case x.Call != nil:
		return b.call(x.Call)
	}
	return b.or(x.Group)
}

// functionNames lists the functions for error messages.
func functionNames() string {
	names := make([]string, 0, len(querybuilder.Functions))
	for n := range querybuilder.Functions {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// stringArg is argument i when it is a string literal alone.
func stringArg(a *orExpr) (string, lexer.Position, bool) {
	if len(a.Tail) > 0 || len(a.Head.Tail) > 0 || a.Head.Head.Cmp == nil || a.Head.Head.Cmp.Right != nil {
		return "", lexer.Position{}, false
	}
	s := a.Head.Head.Cmp.Left
	if len(s.Tail) > 0 || len(s.Head.Tail) > 0 || s.Head.Head.Power == nil || s.Head.Head.Power.Exp != nil {
		return "", lexer.Position{}, false
	}
	p := s.Head.Head.Power.Base
	if p.String == nil {
		return "", lexer.Position{}, false
	}
	return (*p.String)[1 : len(*p.String)-1], p.Pos, true
}

func (b *builder) call(c *call) (*querybuilder.Expr, error) {
	name := strings.ToLower(c.Name)
	f, ok := querybuilder.Functions[name]
	if !ok {
		return nil, b.errAt(c.Pos, "Unknown function %q. Functions: %s.", c.Name, functionNames())
	}
	window := f.Kind == querybuilder.FuncWindow
	if (name == "min" || name == "max") && len(c.Args) >= 2 {
		if _, _, ok := stringArg(c.Args[1]); ok {
			window = true
		}
	}
	e := &querybuilder.Expr{Kind: querybuilder.ExprCall, Op: name}
	var extra []*orExpr
	switch {
	case window:
		if len(c.Args) < 2 || len(c.Args) > 3 {
			return nil, b.errAt(c.Pos, "%s(x, \"period\"[, \"time zone\"]) takes 2 or 3 arguments, not %d.", name, len(c.Args))
		}
		extra = c.Args[1:]
	case name == "round" || name == "shift":
		if len(c.Args) != 2 {
			return nil, b.errAt(c.Pos, "%s(x, n) takes 2 arguments, not %d.", name, len(c.Args))
		}
		extra = c.Args[1:]
	default:
		if len(c.Args) != f.Args {
			return nil, b.errAt(c.Pos, "%s takes %d argument(s), not %d.", name, f.Args, len(c.Args))
		}
	}
	for _, a := range c.Args[:len(c.Args)-len(extra)] {
		x, err := b.or(a)
		if err != nil {
			return nil, err
		}
		e.Args = append(e.Args, x)
	}
	if window || f.Kind == querybuilder.FuncSeries {
		if e.Args[0].IsScalar() {
			return nil, b.errAt(c.Pos, "%s needs a series: its first argument must reference a variable.", name)
		}
	}
	switch {
	case window:
		period, pos, ok := stringArg(extra[0])
		if !ok {
			return nil, b.errAt(c.Pos, "The second argument of %s must be a period in quotes, e.g. \"1H\".", name)
		}
		if e.Period, ok = analytics.ParsePeriod(period); !ok {
			return nil, b.errAt(pos, "\"%s\" is not a valid period. %s", period, analytics.PeriodForms)
		}
		e.Zone = "UTC"
		if len(extra) == 2 {
			zone, pos, ok := stringArg(extra[1])
			if !ok || !analytics.IsZone(zone) {
				return nil, b.errAt(pos, "The third argument of %s must be an IANA time zone name in quotes, e.g. \"Europe/Madrid\".", name)
			}
			e.Zone = zone
		}
	case name == "round" || name == "shift":
		n, err := b.intArg(extra[0], c.Pos, name)
		if err != nil {
			return nil, err
		}
		lo, hi := -15, 15
		if name == "shift" {
			lo, hi = 1, 100000
		}
		if n < lo || n > hi {
			return nil, b.errAt(c.Pos, "The second argument of %s must be an integer from %d to %d.", name, lo, hi)
		}
		e.N = n
	}
	return e, nil
}

// intArg reads a constant integer argument.
func (b *builder) intArg(a *orExpr, pos lexer.Position, name string) (int, error) {
	x, err := b.or(a)
	if err != nil {
		return 0, err
	}
	if x.Kind != querybuilder.ExprNumber || x.Number != math.Trunc(x.Number) || math.Abs(x.Number) > 1e6 {
		return 0, b.errAt(pos, "The second argument of %s must be a constant integer.", name)
	}
	return int(x.Number), nil
}
