package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/sensordata/sensorapi/cmd/internal/benchharness"
	"github.com/sensordata/sensorapi/pkg/loadgen"
)

// fleetSynthetic, when set (flag -fleet-synthetic, or SENSORAPI_BENCH_FLEET_SYNTHETIC=1),
// measures issue 28's load next to the same fleet without it, in the same run: one
// account whose devices have two synthetic variables each — `({{t}} * 9/5) + 32` on
// the temperature and `mean({{h}}, "1H")` on the humidity, kept up to date live while
// the fleet writes — and one account without, sent to in alternating rounds
// (docs/synthetic.md "Costs").
var fleetSynthetic bool

// fleetSyntheticRounds is how many rounds each side runs, of half the fleet duration
// each, in the order ABBA ABBA... (A without, B with), so that a drift of the machine
// over the run weighs on both sides alike.
const fleetSyntheticRounds = 4

// createFleetSynthetic creates the two synthetic variables on each fleet device.
func createFleetSynthetic(ctx context.Context, url, tok string) error {
	c := &loadgen.Client{HTTP: &http.Client{}, URL: url, Token: tok}
	for dev := range fleetDevices {
		for _, v := range []struct{ label, expr string }{
			{"temperature-f", fmt.Sprintf(`({{fleet-%d.temperature}} * 9/5) + 32`, dev)},
			{"humidity-1h", fmt.Sprintf(`mean({{fleet-%d.humidity}}, \"1H\")`, dev)},
		} {
			body := fmt.Appendf(nil, `{"label":%q,"syntheticExpression":"%s"}`, v.label, v.expr)
			if err := c.Do(ctx, http.MethodPost, fmt.Sprintf("/api/v2.0/devices/~fleet-%d/variables/", dev), body); err != nil {
				return fmt.Errorf("create synthetic variable on fleet-%d: %w", dev, err)
			}
		}
	}
	return nil
}

// fleetSyntheticDefault reads SENSORAPI_BENCH_FLEET_SYNTHETIC.
func fleetSyntheticDefault() bool { return os.Getenv("SENSORAPI_BENCH_FLEET_SYNTHETIC") == "1" }

// fleetSideStats sums one side's rounds.
type fleetSideStats struct {
	messages int64
	elapsed  time.Duration
	wal      int64
	drain    time.Duration // waiting for the synthetic to-do rows to empty after the rounds
	worst    time.Duration // the longest of those waits
	res      []*fleetResult
}

func (s *fleetSideStats) rate() float64 { return float64(s.messages) / s.elapsed.Seconds() }

// fleetSyntheticSides runs the fleet without and with the synthetic variables in
// alternating rounds on two accounts, prints each round, both sides' rates and their
// ratio, and checks that every acknowledged dot of either account is stored.
func fleetSyntheticSides(ctx context.Context, h *benchharness.Harness, d time.Duration, f floors, ceil *ceiling, name string, mk sender) error {
	plainAcct, plainTok, err := newFleetAccount(ctx, h, "fleet_"+name)
	if err != nil {
		return err
	}
	synAcct, synTok, err := newFleetAccount(ctx, h, "fleet_"+name+"_synthetic")
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := createFleetSynthetic(ctx, h.URL, synTok); err != nil {
		return err
	}
	time.Sleep(4 * time.Second) // the settling recompute of each definition is due 3 s after it
	if _, err := drainSynthetic(ctx, h); err != nil {
		return err
	}
	fmt.Printf("  %d synthetic variables created and settled in %.1f s\n", 2*fleetDevices, time.Since(t0).Seconds())
	round := d / 2
	var sides [2]fleetSideStats // 0 without, 1 with
	var label string
	for r := range 2 * fleetSyntheticRounds {
		with := r%4 == 1 || r%4 == 2 // ABBA
		tok := plainTok
		if with {
			tok = synTok
		}
		walBefore, err := walLSN(ctx, h)
		if err != nil {
			return err
		}
		res, l, _, err := runSide(ctx, h, round, mk, h.URL, h.MQTT, tok)
		if err != nil {
			return err
		}
		label = l
		s := &sides[0]
		if with {
			s = &sides[1]
		}
		var wait time.Duration
		if with { // the side's work is done when its recomputes are: the next round starts after them
			if wait, err = drainSynthetic(ctx, h); err != nil {
				return err
			}
		}
		walAfter, err := walLSN(ctx, h)
		if err != nil {
			return err
		}
		s.messages += res.messages
		s.elapsed += res.elapsed
		s.wal += walAfter - walBefore
		s.drain += wait
		s.worst = max(s.worst, wait)
		s.res = append(s.res, res)
		which := "without"
		if with {
			which = "with   "
		}
		fmt.Printf("  round %d %s synthetic: %8.0f msg/s   p50 %6.1f ms  p99 %6.1f ms  errors %d  to-do drained %.2f s after\n",
			r+1, which, res.rate(), ms(res.quantile(0.5)), ms(res.quantile(0.99)), res.errors, wait.Seconds())
	}
	top, _, _, err := runSide(ctx, nil, d, mk, ceil.url, ceil.mqtt, plainTok)
	if err != nil {
		return fmt.Errorf("ceiling: %w", err)
	}
	without, with := merged(sides[0].res), merged(sides[1].res)
	printFleet(label+", without synthetic", without)
	printFleet(label+", with synthetic", with)
	printFleet("  ceiling: parse and discard, no database", top)
	fmt.Printf("  %s without synthetic / naive floor: %.2f×   / service path 1 msg/tx: %.2f×   / ceiling: %.0f%%\n",
		name, without.rate()/f.naive.rate(), without.rate()/f.path.rate(), 100*without.rate()/top.rate())
	fmt.Printf("  %s with synthetic / naive floor: %.2f×\n", name, with.rate()/f.naive.rate())
	fmt.Printf("  with %d synthetic variables (°F of every temperature, a 1H mean of every humidity): %.0f msg/s against %.0f without: %.1f%% (target ≥ 90%%)\n",
		2*fleetDevices, sides[1].rate(), sides[0].rate(), 100*sides[1].rate()/sides[0].rate())
	// a side that leaves its recomputes behind only defers its cost: counted with the
	// time its to-do took to drain after each round, it is the rate it sustains
	sustained := float64(sides[1].messages) / (sides[1].elapsed + sides[1].drain).Seconds()
	fmt.Printf("  counting the drains, with synthetic sustains %.0f msg/s: %.1f%% of without\n", sustained, 100*sustained/sides[0].rate())
	fmt.Printf("  WAL %.0f B/message without, %.0f with;  to-do drained after the rounds with: %.2f s in all, at most %.2f s\n",
		float64(sides[0].wal)/float64(max(sides[0].messages, 1)), float64(sides[1].wal)/float64(max(sides[1].messages, 1)),
		sides[1].drain.Seconds(), sides[1].worst.Seconds())
	for i, acct := range []int64{plainAcct, synAcct} {
		stored, err := storedDots(ctx, h, acct)
		if err != nil {
			return err
		}
		stored -= int64(fleetDevices * len(fleetVariables)) // the warm-up messages
		if acked := sides[i].messages * int64(len(fleetVariables)); stored != acked {
			return fmt.Errorf("fleet %s (side %d): %d dots stored but %d acknowledged", name, i, stored, acked)
		}
	}
	return nil
}

// merged is the rounds' results as one (rate over their summed time, their latencies).
func merged(rs []*fleetResult) *fleetResult {
	var out fleetResult
	for _, r := range rs {
		out.messages += r.messages
		out.errors += r.errors
		out.elapsed += r.elapsed
		out.latencies = append(out.latencies, r.latencies...)
	}
	slices.Sort(out.latencies)
	return &out
}

// drainSynthetic waits until no synthetic to-do row is left (due or not) and says how
// long it waited.
func drainSynthetic(ctx context.Context, h *benchharness.Harness) (time.Duration, error) {
	start := time.Now()
	for {
		var left bool
		if err := h.DB.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM synthetic_dirty)`).Scan(&left); err != nil {
			return 0, err
		}
		if !left {
			return time.Since(start), nil
		}
		if time.Since(start) > 5*time.Minute {
			return 0, fmt.Errorf("synthetic to-do rows still there after 5 minutes")
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
