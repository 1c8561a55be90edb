package querybuilder

import (
	"fmt"
	"slices"
	"strings"
	"time"

	sq "github.com/Masterminds/squirrel"

	"github.com/sensordata/sensorapi/querybuilder/tiers"
)

// VariableRef names one requested variable as the client did: by public id, or by
// label within a device named by public id or label. Empty strings are "not given";
// keys that can match nothing are passed through and simply find no row.
type VariableRef struct {
	VariableID, VariableLabel string
	DeviceID, DeviceLabel     string
}

// StatisticsRequest is a validated E7 request. Start and End are inclusive.
type StatisticsRequest struct {
	AccountID    int64
	Start, End   time.Time
	Variables    []VariableRef
	Aggregations []string
	TierBounds
	Signal // time-aware aggregations only
}

// Result columns of the statistics statement, one row per requested variable in
// request order (ord is 1-based). The device_* and variable_* columns are NULL when the
// reference matched nothing in the account; the aggregate columns exist only for the
// aggregations requested.
const (
	ColOrd     = "ord"
	ColHasData = "has_data" // the range holds at least one value
	ColN       = "n"        // count(*), present whenever the rows are scanned
)

// reqCTE lists the references with their position, so that every entry yields a row
// (found or not) and the answer keeps request order.
const reqCTE = `WITH req AS (
    SELECT *
    FROM unnest(?::text[], ?::text[], ?::text[], ?::text[]) WITH ORDINALITY
        AS r(variable_id, variable_label, device_id, device_label, ord)
)`

// lookups find a reference's variable and device within the account (r: the
// reference; v, d: the variable and its device). Each is one unique-index lookup
// (variables.public_id; devices.public_id or (account_id, label), then variables
// (device_id, label)) and they exclude each other, so at most one matches. finds says
// whether a lookup can match a reference at all.
var lookups = []struct {
	sql   string
	finds func(VariableRef) bool
}{
	{`variables v JOIN devices d ON d.id = v.device_id
    WHERE v.account_id = ? AND v.public_id = r.variable_id
      AND (r.device_id = '' OR d.public_id = r.device_id)
      AND (r.device_label = '' OR d.label = r.device_label)`,
		func(r VariableRef) bool { return r.VariableID != "" }},
	{`devices d JOIN variables v ON v.device_id = d.id
    WHERE d.account_id = ? AND r.variable_id = '' AND d.public_id = r.device_id AND v.label = r.variable_label`,
		func(r VariableRef) bool { return r.VariableID == "" && r.DeviceID != "" }},
	{`devices d JOIN variables v ON v.device_id = d.id
    WHERE d.account_id = ? AND r.variable_id = '' AND d.label = r.device_label AND v.label = r.variable_label`,
		func(r VariableRef) bool { return r.VariableID == "" && r.DeviceLabel != "" }},
}

// resolveJoin joins every reference r to its variable and device: a LATERAL over the
// lookups, where a miss leaves NULLs (a per-entry 404).
var resolveJoin = func() string {
	b := "LEFT JOIN LATERAL (\n"
	for i, l := range lookups {
		if i > 0 {
			b += "\n    UNION ALL\n"
		}
		b += `    SELECT v.id, v.public_id, v.label, v.name, v.created_at,
           d.public_id AS device_public_id, d.label AS device_label, d.name AS device_name, d.created_at AS device_created_at
    FROM ` + l.sql
	}
	return b + "\n) v ON true"
}()

// resolvedKeys selects the keys of the variables that refs find, as plain joins of the
// lookups that can find one of them (references by id: one join, not three; each costs
// the planner of every percentile part): unlike the LATERAL, a plan PostgreSQL may hand
// to a parallel worker.
func resolvedKeys(refs []VariableRef, accountID int64) sq.Sqlizer {
	var b []any
	for _, l := range lookups {
		if !slices.ContainsFunc(refs, l.finds) {
			continue
		}
		if len(b) > 0 {
			b = append(b, "\n            UNION ALL\n")
		}
		b = append(b, sq.Expr(`            SELECT v.id
            FROM unnest(?::text[], ?::text[], ?::text[], ?::text[]) AS r(variable_id, variable_label, device_id, device_label),
                 `+l.sql, append(refArrays(refs), accountID)...))
	}
	if len(b) == 0 { // no reference can be found: no key
		return sq.Expr("            SELECT NULL::bigint AS id WHERE false")
	}
	return sq.ConcatExpr(b...)
}

// Statistics compiles an E7 request into one statement: per reference, the variable
// lookup above (res), then the summary rows of its range from the rollup tiers and raw
// edges (tiers.go) for every aggregation but the percentiles. Percentiles need every
// value: GROUP BYs over the raw values of parts of the requested variables (pct),
// which PostgreSQL runs side by side in parallel workers.
// Only requested aggregations appear in it.
func Statistics(r StatisticsRequest) (Query, error) {
	return withIEEE(func(s sums) (Query, error) { return statistics(r, s) })
}

func statistics(r StatisticsRequest, s sums) (Query, error) {
	if len(r.Variables) == 0 {
		return Query{}, fmt.Errorf("statistics: no variables")
	}
	aggs, err := distinctAggregations(r.Aggregations)
	if err != nil {
		return Query{}, err
	}
	start, end := r.Start.UTC(), r.End.UTC()
	c := newCover(&start, &end, len(tiers.All), r.TierBounds)
	notes := c.notes()
	var fractions, pctCols []string
	for _, a := range aggs {
		if a.fraction != "" {
			fractions = append(fractions, a.fraction)
			pctCols = append(pctCols, fmt.Sprintf("p.pct[%d] AS %s_value", len(fractions), a.name))
		}
	}
	prefix := []any{sq.Expr(reqCTE, refArrays(r.Variables)...),
		sq.Expr(",\nres AS (\n    SELECT r.ord, v.*\n    FROM req r "+resolveJoin+"\n)", r.AccountID, r.AccountID, r.AccountID)}
	if len(fractions) > 0 {
		pct, note := percentileCTE(fractions, r, start, end)
		prefix, notes = append(prefix, pct), append(notes, note)
	}
	ctes, cols := summaryCTEs(aggs, c, s)
	tw, twCols, twNotes := signalStatistics(aggs, r, s)
	if tw != nil {
		ctes, notes = sq.ConcatExpr(ctes, tw), append(notes, twNotes...)
		cols = append(append([]string{"(coalesce(s.n, 0) > 0 OR coalesce(tw.cov, 0) > 0) AS " + ColHasData}, cols[1:]...), twCols...)
	}
	b := psql.Select().PrefixExpr(sq.ConcatExpr(append(prefix, ctes)...)).From("res v").
		JoinClause("LEFT JOIN s ON s.variable_id = v.id")
	if tw != nil {
		b = b.JoinClause("LEFT JOIN tw ON tw.variable_id = v.id")
	}
	if slices.ContainsFunc(aggs, func(a aggregation) bool { return a.spread != "" }) {
		b = b.JoinClause("LEFT JOIN sd ON sd.variable_id = v.id")
	}
	if len(fractions) > 0 {
		b, cols = b.JoinClause("LEFT JOIN pct p ON p.variable_id = v.id"), append(cols, pctCols...)
	}
	cols = append(append([]string{}, identityColumns...), cols...)
	sqlStr, args, err := b.Columns(strings.Join(cols, ",\n       ")).OrderBy("v.ord").ToSql()
	if err != nil {
		return Query{}, fmt.Errorf("statistics: build: %w", err)
	}
	return Query{SQL: sqlStr, Args: args, Notes: notes}, nil
}

// percentileParts is how many parts pct deals the references into. An ordered-set
// aggregate has no partial form, so one GROUP BY runs in one process however many
// workers PostgreSQL has; a UNION ALL of GROUP BYs over parts of the variables is a
// Parallel Append, each part whole in one process. Four parts keep two or three
// processes (the default max_parallel_workers_per_gather of 2, plus the leader) busy.
// Measured for 100 variables × a week on 2 cores: 1.8 s in one part, 1.1 s in four
// (docs/queries.md).
const percentileParts = 4

// percentileCTE is pct: the requested fractions of every resolved variable's values in
// [start, end], by one ordered-set aggregate per variable (one sort answers every
// fraction). The references are dealt round-robin into percentileParts parts (the same
// count in each), every part one GROUP BY that resolves its references again (a CTE
// scan or a LATERAL would make the plan parallel restricted) and reads its variables
// in key order: a nested loop of index range scans hands the rows over grouped, with
// no sort of all of them (an IN (...) semi-join hashed the keys and sorted 6 million
// rows on disk: 2.5 s where one part took 1.8 s). A variable referenced twice may be
// in two parts: DISTINCT ON keeps one answer. note says so for explain.
func percentileCTE(fractions []string, r StatisticsRequest, start, end time.Time) (pct sq.Sqlizer, note string) {
	parts := make([][]VariableRef, min(len(r.Variables), percentileParts))
	for i, ref := range r.Variables {
		parts[i%len(parts)] = append(parts[i%len(parts)], ref)
	}
	// Packed days in the range (of any variable: one index probe) switch every part to
	// reading both layouts, per variable (a LATERAL: a join against the union let the
	// planner unnest every packed day of the range for each variable, past the statement
	// timeout); without, each part keeps the plan of rows alone. The two sets of parts
	// are CTEs of their own (MATERIALIZED: planned apart), since in one Append the
	// LATERAL branches, parallel restricted, made the rows' parts run one after the other
	// instead of in a Parallel Append (E on rows 1.59 s instead of 1.0 s, measured). The
	// switch is a one-time filter: the set not taken costs nothing.
	packed := sq.Expr(`EXISTS (SELECT FROM values_packed WHERE day >= time_bucket(INTERVAL '1 day', ?::timestamptz) AND day <= ?)`, start, end)
	layouts := []struct {
		cte  string
		from sq.Sqlizer
	}{
		{"pct_rows", sq.Expr(`"values" x ON x.variable_id = ids.id AND x.ts BETWEEN ? AND ?
    WHERE NOT `, start, end)},
		{"pct_packed", sq.Expr(`LATERAL (SELECT value FROM "values" WHERE variable_id = ids.id AND ts BETWEEN ? AND ?
        UNION ALL SELECT value FROM packed_dots(?, ?) WHERE variable_id = ids.id) x ON true
    WHERE `, start, end, start, end)},
	}
	var b []any
	for _, layout := range layouts {
		b = append(b, ",\n"+layout.cte+" AS MATERIALIZED (\n")
		for k, refs := range parts {
			if k > 0 {
				b = append(b, "\n    UNION ALL\n")
			}
			b = append(b, `    SELECT ids.id AS variable_id,
           percentile_cont(ARRAY[`+strings.Join(fractions, ", ")+`]::float8[]) WITHIN GROUP (ORDER BY x.value) AS pct
    FROM (
        SELECT DISTINCT k.id FROM (
`, resolvedKeys(refs, r.AccountID), `
        ) k
        ORDER BY k.id
    ) ids
    JOIN `, layout.from, packed, `
    GROUP BY ids.id`)
		}
		b = append(b, "\n)")
	}
	return sq.ConcatExpr(append(b, ",\npct AS (\n  SELECT DISTINCT ON (variable_id) * FROM (SELECT * FROM pct_rows UNION ALL SELECT * FROM pct_packed) parts\n  ORDER BY variable_id\n)")...),
		fmt.Sprintf(`raw values (rows and packed days) for the percentiles, a GROUP BY over each of %d parts of the variables (a Parallel Append)`, len(parts))
}

// identityColumns name the entry and what its reference resolved to (NULLs: not found).
var identityColumns = []string{"v.ord AS " + ColOrd,
	"v.public_id AS variable_id", "v.label AS variable_label", "v.name AS variable_name", "v.created_at AS variable_created_at",
	"v.device_public_id AS device_id", "v.device_label", "v.device_name", "v.device_created_at"}

// distinctAggregations are the entries of the requested aggregations, each once, in
// request order.
func distinctAggregations(requested []string) ([]aggregation, error) {
	var aggs []aggregation
	seen := map[string]bool{}
	for _, name := range requested {
		a, ok := aggregationNamed(name)
		if !ok {
			return nil, fmt.Errorf("statistics: unknown aggregation %q", name)
		}
		if !seen[name] {
			seen[name] = true
			aggs = append(aggs, a)
		}
	}
	return aggs, nil
}

// spreadOf is the sample variance (var_value) of each variable's summary rows
// (variable_id and the columns of summaries), merged by Chan et al.'s parallel
// formula: M2 = Σ m2ᵢ + Σ nᵢ(aᵢ − ā)², each row's mean written as aᵢ = (minᵢ − min) +
// ksᵢ/nᵢ (small numbers however large the values: 1e6 ± 0.01 keeps its digits, where a
// sum of squares would lose them all) and ā their weighted mean. The windows give every
// row its variable's min and ā; a second pass over the summary rows (a few hundred for
// a year), not over the values. A row without a spread (a value beyond ±1e150, whose
// square would overflow) makes the variance null, not an error.
func spreadOf(rows sq.Sqlizer) sq.Sqlizer {
	return sq.ConcatExpr(`SELECT z.variable_id, CASE WHEN count(*) = count(z.m2)
        THEN (sum(z.m2) + sum(z.n * power(z.a - z.abar, 2))) / nullif(sum(z.n) - 1, 0) END AS var_value
    FROM (
        SELECT y.variable_id, y.n, y.m2, y.a, sum(y.n * y.a) OVER pv / sum(y.n) FILTER (WHERE y.m2 IS NOT NULL) OVER pv AS abar
        FROM (
            SELECT w.variable_id, w.n, w.m2,
                   CASE WHEN w.m2 IS NOT NULL THEN (w.min - min(w.min) FILTER (WHERE w.m2 IS NOT NULL) OVER (PARTITION BY w.variable_id)) + w.ks / w.n END AS a
            FROM (
    `, rows, `
            ) w
        ) y
        WINDOW pv AS (PARTITION BY y.variable_id)
    ) z
    GROUP BY z.variable_id`)
}

// VariableStatistic compiles one aggregate of the v1.6 statistics route (mean,
// variance, min, max, sum, count) over one variable's values in [start, end], from
// the same summary rows as E7: count and sum are 0, the others null, without data.
func VariableStatistic(key int64, agg string, start, end time.Time, b TierBounds) (Query, error) {
	return withIEEE(func(s sums) (Query, error) { return variableStatistic(key, agg, start, end, b, s) })
}

func variableStatistic(key int64, agg string, start, end time.Time, b TierBounds, s sums) (Query, error) {
	start, end = start.UTC(), end.UTC()
	c := newCover(&start, &end, len(tiers.All), b)
	rows := summaries("(SELECT id FROM k)", c, summaryColumns)
	st, ok := v16StatisticNamed(agg)
	var stmt sq.Sqlizer
	switch {
	case !ok:
		return Query{}, fmt.Errorf("statistic: unknown aggregate %q", agg)
	case st.expr == "":
		stmt = sq.ConcatExpr(sq.Expr("WITH k AS (SELECT ?::bigint AS id)\nSELECT (SELECT var_value FROM (\n    ", key), spreadOf(rows), "\n) s)")
	default:
		stmt = sq.ConcatExpr(sq.Expr("WITH k AS (SELECT ?::bigint AS id)\nSELECT "+s.expand(st.expr)+" FROM (\n    ", key), rows, "\n) x")
	}
	return build(stmt, c.notes())
}

// summaryCTEs answer from the summary rows of every variable's range (tiers.go), in
// one pass for all the variables: pts holds the rows (each branch one index scan for
// all the keys), s aggregates them per variable: count, sum and mean add up; min and
// max are the extreme of the rows with the earliest timestamp holding it (each row
// keeps its own), first and last the rows' earliest first and latest last dot; sd, when
// std is asked, merges their spreads (spreadOf). It returns the CTEs and the output
// columns, read from s and sd joined on the variable.
func summaryCTEs(aggs []aggregation, c cover, s sums) (sq.Sqlizer, []string) {
	exprs := []string{"sum(x.n) AS " + ColN}
	out := []string{"coalesce(s.n, 0) > 0 AS " + ColHasData, "coalesce(s.n, 0) AS " + ColN}
	var spread any = ""
	for _, a := range aggs {
		if a.spread != "" {
			spread = sq.ConcatExpr(",\nsd AS (\n    ", spreadOf(sq.Expr("SELECT * FROM pts")), "\n)")
			out = append(out, a.spread)
			continue
		}
		// percentiles: see percentileCTE
		for _, col := range a.summary {
			col = s.expand(col)
			exprs = append(exprs, col)
			out = append(out, "s."+col[strings.LastIndex(col, " ")+1:])
		}
	}
	return sq.ConcatExpr(",\npts AS (\n    ", summaries("ANY (ARRAY(SELECT id FROM res WHERE id IS NOT NULL))", c, summaryColumns), `
),
s AS (
    SELECT x.variable_id, `+strings.Join(exprs, ",\n           ")+`
    FROM pts x
    GROUP BY x.variable_id
)`, spread), out
}

// refArrays turns the references into four parallel text arrays (an empty string
// means not given).
func refArrays(refs []VariableRef) []any {
	vid := make([]string, len(refs))
	vlabel := make([]string, len(refs))
	did := make([]string, len(refs))
	dlabel := make([]string, len(refs))
	for i, r := range refs {
		vid[i], vlabel[i], did[i], dlabel[i] = r.VariableID, r.VariableLabel, r.DeviceID, r.DeviceLabel
	}
	return []any{vid, vlabel, did, dlabel}
}
