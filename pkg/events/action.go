package events

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Action types.
const (
	Webhook     = "webhook"
	MQTT        = "mqtt"
	SetVariable = "set_variable"
)

// Action is one action of an event, as stored (templates unrendered) and as rendered
// into a delivery's request (templates substituted).
type Action struct {
	Type string `json:"type"`
	// webhook
	URL     string            `json:"url,omitempty"`
	Method  string            `json:"method,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body,omitempty"`
	// mqtt: a publish to the account's own topic /v1.6/devices/<device>/<variable>
	Topic   string `json:"topic,omitempty"`
	Payload string `json:"payload,omitempty"`
	// set_variable: a variable reference (id, or "<device label>.<variable label>")
	Variable string `json:"variable,omitempty"`
	Value    string `json:"value,omitempty"`
	// rendered only: the data time of the value that caused the transition, the
	// timestamp given to written dots that carry none (retries write the same dots)
	TS int64 `json:"ts,omitempty"`
}

// JSON is the action's response shape: the fields of its type, all of them.
func (a Action) JSON() map[string]any {
	switch a.Type {
	case Webhook:
		h := a.Headers
		if h == nil {
			h = map[string]string{}
		}
		return map[string]any{"type": a.Type, "url": a.URL, "method": a.Method, "headers": h, "body": a.Body}
	case MQTT:
		return map[string]any{"type": a.Type, "topic": a.Topic, "payload": a.Payload}
	}
	return map[string]any{"type": a.Type, "variable": a.Variable, "value": a.Value}
}

// Vars are what templates substitute.
type Vars struct {
	Value     float64
	Timestamp int64
	Device    string // label
	Variable  string // label
	Event     string // label
	State     string // the state entered
}

var templateRe = regexp.MustCompile(`\{\{\s*([^{}]*?)\s*\}\}`)

// templateNames are the names a template may use.
var templateNames = map[string]func(Vars) string{
	"value":          func(v Vars) string { return formatValue(v.Value) },
	"timestamp":      func(v Vars) string { return strconv.FormatInt(v.Timestamp, 10) },
	"device.label":   func(v Vars) string { return v.Device },
	"variable.label": func(v Vars) string { return v.Variable },
	"event.label":    func(v Vars) string { return v.Event },
	"state":          func(v Vars) string { return v.State },
}

// Render substitutes {{name}} in a template.
func Render(t string, v Vars) string {
	return templateRe.ReplaceAllStringFunc(t, func(m string) string {
		f := templateNames[templateRe.FindStringSubmatch(m)[1]]
		if f == nil {
			return m
		}
		return f(v)
	})
}

// unknownNames lists the {{names}} of a template that are not substitutable.
func unknownNames(t string) []string {
	var out []string
	for _, m := range templateRe.FindAllStringSubmatch(t, -1) {
		if templateNames[m[1]] == nil {
			out = append(out, "{{"+m[1]+"}}")
		}
	}
	return out
}

// defaultBody is a webhook's body when its template is empty.
func defaultBody(v Vars) string {
	b, _ := json.Marshal(map[string]any{"event": v.Event, "state": v.State, "value": v.Value,
		"timestamp": v.Timestamp, "device": v.Device, "variable": v.Variable})
	return string(b)
}

// render is the action with its templates substituted: what a delivery sends.
func (a Action) render(v Vars) Action {
	r := a
	r.TS = v.Timestamp
	switch a.Type {
	case Webhook:
		if a.Method != "GET" {
			r.Body = Render(a.Body, v)
			if a.Body == "" {
				r.Body = defaultBody(v)
			}
		}
		if len(a.Headers) > 0 {
			r.Headers = make(map[string]string, len(a.Headers))
			for k, h := range a.Headers {
				r.Headers[k] = Render(h, v)
			}
		}
	case MQTT:
		r.Payload = Render(a.Payload, v)
	case SetVariable:
		r.Value = Render(a.Value, v)
	}
	return r
}

// topicTarget reads an mqtt action's topic: /v1.6/devices/<device>/<variable> (the
// leading slash optional, as the broker reads topics).
func topicTarget(topic string) (device, variable string, ok bool) {
	parts := strings.Split(strings.TrimPrefix(topic, "/"), "/")
	if len(parts) != 4 || parts[0] != "v1.6" || parts[1] != "devices" {
		return "", "", false
	}
	return parts[2], parts[3], true
}

// target names the variable a value-writing action (mqtt, set_variable) writes to:
// a public id, or device and variable labels.
type target struct {
	id               string
	device, variable string
}

func (t target) String() string {
	if t.id != "" {
		return t.id
	}
	return fmt.Sprintf("%s.%s", t.device, t.variable)
}
