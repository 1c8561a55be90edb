// Package tiers names the rollup tiers of "values" and decides which of them can
// answer a calendar question in a time zone. Choosing a tier is planning, so it lives
// with the compiler (querybuilder reads the coarsest tiers that fit a request); the
// values store (pkg/values), which keeps every tier exact, imports it from here.
//
// Each tier is a hypertable of tiles: per variable and per UTC-aligned interval of the
// tier's width holding at least one value, the tile's count, sum, min and max, its
// spread (ks: Σ(v − min), m2: Σ squared deviations from the mean, merged with Chan et
// al.'s formula), its first and last dot, and the earliest timestamps of its min and
// max (sql/20261124000005_tiers.up.sql).
package tiers

import "time"

// Tier is one rollup table and the width of its tiles.
type Tier struct {
	Table string
	Width time.Duration
}

// WidthMs is the tile width in milliseconds.
func (t Tier) WidthMs() int64 { return t.Width.Milliseconds() }

// Floor is the start of the tile holding the instant ms (epoch milliseconds, also
// before 1970).
func (t Tier) Floor(ms int64) int64 {
	w := t.WidthMs()
	f := ms / w * w
	if f > ms {
		f -= w
	}
	return f
}

// Ceil is the start of the first tile beginning at or after ms.
func (t Tier) Ceil(ms int64) int64 {
	f := t.Floor(ms)
	if f < ms {
		f += t.WidthMs()
	}
	return f
}

// The tiers, finest first. Each width divides the next, so a coarser tile is a union of
// finer ones and the finer tiers can fill the edges of a range the coarser ones leave.
var (
	Minutes  = Tier{Table: "value_minutes", Width: time.Minute}
	Quarters = Tier{Table: "value_quarters", Width: 15 * time.Minute}
	Days     = Tier{Table: "value_days", Width: 24 * time.Hour}
	All      = []Tier{Minutes, Quarters, Days}
)

// FitZone tells whether tiles of width w never straddle a calendar boundary of zone loc
// (a local midnight, or any instant where local time jumps) during [from, to]: every
// UTC offset in effect then is a whole multiple of w, and so is every instant where the
// offset changes. Then local midnights fall on tile edges, the offset is constant inside
// each tile (tz data has no two changes within a week of each other, so none within a
// tile), and a tile's local dates, weeks, months and n-minute or n-hour buckets counted
// from a local midnight are one bucket each.
//
// The offsets in the tz database are whole multiples of 15 minutes from 1980 on (Pacific/
// Kiritimati was −10:40 until 1979, Africa/Monrovia −0:44:30 until 1972), but several
// zones changed at 00:01 or 23:01 local time until 2011 (America/St_Johns, Goose_Bay,
// Moncton): their days then started on no quarter-hour, so the check looks at the
// changes too, not only at the offsets.
func FitZone(loc *time.Location, from, to time.Time, w time.Duration) bool {
	sec := int64(w / time.Second)
	t := from.Add(-26 * time.Hour) // the local day holding from (a resample origin) starts before it
	for {
		_, off := t.In(loc).Zone()
		if int64(off)%sec != 0 {
			return false
		}
		end := zoneEnd(loc, t)
		if end.IsZero() || end.After(to) {
			return true
		}
		if _, next := end.In(loc).Zone(); next != off && end.Unix()%sec != 0 {
			return false
		}
		t = end
	}
}

// Change is an instant where a zone's UTC offset changes, with the offsets before and
// after it (seconds east of UTC).
type Change struct {
	At            time.Time
	Before, After int
}

// Changes lists the offset changes of loc in (from, to].
func Changes(loc *time.Location, from, to time.Time) []Change {
	var out []Change
	t := from
	for {
		_, off := t.In(loc).Zone()
		end := zoneEnd(loc, t)
		if end.IsZero() || end.After(to) {
			return out
		}
		if _, next := end.In(loc).Zone(); next != off {
			out = append(out, Change{At: end, Before: off, After: next})
		}
		t = end
	}
}

// zoneEnd is when the zone period of loc holding t ends (zero: never). On the last
// day of a leap year past the tz data's explicit changes (Europe/Berlin, 2040-12-31)
// Go's ZoneBounds reports an end at or before t, an artifact of its yearly rule, with
// no change of offset there: the period of a later instant, at most a day on, is asked
// instead.
func zoneEnd(loc *time.Location, t time.Time) time.Time {
	_, end := t.In(loc).ZoneBounds()
	for d := time.Second; !end.IsZero() && !end.After(t); d *= 2 {
		_, end = t.Add(d).In(loc).ZoneBounds()
	}
	return end
}
