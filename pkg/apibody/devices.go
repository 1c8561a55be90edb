package apibody

import (
	"encoding/json"
	"fmt"

	"github.com/sensordata/sensorapi/pkg/model"
	"github.com/sensordata/sensorapi/pkg/validate"
)

// Text limits of Devices and Variables (API.md §3).
const (
	maxName        = 200
	maxDescription = 2000
	maxProperties  = 16 << 10
)

// ReadDevice validates the sent fields of a Device body, organization aside, and
// applies them to d; required asks for the create fields (POST, PUT). Unknown and
// read-only fields are ignored, as DRF does.
func ReadDevice(o *validate.Object, d *model.Device, required bool) {
	if required {
		o.Require("label")
	}
	if l, ok := o.Label("label"); ok {
		d.Label = l
	}
	readName(o, &d.Name, d.Label)
	if v, ok := o.String("description", maxDescription); ok {
		d.Description = v
	}
	if v, ok := o.Bool("isActive"); ok {
		d.IsActive = v
	}
	if v, ok := o.Tags("tags"); ok {
		d.Tags = v
	}
	if v, ok := o.DeviceProperties("properties"); ok {
		d.Properties = mergeProperties(o, d.Properties, v)
	}
}

// ReadOrganizationKey reads a Device's `organization`: sent is false when it is absent
// or invalid (then a message is recorded); a nil key detaches the Device. Whether the
// key names one of the account's Organizations is the caller's lookup.
func ReadOrganizationKey(o *validate.Object) (key *validate.Key, sent bool) {
	s, ok := o.NullableString("organization", 0)
	if !ok {
		return nil, false
	}
	if s == nil {
		return nil, true
	}
	k, valid := validate.ParseKey(*s)
	if !valid {
		o.Fail("organization", OrganizationNotFound(*s))
		return nil, false
	}
	return &k, true
}

// OrganizationNotFound is the message on `organization` for a key that names nothing.
func OrganizationNotFound(raw string) string {
	return fmt.Sprintf("Organization '%s' was not found.", raw)
}

// readName reads a sent name; a resource created without one is named by its label.
func readName(o *validate.Object, dst *string, label string) {
	s, ok := o.String("name", maxName)
	switch {
	case ok && s == "":
		o.Fail("name", validate.MsgBlank)
	case ok:
		*dst = s
	case *dst == "" && !o.Has("name"):
		*dst = label
	}
}

// mergeProperties applies sent attributes over the stored ones (a null removes one)
// and checks the size of the result.
func mergeProperties(o *validate.Object, stored json.RawMessage, sent map[string]json.RawMessage) json.RawMessage {
	merged := map[string]json.RawMessage{}
	_ = json.Unmarshal(stored, &merged) // stored properties are always an object
	for k, v := range sent {
		if v == nil {
			delete(merged, k)
			continue
		}
		merged[k] = v
	}
	b, err := json.Marshal(merged)
	if err != nil || len(b) > maxProperties {
		o.Fail("properties", "Ensure this object is at most 16384 bytes serialized.")
		return stored
	}
	return b
}
