package events

import (
	"net/netip"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
)

// TestStepEqualThreshold: a value equal to the threshold meets >=, <=, == only.
func TestStepEqualThreshold(t *testing.T) {
	want := map[string]bool{">": false, ">=": true, "<": false, "<=": true, "==": true, "!=": false}
	for _, op := range Operators {
		s := State{State: Normal}
		got := s.Step(Condition{Operator: op, Threshold: 42.5}, 1, 42.5)
		if (got == Triggered) != want[op] {
			t.Errorf("%s with an equal value: transition %q", op, got)
		}
	}
}

// TestStepDurationAndOrder: the run must last DurationMS of data time; a value that
// does not meet the condition restarts it and ends a triggered state; older values
// move nothing.
func TestStepDurationAndOrder(t *testing.T) {
	c := Condition{Operator: ">", Threshold: 10, DurationMS: 100}
	s := State{State: Normal}
	steps := []struct {
		ts   int64
		v    float64
		want string
	}{
		{1000, 11, ""}, {1050, 12, ""}, {1060, 5, ""}, // run broken
		{1100, 11, ""}, {1150, 11, ""}, {1099, 99, ""}, // older: ignored
		{1200, 11, Triggered}, {1300, 11, ""}, {1250, 0, ""}, // older: ignored
		{1301, 10, Normal}, {1302, 11, ""}, {1302, 50, ""}, // same time: ignored
	}
	for i, st := range steps {
		if got := s.Step(c, st.ts, st.v); got != st.want {
			t.Fatalf("step %d (%d, %v): %q, want %q", i, st.ts, st.v, got, st.want)
		}
	}
	z := State{State: Normal}
	if z.Step(Condition{Operator: "<", Threshold: 0}, 5, -1) != Triggered {
		t.Fatal("duration 0: the first value meeting the condition triggers")
	}
}

func TestRender(t *testing.T) {
	v := Vars{Value: 21.5, Timestamp: 1767225600000, Device: "boiler", Variable: "t", Event: "hot", State: Triggered}
	got := Render(`{"v":{{value}},"ts":{{ timestamp }},"d":"{{device.label}}.{{variable.label}}","e":"{{event.label}}","s":"{{state}}","x":"{{other}}"}`, v)
	want := `{"v":21.5,"ts":1767225600000,"d":"boiler.t","e":"hot","s":"triggered","x":"{{other}}"}`
	if got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
	if u := unknownNames("{{value}} {{valu}} {{ device.label }}"); len(u) != 1 || u[0] != "{{valu}}" {
		t.Fatalf("unknown names %v", u)
	}
}

func TestRetryPolicyDoublesUpToMax(t *testing.T) {
	p := retryPolicy{base: time.Second, max: time.Hour}
	for attempt, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 5: 16 * time.Second,
		12: 2048 * time.Second, 13: time.Hour, 500: time.Hour} {
		d := time.Until(p.NextRetry(&rivertype.JobRow{Attempt: attempt}))
		if d < want-time.Second/10 || d > want {
			t.Errorf("attempt %d: %v, want %v", attempt, d, want)
		}
	}
}

func TestBlocked(t *testing.T) {
	for _, a := range []string{"10.0.0.1", "169.254.169.254", "127.0.0.1", "::1", "192.168.0.1", "172.16.5.4",
		"fe80::1", "fc00::1", "0.0.0.0", "100.64.0.1", "::ffff:10.0.0.1", "64:ff9b::a00:1", "224.0.0.1", "255.255.255.255"} {
		if !Blocked(netip.MustParseAddr(a)) {
			t.Errorf("%s is not blocked", a)
		}
	}
	for _, a := range []string{"93.184.216.34", "8.8.8.8", "2606:4700::1111"} {
		if Blocked(netip.MustParseAddr(a)) {
			t.Errorf("%s is blocked", a)
		}
	}
}
