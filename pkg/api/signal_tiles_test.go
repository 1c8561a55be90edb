package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	compiler "github.com/sensordata/sensorapi/pkg/analytics"
	"github.com/sensordata/sensorapi/pkg/store"
	"github.com/sensordata/sensorapi/querybuilder"
	"github.com/sensordata/sensorapi/querybuilder/tiers"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// signalPaths replays the fixture's E8 and E9 property cases (random ranges, methods,
// max_gap, periods and zones over irregular series; numpy's answers) through the
// compiler with the tile bounds set by hand, on the real database: the raw path (tiles
// complete before the epoch: none taken), and the tile path while the tiles are behind
// (complete only before the median value; the minute tiles after it missing and
// the later quarters and days holding wrong insides and edges, in a transaction that is
// rolled back, so nothing else sees them). Both must give numpy's answers; the tile path
// must read tiles in most cases. The HTTP runs of TestSignalAnalytics are the tile path
// with every tile complete.
func signalPaths(t *testing.T, ids map[string]string, vars map[string]*testenv.Var, fx signalFixture) {
	ctx := context.Background()
	var keys, all []int64
	for _, v := range vars {
		keys = append(keys, v.Key)
		for _, p := range v.Pts {
			all = append(all, p.TS)
		}
	}
	slices.Sort(all)
	var account int64
	if err := env.DB.Pool.QueryRow(ctx, `SELECT account_id FROM variables WHERE id = $1`, keys[0]).Scan(&account); err != nil {
		t.Fatal(err)
	}
	// behind: the median value's minute, inside most ranges of the cases
	raw, behind := time.UnixMilli(0).UTC(), time.UnixMilli(tiers.Minutes.Floor(all[len(all)/2])).UTC()
	t.Run("raw", func(t *testing.T) {
		if tiled := replayPaths(t, env.DB.DB, fx, ids, account, raw); tiled != 0 {
			t.Fatalf("%d cases read tiles complete only before the epoch", tiled)
		}
	})
	t.Run("behind", func(t *testing.T) {
		tx, err := env.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		for _, tier := range tiers.All {
			past := fmt.Sprintf(`variable_id = ANY(?) AND tile + INTERVAL '%d seconds' > ?`, int64(tier.Width.Seconds()))
			stmt := `UPDATE ` + tier.Table + ` SET first_value = first_value + 1e6, last_value = last_value - 1e6,
				area_locf = area_locf + 1e9, area_linear = area_linear - 1e9, increase = increase + 1e9, longest_ms = 0 WHERE ` + past
			if tier == tiers.Minutes {
				stmt = `DELETE FROM ` + tier.Table + ` WHERE ` + past
			}
			if _, err := tx.NewRaw(stmt, store.BindArgs([]any{keys})[0], behind).Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if tiled := replayPaths(t, tx, fx, ids, account, behind); tiled < len(fx.Property)/4 {
			t.Fatalf("only %d cases read tiles", tiled)
		}
	})
}

// replayPaths runs the E8 and E9 property cases compiled with tiles complete before
// until on db and compares them with the fixture; it returns how many read tiles.
func replayPaths(t *testing.T, db bun.IDB, fx signalFixture, ids map[string]string, account int64, until time.Time) int {
	tiled := 0
	for _, pc := range fx.Property {
		if pc.Kind == "statistics" {
			continue
		}
		body, _ := withIDs(pc.Body, ids)
		raw, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		b := compiler.Bounds{RollupsUntil: &until}
		var q querybuilder.Query
		var shape func([]compiler.Row) compiler.Response
		if pc.Kind == "resample" {
			r, rq, err := compiler.CompileResample(raw, account, b)
			if err != nil {
				t.Fatal(err)
			}
			q, shape = rq, r.Shape
		} else {
			a, aq, err := compiler.CompileAggregation(raw, account, b)
			if err != nil {
				t.Fatal(err)
			}
			q, shape = aq, a.Shape
		}
		if strings.Contains(strings.Join(q.Notes, " "), "whole tiles") {
			tiled++
		}
		var rows []compiler.Row
		if err := db.NewRaw(q.SQL, store.BindArgs(q.Args)...).Scan(context.Background(), &rows); err != nil {
			t.Fatalf("%s: %v", pc.Name, err)
		}
		got, err := json.Marshal(shape(rows).Results)
		if err != nil {
			t.Fatal(err)
		}
		if err := sameResults(testenv.DecodeNumbers(t, pc.Expected), testenv.DecodeNumbers(t, got)); err != nil {
			t.Errorf("%s (tiles before %s): %v\nbody %s\n got %s\nwant %s\n%s", pc.Name, until.Format(time.RFC3339), err, raw, got, pc.Expected,
				strings.Join(q.Notes, "\n"))
		}
	}
	return tiled
}
