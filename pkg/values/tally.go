package values

import "time"

// tally is what Staging.Write must know of the staged rows, taken as they stream by,
// per slot: the count and span, the newest row (the last line of the newest
// timestamp), whether the timestamps ran one way (then no two rows share one), and
// the UTC days of the rows older than PackedAge (the only ones a packed day can hold).
// Its size grows with the slots and days, never with the rows.
type tally struct {
	slots  []slotTally
	cutoff int64 // ms: rows before it may fall in a packed day
}

type slotTally struct {
	n        int64
	from, to int64
	last     Row
	prev     int64 // the previous row's timestamp
	dir      int   // +1 rising, -1 falling, 0 not known yet (n < 2), 2 neither
	days     map[int64]struct{}
	lastDay  int64
}

func newTally() *tally { return &tally{cutoff: time.Now().Add(-PackedAge).UnixMilli()} }

const dayMs = int64(24 * time.Hour / time.Millisecond)

// add counts one row.
func (t *tally) add(r StagedRow) {
	for len(t.slots) <= r.Slot {
		t.slots = append(t.slots, slotTally{})
	}
	s := &t.slots[r.Slot]
	if s.n == 0 {
		s.from, s.to = r.TS, r.TS
	} else {
		s.from, s.to = min(s.from, r.TS), max(s.to, r.TS)
		s.dir = direction(s.dir, s.prev, r.TS)
	}
	if s.n == 0 || r.TS >= s.last.TS { // a later line with the newest timestamp wins
		s.last.TS, s.last.Value = r.TS, r.Value
		s.last.Context = append(s.last.Context[:0], r.Context...)
		if r.Context == nil {
			s.last.Context = nil
		}
	}
	s.prev = r.TS
	s.n++
	if r.TS < t.cutoff {
		day := r.TS - ((r.TS%dayMs)+dayMs)%dayMs // floor, also before 1970
		if s.days == nil || day != s.lastDay {
			if s.days == nil {
				s.days = map[int64]struct{}{}
			}
			s.days[day], s.lastDay = struct{}{}, day
		}
	}
}

// direction is a slot's direction after a step from prev to ts.
func direction(dir int, prev, ts int64) int {
	step := 0
	switch {
	case ts > prev:
		step = 1
	case ts < prev:
		step = -1
	}
	switch {
	case step == 0, dir == 2, dir != 0 && dir != step:
		return 2
	}
	return step
}

// oneWay tells whether every slot's timestamps ran one way: no (slot, ts) twice.
func (t *tally) oneWay() bool {
	for _, s := range t.slots {
		if s.dir == 2 {
			return false
		}
	}
	return true
}

// oldDays are the (variable, day) pairs of the rows older than the cutoff.
func (t *tally) oldDays(keys []int64) ([]int64, []time.Time) {
	var vars, starts []int64
	for i, s := range t.slots {
		for d := range s.days {
			vars, starts = append(vars, keys[i]), append(starts, d)
		}
	}
	return vars, millisToTimes(starts)
}
