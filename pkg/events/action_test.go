package events

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestActionTypes pins the registered types in the order of the "type" message (API
// text: a new type is added at the end, not reordered into it).
func TestActionTypes(t *testing.T) {
	if got, want := actionTypeNames(), []string{Webhook, MQTT, SetVariable}; !reflect.DeepEqual(got, want) {
		t.Errorf("types %q, want %q", got, want)
	}
	if got, want := typeMessage(), `Choose one of "webhook", "mqtt", "set_variable".`; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
}

// TestActionJSON: an action is stored flat (the type's fields beside "type", "ts" once
// rendered) and read back into its type's fields; a type not registered keeps its type.
func TestActionJSON(t *testing.T) {
	for _, tc := range []struct {
		stored, rendered string
	}{
		{`{"body":"{{value}}","headers":{"X-A":"{{state}}"},"method":"PUT","type":"webhook","url":"https://example.com/h"}`,
			`{"body":"1.5","headers":{"X-A":"triggered"},"method":"PUT","ts":7,"type":"webhook","url":"https://example.com/h"}`},
		{`{"method":"GET","type":"webhook","url":"https://example.com/h"}`,
			`{"method":"GET","ts":7,"type":"webhook","url":"https://example.com/h"}`},
		{`{"payload":"{{value}}","topic":"/v1.6/devices/d/v","type":"mqtt"}`,
			`{"payload":"1.5","topic":"/v1.6/devices/d/v","ts":7,"type":"mqtt"}`},
		{`{"type":"set_variable","value":"{{value}}","variable":"d.v"}`,
			`{"ts":7,"type":"set_variable","value":"1.5","variable":"d.v"}`},
		{`{"type":"fax"}`, `{"ts":7,"type":"fax"}`},
	} {
		var a Action
		if err := json.Unmarshal([]byte(tc.stored), &a); err != nil {
			t.Fatalf("%s: %v", tc.stored, err)
		}
		if b, err := json.Marshal(a); err != nil || string(b) != tc.stored {
			t.Errorf("stored %s, want %s (%v)", b, tc.stored, err)
		}
		r := a.render(Vars{Value: 1.5, Timestamp: 7, State: "triggered"})
		if b, err := json.Marshal(r); err != nil || string(b) != tc.rendered {
			t.Errorf("rendered %s, want %s (%v)", b, tc.rendered, err)
		}
		if b, _ := json.Marshal(a); string(b) != tc.stored {
			t.Errorf("rendering changed the stored action: %s", b)
		}
	}
}

// TestActionResponse: the response shows every field of the type.
func TestActionResponse(t *testing.T) {
	var a Action
	if err := json.Unmarshal([]byte(`{"type":"webhook","url":"u","method":"POST"}`), &a); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"type": "webhook", "url": "u", "method": "POST", "headers": map[string]string{}, "body": ""}
	if got := a.JSON(); !reflect.DeepEqual(got, want) {
		t.Errorf("JSON %v, want %v", got, want)
	}
}
