package querybuilder

import (
	"fmt"
	"time"

	sq "github.com/Masterminds/squirrel"

	"github.com/sensordata/sensorapi/querybuilder/tiers"
)

// zonePlan is how a resample request's buckets meet the tiers: how many tiers (finest
// first) fit its period and zone over its range, and the zone's UTC offsets over that
// range as the service's tz data has them, for zoneCheck.
type zonePlan struct {
	usable  int
	periods []zonePeriod
	why     string
}

// zonePeriod is a stretch of time [from, to] (epoch ms, inclusive) with one UTC offset.
type zonePeriod struct {
	from, to, offset int64
}

// planZone decides which tiers can serve buckets of period p in zone over [start, end]
// (nil ends: from the epoch, to now). A tier fits when its width divides the bucket
// grid: n-minute and n-hour buckets are counted from a local midnight, so the width
// must divide the period and local midnights must fall on tile edges; days, weeks and
// months start at local midnights. tiers.FitZone checks the zone's offsets and changes
// over the range (and the day before it: a resample origin is the local midnight of
// the earliest value's day).
func planZone(p Period, zone string, start, end *time.Time) zonePlan {
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return zonePlan{why: fmt.Sprintf("zone %s: unknown to the service's tz data: raw values only", zone)}
	}
	from, to := time.UnixMilli(0).UTC(), time.Now().UTC()
	if start != nil {
		from = *start
	}
	if end != nil {
		to = *end
	}
	zp := zonePlan{periods: zonePeriods(loc, from.Add(-26*time.Hour), to)}
	for _, t := range tiers.All {
		if !dividesPeriod(p, t.Width) {
			zp.why = fmt.Sprintf("%s tiles do not divide %s buckets", t.Table, p)
			break
		}
		if !tiers.FitZone(loc, from, to, t.Width) {
			zp.why = fmt.Sprintf("%s tiles straddle local midnights or offset changes of %s in the range", t.Table, zone)
			break
		}
		zp.usable++
	}
	if zp.usable == len(tiers.All) {
		zp.why = fmt.Sprintf("%s keeps local midnights on every tier's tile edges over the range", zone)
	}
	return zp
}

// dividesPeriod tells whether tiles of width w lie each inside one bucket of period p,
// given that local midnights fall on tile edges.
func dividesPeriod(p Period, w time.Duration) bool {
	switch p.Unit {
	case Minute:
		return (time.Duration(p.N)*time.Minute)%w == 0
	case Hour:
		return (time.Duration(p.N)*time.Hour)%w == 0
	}
	return w <= 24*time.Hour
}

// zonePeriods lists the stretches of constant UTC offset of loc over [from, to].
func zonePeriods(loc *time.Location, from, to time.Time) []zonePeriod {
	var out []zonePeriod
	at := from
	for _, c := range tiers.Changes(loc, from, to) {
		_, off := at.In(loc).Zone()
		out = append(out, zonePeriod{at.UnixMilli(), c.At.UnixMilli() - 1, int64(off)})
		at = c.At
	}
	_, off := at.In(loc).Zone()
	return append(out, zonePeriod{at.UnixMilli(), to.UnixMilli(), int64(off)})
}

// zoneCheck is a one-row CTE body: ok tells whether the database's tz data gives zone
// the offsets the service planned with, at both ends of every stretch of constant
// offset and every 7 days inside it (sparser beyond 5,000 samples). The buckets are computed by the database: where
// its tz data differs from the service's (another tzdata release), the statement reads
// raw values instead of tiles that might straddle its bucket edges.
func zoneCheck(zone string, zp zonePlan) sq.Sqlizer {
	from, to, off := make([]int64, len(zp.periods)), make([]int64, len(zp.periods)), make([]int64, len(zp.periods))
	for i, p := range zp.periods {
		from[i], to[i], off[i] = p.from, p.to, p.offset
	}
	// every 7 days, or sparser over very long ranges (to the year 9999: 5,000 samples)
	step := int64(7 * 24 * 3600)
	if n := len(zp.periods); n > 0 {
		step = max(step, (zp.periods[n-1].to-zp.periods[0].from)/1000/5000)
	}
	return sq.Expr(`SELECT coalesce(bool_and((s.at AT TIME ZONE ?) - (s.at AT TIME ZONE 'UTC') = make_interval(secs => p.off)), true) AS ok
  FROM unnest(?::bigint[], ?::bigint[], ?::bigint[]) AS p(lo, hi, off)
  CROSS JOIN LATERAL (
    SELECT generate_series(to_timestamp(p.lo / 1000.0), to_timestamp(p.hi / 1000.0), make_interval(secs => ?)) AS at
    UNION ALL
    SELECT to_timestamp(p.hi / 1000.0)
  ) s`, zone, from, to, off, step)
}

// notes describe the plan for explain answers.
func (zp zonePlan) notes() []string {
	return []string{"tiers: " + zp.why}
}

// ZoneCheck is zoneCheck alone, as a statement answering one boolean (ok): whether
// the database's tz data gives zone the UTC offsets the service's tz data gives it over
// [from, to]. Resample statements carry the same check; this one lets a test run it
// against a database on its own.
func ZoneCheck(zone string, from, to time.Time) (Query, error) {
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return Query{}, fmt.Errorf("zone check: %w", err)
	}
	return build(sq.ConcatExpr("SELECT ok FROM (\n  ", zoneCheck(zone, zonePlan{periods: zonePeriods(loc, from, to)}), "\n) z"), nil)
}
