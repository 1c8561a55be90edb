// Package events watches variables with conditions and runs actions when a condition
// starts or stops holding (API.md §18, docs/events.md).
//
// The state machine of an event lives in a row of event_states. Every committed write
// of values through the one ingestion pipeline (HTTP, MQTT, set_variable and mqtt
// actions) hands the instance that wrote it the rows written and their place in the
// variable's chain of writes (ingest.Follower, ingest.Watcher); its evaluator steps the
// events' state machines over them in memory when the chain continues from what it last
// evaluated (memory.go), and touches the database only to save a transition — over the
// row's version it extends, with the transition's deliveries (rows of event_deliveries
// and their River jobs) in the same transaction — and, periodically, the bookkeeping
// (last value evaluated, current run), also over the version. Anything else (a broken
// chain, a conflict, no entry yet, the sweep's catch-up of what no instance was told:
// synthetic values, lost wake-ups) is evaluated from the database: the stored state with
// its version, then the variable's values newer than its last evaluated one in timestamp
// order, saved over that version (else again). So a state change and its deliveries
// commit together, and however many instances evaluate, each transition's actions are
// enqueued once. River then runs each delivery at least once, with retries.
//
// Action types (webhook, mqtt, set_variable) are a registry: one file each,
// action_<type>.go, implementing actionType (action.go).
package events

import "strconv"

// States of an event.
const (
	Normal    = "normal"
	Triggered = "triggered"
)

// Condition is what an event watches: a variable's values compared with a threshold
// for at least Duration of data time.
type Condition struct {
	Operator   string
	Threshold  float64
	DurationMS int64
}

// Operators are the comparisons a condition may use.
var Operators = []string{">", ">=", "<", "<=", "==", "!="}

// Meets tells whether a value meets the condition's comparison.
func (c Condition) Meets(v float64) bool {
	switch c.Operator {
	case ">":
		return v > c.Threshold
	case ">=":
		return v >= c.Threshold
	case "<":
		return v < c.Threshold
	case "<=":
		return v <= c.Threshold
	case "==":
		return v == c.Threshold
	case "!=":
		return v != c.Threshold
	}
	return false
}

// State is an event's state machine as stored (data times in Unix ms).
type State struct {
	State    string // Normal or Triggered
	RunSince *int64 // the first value of the current run of values meeting the condition
	LastTS   *int64 // the newest value evaluated: older ones do not move the state
}

// Step evaluates one value, newer than every value evaluated so far (callers skip
// the others), and returns the state entered, or "" when the state did not change.
//
// The event triggers when every value over at least DurationMS of data time met the
// condition: from the first value of the run meeting it to this one (0: the first such
// value). It is back to normal at the first value that does not meet it.
func (s *State) Step(c Condition, ts int64, v float64) string {
	if s.LastTS != nil && ts <= *s.LastTS {
		return ""
	}
	s.LastTS = &ts
	if !c.Meets(v) {
		s.RunSince = nil
		if s.State == Triggered {
			s.State = Normal
			return Normal
		}
		return ""
	}
	if s.RunSince == nil {
		s.RunSince = &ts
	}
	if s.State != Triggered && ts-*s.RunSince >= c.DurationMS {
		s.State = Triggered
		return Triggered
	}
	return ""
}

// formatValue spells a value as templates and default bodies show it.
func formatValue(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
