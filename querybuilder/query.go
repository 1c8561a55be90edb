// Package querybuilder compiles typed, validated analytics requests (statistics,
// resample, aggregation) into one TimescaleDB statement each, built with squirrel. It
// holds no database handle: the output is SQL text with ? placeholders and its
// arguments. Everything user-supplied travels as an argument; only identifiers and
// literals the compiler itself chose are spliced into the text.
package querybuilder

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	sq "github.com/Masterminds/squirrel"
)

// Query is a compiled statement.
type Query struct {
	SQL  string
	Args []any
	// Notes say which rollup tiers the statement reads over which spans, and why
	// (explain answers, sensorapi compile). They vary with the request's values; the
	// SQL text does not.
	Notes []string
	// IEEE is the same statement with IEEE sums (±Infinity past the largest double,
	// answered as null), for when PostgreSQL refuses this one with "value out of range"
	// (IsOutOfRange); nil when the statement sums nothing that could (aggregations.go).
	IEEE *Query
}

// psql is squirrel with bun's ? placeholders (bun binds them with db.NewRaw).
var psql = sq.StatementBuilder.PlaceholderFormat(sq.Question)

// Inline returns the statement with every argument written as a SQL literal, ready to
// paste into psql (sensorapi compile). It is for display only: the service runs SQL
// with arguments.
func (q Query) Inline() (string, error) {
	return q.InlineWith(func(any) (string, bool) { return "", false })
}

// InlineWith is Inline where subst may write an argument as other SQL text
// (sensorapi compile writes the account id as a lookup of the account's name).
func (q Query) InlineWith(subst func(arg any) (string, bool)) (string, error) {
	var b strings.Builder
	arg := 0
	inQuote := false
	for i := 0; i < len(q.SQL); i++ {
		ch := q.SQL[i]
		switch {
		case ch == '\'':
			inQuote = !inQuote
			b.WriteByte(ch)
		case ch == '?' && !inQuote:
			if arg >= len(q.Args) {
				return "", fmt.Errorf("inline: more placeholders than %d arguments", len(q.Args))
			}
			lit, ok := subst(q.Args[arg])
			if !ok {
				var err error
				if lit, err = literal(q.Args[arg]); err != nil {
					return "", err
				}
			}
			b.WriteString(lit)
			arg++
		default:
			b.WriteByte(ch)
		}
	}
	if arg != len(q.Args) {
		return "", fmt.Errorf("inline: %d placeholders for %d arguments", arg, len(q.Args))
	}
	return b.String(), nil
}

func literal(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "NULL", nil
	case string:
		return "'" + strings.ReplaceAll(x, "'", "''") + "'", nil
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return "", fmt.Errorf("inline: non-finite number")
		}
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	case bool:
		return strconv.FormatBool(x), nil
	case time.Time:
		return "'" + x.UTC().Format("2006-01-02 15:04:05.999999Z07:00") + "'::timestamptz", nil
	case []string:
		parts := make([]string, len(x))
		for i, s := range x {
			parts[i] = "'" + strings.ReplaceAll(s, "'", "''") + "'"
		}
		return "ARRAY[" + strings.Join(parts, ",") + "]::text[]", nil
	case []int64:
		parts := make([]string, len(x))
		for i, n := range x {
			parts[i] = strconv.FormatInt(n, 10)
		}
		return "ARRAY[" + strings.Join(parts, ",") + "]::bigint[]", nil
	}
	return "", fmt.Errorf("inline: unsupported argument type %T", v)
}
