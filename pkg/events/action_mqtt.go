package events

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sensordata/sensorapi/pkg/ingest"
	"github.com/sensordata/sensorapi/pkg/validate"
)

// MQTT is the action type of a publish to the account's own topic
// /v1.6/devices/<device>/<variable>: its payload is written as the broker would.
const MQTT = "mqtt"

func init() { registerAction(MQTT, 2, func() actionType { return &mqttAction{} }) }

// mqttAction is an mqtt action's fields.
type mqttAction struct {
	Topic   string `json:"topic,omitempty"`
	Payload string `json:"payload,omitempty"`
}

func (m *mqttAction) read(_ context.Context, _ readEnv, o *validate.Object) {
	o.Require("topic")
	if t, ok := o.String("topic", 300); ok {
		dev, v, valid := topicTarget(t)
		dl, okd := validate.Label(dev)
		vl, okv := validate.Label(v)
		if !valid || !okd || !okv {
			o.Fail("topic", "Enter a topic of the form /v1.6/devices/<device label>/<variable label>.")
		}
		m.Topic = "/v1.6/devices/" + dl + "/" + vl
	}
	m.Payload = template(o, "payload", true)
}

func (m *mqttAction) fields() map[string]any {
	return map[string]any{"topic": m.Topic, "payload": m.Payload}
}

func (m *mqttAction) render(v Vars) actionType {
	r := *m
	r.Payload = Render(m.Payload, v)
	return &r
}

// run writes the payload's values to the topic's variable through the pipeline.
func (m *mqttAction) run(ctx context.Context, s *Service, at attempt) (int, error) {
	dev, v, _ := topicTarget(m.Topic)
	p, err := ingest.NewParser(strconv.FormatInt(at.ts, 10), time.Now())
	if err != nil {
		return 0, fmt.Errorf("%w: %w", errPermanent, err)
	}
	dots, err := p.Values([]byte(m.Payload))
	if err != nil {
		return 0, fmt.Errorf("%w: the payload is not a number, a dot or a list of dots: %w", errPermanent, err)
	}
	for i := range dots {
		dots[i].Target = v
	}
	return 0, s.write(ctx, at.account, target{device: dev, variable: v}, dots)
}

func (m *mqttAction) writes() (string, string) {
	if d, v, ok := topicTarget(m.Topic); ok {
		return d + "." + v, "topic"
	}
	return "", ""
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
