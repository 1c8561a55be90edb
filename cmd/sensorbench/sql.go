package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sensordata/sensorapi/cmd/internal/benchharness"
	"github.com/sensordata/sensorapi/pkg/config"
	"github.com/sensordata/sensorapi/pkg/sqlrole"
	"github.com/sensordata/sensorapi/pkg/values"
)

// benchSQL is issue 44's benchmark (API.md §22): an operator's queries through the
// sensor views, as an account's SQL role, next to the same queries on the internal
// tables as the service's own role (the floor), in the same run:
//   - a month of one variable at 10 s by time_bucket('1 hour', ts) mean through
//     sensor.values and through sensor.values_between(from, to), on rows and then,
//     once packed, on packed days (target ≤ 1.5×);
//   - a year of daily means from sensor.values_1d (target: tens of ms).
//
// The variable holds a year; the month is its last 30 days, so the packed case also
// shows what a ts predicate costs on packed days through the view, and what the range
// function saves (docs/sql.md, "Ranges over packed days").
func benchSQL(ctx context.Context, h *benchharness.Harness, scale float64) error {
	fmt.Println("sql (issue 44): operator queries through the sensor views, as an account's role")
	end := time.Now().UTC().Add(-3 * 24 * time.Hour).Truncate(24 * time.Hour)
	points := scaled(365*24*360, scale)
	set, err := loadTierSet(ctx, h, "sql", 1, points, end.Add(-time.Duration(points)*10*time.Second))
	if err != nil {
		return err
	}
	name, password, err := sqlrole.Create(ctx, h.DB.Pool, sqlrole.Spec{Account: "bench_sql",
		StatementTimeout: 10 * time.Minute, Connections: 2})
	if err != nil {
		return err
	}
	defer func() { _ = sqlrole.Drop(context.Background(), h.DB.Pool, name) }()
	dsn, err := sqlrole.ConnString(h.DSN, name, password)
	if err != nil {
		return err
	}
	role, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect as %s: %w", name, err)
	}
	defer func() { _ = role.Close(context.Background()) }()
	if _, err := h.DB.ExecContext(ctx, `VACUUM ANALYZE`); err != nil {
		return err
	}
	month := sqlMonth{id: set.ids[0], key: set.keys[0], from: set.end.Add(-30 * 24 * time.Hour), to: set.end}
	if err := month.run(ctx, h, role, "rows", 1.5); err != nil {
		return err
	}
	p := &values.Packer{Store: &values.Store{Pool: h.DB.Pool}, After: config.DefaultPackAfter, Log: slog.Default(),
		Workers: values.DefaultWorkers}
	res, err := p.Run(ctx)
	if err != nil {
		return err
	}
	if _, err := h.DB.ExecContext(ctx, `VACUUM ANALYZE`); err != nil {
		return err
	}
	fmt.Printf("  packed %d days (%d points)\n", res.Days, res.Points)
	if err := month.run(ctx, h, role, "packed days", 1.5); err != nil {
		return err
	}
	return benchYearOfDays(ctx, h, role, set)
}

// sqlMonth is the month-by-hour case over one variable.
type sqlMonth struct {
	id       string
	key      int64
	from, to time.Time
}

func (m sqlMonth) run(ctx context.Context, h *benchharness.Harness, role *pgx.Conn, layout string, target float64) error {
	lit := func(t time.Time) string { return "'" + t.Format(time.RFC3339) + "'" }
	view := fmt.Sprintf(`SELECT time_bucket('1 hour', ts) AS hour, avg(value) FROM sensor.values
		WHERE variable_id = '%s' AND ts >= %s AND ts < %s GROUP BY 1 ORDER BY 1`, m.id, lit(m.from), lit(m.to))
	// values_between includes its upper bound, as $__timeFilter does; ts < to keeps the
	// month half-open like the others (and shows an outer predicate reaching inside).
	between := fmt.Sprintf(`SELECT time_bucket('1 hour', ts) AS hour, avg(value) FROM sensor.values_between(%s, %s)
		WHERE variable_id = '%s' AND ts < %s GROUP BY 1 ORDER BY 1`, lit(m.from), lit(m.to), m.id, lit(m.to))
	floor := fmt.Sprintf(`SELECT time_bucket('1 hour', ts) AS hour, avg(value) FROM (
		SELECT ts, value FROM "values" WHERE variable_id = %d AND ts >= %s AND ts < %s
		UNION ALL
		SELECT ts, value FROM packed_values(ARRAY[%d::bigint], %s, %s) WHERE ts < %s) x
		GROUP BY 1 ORDER BY 1`, m.key, lit(m.from), lit(m.to), m.key, lit(m.from), lit(m.to), lit(m.to))
	t, err := measureAll(rowsOf(ctx, role, view, 720), rowsOf(ctx, role, between, 720), rowsOf(ctx, poolConn{h}, floor, 720))
	if err != nil {
		return fmt.Errorf("month by hour (%s): %w", layout, err)
	}
	fmt.Printf("  month by hour, %-11s sensor.values %8.1f ms (%.2f×)   sensor.values_between %8.1f ms (%.2f×)   "+
		"internal tables %8.1f ms   (target ≤ %.1f×)\n",
		layout, ms(t[0]), ms(t[0])/ms(t[2]), ms(t[1]), ms(t[1])/ms(t[2]), ms(t[2]), target)
	if err := printPlan(ctx, role, view); err != nil {
		return err
	}
	return printPlan(ctx, role, between)
}

// benchYearOfDays reads a year of daily means from sensor.values_1d, next to value_days.
func benchYearOfDays(ctx context.Context, h *benchharness.Harness, role *pgx.Conn, set tierSet) error {
	lit := func(t time.Time) string { return "'" + t.Format(time.RFC3339) + "'" }
	from := set.end.Add(-365 * 24 * time.Hour)
	view := fmt.Sprintf(`SELECT bucket, mean FROM sensor.values_1d
		WHERE variable_id = '%s' AND bucket >= %s AND bucket < %s ORDER BY bucket`, set.ids[0], lit(from), lit(set.end))
	floor := fmt.Sprintf(`SELECT tile, sum / n FROM value_days
		WHERE variable_id = %d AND tile >= %s AND tile < %s ORDER BY tile`, set.keys[0], lit(from), lit(set.end))
	days := int(min(set.end.Sub(from), set.end.Sub(set.start)) / (24 * time.Hour))
	tv, tf, err := measurePair(rowsOf(ctx, role, view, days), rowsOf(ctx, poolConn{h}, floor, days))
	if err != nil {
		return fmt.Errorf("year of days: %w", err)
	}
	fmt.Printf("  year of daily means   sensor.values_1d %6.1f ms   value_days %8.1f ms   (target: tens of ms)\n", ms(tv), ms(tf))
	if err := printPlan(ctx, role, view); err != nil {
		return err
	}
	fmt.Println()
	return nil
}

// querier is a role's connection or the service's pool.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

type poolConn struct{ h *benchharness.Harness }

func (p poolConn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return p.h.DB.Pool.Query(ctx, sql, args...)
}

// rowsOf runs q and checks it returned at least want rows (the data is there).
func rowsOf(ctx context.Context, db querier, q string, want int) func() error {
	return func() error {
		rows, err := db.Query(ctx, q)
		if err != nil {
			return err
		}
		n := 0
		for rows.Next() {
			n++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if n < want*9/10 {
			return fmt.Errorf("%d rows, want ~%d: %s", n, want, q)
		}
		return nil
	}
}

// printPlan prints the plan's node lines (EXPLAIN ANALYZE, as the role), indented: the
// essence docs/sql.md quotes.
func printPlan(ctx context.Context, role *pgx.Conn, q string) error {
	rows, err := role.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, SUMMARY ON) "+q)
	if err != nil {
		return err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "Buffers:") || strings.HasPrefix(t, "Planning:") {
			continue
		}
		fmt.Println("      " + l)
	}
	return nil
}
