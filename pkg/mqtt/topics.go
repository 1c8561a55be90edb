package mqtt

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/sensordata/sensorapi/pkg/validate"
)

// The platform's topics (API.md §12), relative to the token's account, with or
// without a leading "/":
//
//	publish    v1.6/devices/<device>                  body of POST /api/v1.6/devices/<device>/
//	publish    v1.6/devices/<device>/<variable>       a number, a dot or a list of dots
//	subscribe  v1.6/devices/<device|+>/<variable|+>/lv  the last value as plain text
//	subscribe  v1.6/devices/<device|+>/<variable|+>     the last dot as JSON
const prefix = "v1.6/devices/"

// publishTopic names where a publish writes. variable is empty for the device topic.
type publishTopic struct {
	device, variable string
}

// parsePublish reads a publish topic; labels are lowercased as over HTTP.
func parsePublish(name string) (publishTopic, bool) {
	parts, ok := split(name)
	if !ok || len(parts) < 1 || len(parts) > 2 {
		return publishTopic{}, false
	}
	var t publishTopic
	if t.device, ok = validate.Label(parts[0]); !ok {
		return publishTopic{}, false
	}
	if len(parts) == 2 {
		if t.variable, ok = validate.Label(parts[1]); !ok {
			return publishTopic{}, false
		}
	}
	return t, true
}

// filter is a subscription the broker serves. device and variable are labels or "+".
type filter struct {
	slash            bool // subscribed with a leading "/": deliveries carry one too
	device, variable string
	lv               bool // plain-text last value, else the JSON dot
}

// parseFilter reads a subscription filter. Labels must be given as stored
// (lowercase): a subscription is matched literally, as MQTT matches topics.
func parseFilter(f string) (filter, bool) {
	parts, ok := split(f)
	if !ok || len(parts) < 2 || len(parts) > 3 || (len(parts) == 3 && parts[2] != "lv") {
		return filter{}, false
	}
	for _, p := range parts[:2] {
		if l, ok := validate.Label(p); p != "+" && (!ok || l != p) {
			return filter{}, false
		}
	}
	return filter{slash: strings.HasPrefix(f, "/"), device: parts[0], variable: parts[1], lv: len(parts) == 3}, true
}

// split strips the optional "/" and the v1.6/devices/ prefix and returns the levels
// after it.
func split(name string) ([]string, bool) {
	rest, ok := strings.CutPrefix(strings.TrimPrefix(name, "/"), prefix)
	if !ok || rest == "" {
		return nil, false
	}
	return strings.Split(rest, "/"), true
}

// matches tells whether a variable's last value belongs to the subscription.
func (f filter) matches(device, variable string) bool {
	return (f.device == "+" || f.device == device) && (f.variable == "+" || f.variable == variable)
}

// topic is the topic name a delivery for the variable carries, in the form the
// client subscribed with.
func (f filter) topic(device, variable string) string {
	t := prefix + device + "/" + variable
	if f.lv {
		t += "/lv"
	}
	if f.slash {
		t = "/" + t
	}
	return t
}

// payload is what a delivery carries: the value as text for lv (as GET …/lv spells
// it), else the dot as JSON.
func (f filter) payload(v lastValue) []byte {
	value, _ := json.Marshal(v.Value) // a finite float64 always encodes
	if f.lv {
		return value
	}
	b := append([]byte(`{"value":`), value...)
	b = append(b, `,"timestamp":`...)
	b = strconv.AppendInt(b, v.Timestamp, 10)
	b = append(b, `,"context":`...)
	b = append(b, v.context()...)
	return append(b, '}')
}
