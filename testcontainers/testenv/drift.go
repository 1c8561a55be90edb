package testenv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sensordata/sensorapi/querybuilder"
	"github.com/sensordata/sensorapi/querybuilder/tiers"
)

// DriftScope is the first variable key a RollupDrift check looks at: the variables
// created since a test began (NewDriftScope), deleted ones included, whoever created
// them. A write that updated the wrong variable's tiles leaves its own variable's
// tiles wrong, which the scope sees; the data of the tests before it is not scanned
// again on every check (a whole-database check cost ~5 s of the database's time each,
// a third of this package's serial phase: docs/testing.md).
type DriftScope int64

// NewDriftScope is the scope of the variables created from now on.
func (e *Env) NewDriftScope(t testing.TB) DriftScope {
	t.Helper()
	var last int64
	if err := e.DB.Pool.QueryRow(context.Background(), `SELECT coalesce(max(id), 0) FROM variables`).Scan(&last); err != nil {
		t.Fatal(err)
	}
	return DriftScope(last + 1)
}

// RollupDrift counts the (variable, tile) pairs of the scope's variables, in every tier,
// where the tier differs from the rollup recomputed from the raw values right now
// (driftSource): every committed transaction keeps the two equal, whatever else runs
// (the tiles that end by their variable's rollups_until, pkg/values rollupmark.go).
// rollups counts the minute tiles.
func (e *Env) RollupDrift(t testing.TB, scope DriftScope) (drift, rollups int) {
	t.Helper()
	for _, tier := range tiers.All {
		var d, n int
		width := fmt.Sprintf("%d seconds", int64(tier.Width.Seconds()))
		// m2 from values shifted by their tile's min: a one-pass var_pop of 1e6 ± 0.01
		// is itself off by 1e-8. A sum's rounding depends on the order of its terms
		// (the plan's), up to ~n·ε·Σ|value|: 1e308 − 1e308 + 1.2e22 is 1.2e22 or 0.
		err := e.DB.NewRaw(`WITH truth AS (
			SELECT variable_id, tile,
			       count(*)::int AS n, `+querybuilder.SumSQL("value")+` AS sum, sum(abs(value)::numeric) AS sumabs, min(value) AS min, max(value) AS max,
			       CASE WHEN max(abs(value)) <= 1e150 AND NOT bool_or(value <> 0 AND abs(value) < 1e-100) -- no spread beyond: it would overflow or underflow
			           THEN var_pop(value - lo) FILTER (WHERE abs(value) <= 1e150 AND abs(lo) <= 1e150) * count(*) END AS m2, min(ts) AS first_ts, max(ts) AS last_ts,
			       (array_agg(value ORDER BY ts))[1] AS first_value, (array_agg(value ORDER BY ts DESC))[1] AS last_value,
			       (array_agg(ts ORDER BY value, ts))[1] AS min_ts, (array_agg(ts ORDER BY value DESC, ts))[1] AS max_ts,
			       -- the signal inside (time-aware aggregations), unless a value lies beyond the spread's limits
			       CASE WHEN bool_and(ok) THEN coalesce(sum(pv * dt) FILTER (WHERE ok AND pok), 0) END AS area_locf,
			       CASE WHEN bool_and(ok) THEN coalesce(sum((pv + value) / 2 * dt) FILTER (WHERE ok AND pok), 0) END AS area_linear,
			       CASE WHEN bool_and(ok) THEN coalesce(sum(CASE WHEN value < pv THEN value ELSE value - pv END) FILTER (WHERE ok AND pok), 0) END AS increase,
			       CASE WHEN bool_and(ok) THEN coalesce(max(dt), 0) END AS longest_ms
			FROM (SELECT x.*, (x.value = 0 OR abs(x.value) BETWEEN 1e-100 AND 1e150) AS ok, (x.pv = 0 OR abs(x.pv) BETWEEN 1e-100 AND 1e150) AS pok
			      FROM (SELECT x.*, time_bucket(?::interval, x.ts) AS tile,
			                   min(x.value) OVER (PARTITION BY x.variable_id, time_bucket(?::interval, x.ts)) AS lo,
			                   lag(x.value) OVER d AS pv, (extract(epoch FROM x.ts - lag(x.ts) OVER d) * 1000)::bigint AS dt
			            FROM `+driftSource(tier, scope)+` x
			            WHERE x.variable_id >= ?
			            WINDOW d AS (PARTITION BY x.variable_id, time_bucket(?::interval, x.ts) ORDER BY x.ts)) x) x
			GROUP BY 1, 2
		)
		SELECT count(*) FILTER (WHERE t.n IS DISTINCT FROM m.n OR t.min IS DISTINCT FROM m.min
		                          OR t.max IS DISTINCT FROM m.max OR t.sum IS NULL OR m.sum IS NULL
		                          OR CASE WHEN abs(t.sum) < 'Infinity' AND abs(m.sum) < 'Infinity' -- IEEE sums: ±Infinity past the largest double
		                              THEN abs(t.sum::numeric - m.sum::numeric) > 1e-9 * greatest(1, t.sumabs)
		                              ELSE t.sum IS DISTINCT FROM m.sum END
		                          OR (t.m2 IS NULL) <> (m.m2 IS NULL) OR abs(t.m2 - m.m2) > 1e-9 * greatest(1, t.m2)
		                          OR t.first_ts IS DISTINCT FROM m.first_ts OR t.last_ts IS DISTINCT FROM m.last_ts
		                          OR t.first_value IS DISTINCT FROM m.first_value OR t.last_value IS DISTINCT FROM m.last_value
		                          OR t.min_ts IS DISTINCT FROM m.min_ts OR t.max_ts IS DISTINCT FROM m.max_ts
		                          OR t.longest_ms IS DISTINCT FROM m.longest_ms
		                          OR CASE WHEN t.longest_ms IS NOT NULL AND m.longest_ms IS NOT NULL -- values within ±1e150: no overflow
		                              THEN abs(t.area_locf - m.area_locf) > 1e-9 * (abs(t.area_locf) + greatest(abs(t.min), abs(t.max), 1) * ?)
		                                OR abs(t.area_linear - m.area_linear) > 1e-9 * (abs(t.area_linear) + greatest(abs(t.min), abs(t.max), 1) * ?)
		                                OR abs(t.increase - m.increase) > 1e-9 * (abs(t.increase) + greatest(abs(t.min), abs(t.max), 1) * t.n) END),
		       count(m.n)
		FROM truth t FULL JOIN (SELECT * FROM `+tier.Table+` WHERE variable_id >= ?) m USING (variable_id, tile)
		LEFT JOIN variables v ON v.id = variable_id
		WHERE `+tileComplete(tier, "tile"), width, width, scope, width, tier.Width.Milliseconds(), tier.Width.Milliseconds(), scope).
			Scan(context.Background(), &d, &n)
		if err != nil {
			t.Fatal(err)
		}
		drift += d
		if tier == tiers.Minutes {
			rollups = n
		}
	}
	return drift, rollups
}

// tileComplete is the condition on tier's tiles (their start: the column tile) that
// must be exact: those that end by their variable's rollups_until (v: the variable,
// none when it was deleted).
func tileComplete(tier tiers.Tier, tile string) string {
	return fmt.Sprintf("(v.id IS NULL OR %s + INTERVAL '%d seconds' <= v.rollups_until)", tile, int64(tier.Width.Seconds()))
}

// driftSource is what a tier summarises: the minute tier the rows of "values" (packed
// days have no minute tiles), the coarser tiers both layouts.
func driftSource(tier tiers.Tier, scope DriftScope) string {
	if tier == tiers.Minutes {
		return `"values"`
	}
	return fmt.Sprintf(`(SELECT variable_id, ts, value FROM "values"
		UNION ALL SELECT variable_id, ts, value FROM packed_values(ARRAY(SELECT id FROM variables WHERE id >= %d), '-infinity', 'infinity'))`, scope)
}

// DenseAcrossEpoch is a series a few seconds apart (irregular milliseconds, several
// values a minute, ties everywhere) from before 1973-01-01, where minute rollups are
// not used, to after.
func DenseAcrossEpoch(n int) []Point {
	rng := rand.New(rand.NewPCG(3, 9))
	pts := make([]Point, n)
	ts := int64(94_694_400_000) - 40*60_000 // 1972-12-31T23:20Z
	for i := range pts {
		ts += 1 + rng.Int64N(7_000)
		pts[i] = Point{TS: ts, Value: float64(rng.IntN(9)-4) / 2}
	}
	return pts
}
