package apibody

import (
	"encoding/json"

	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/model"
	"github.com/sensordata/sensorapi/pkg/validate"
)

// maxShortText bounds a Variable's unit and icon (API.md is silent; names are 200).
const maxShortText = 100

var variableTypes = []string{"raw"}

// ApplyVariable validates the sent fields and applies them to v; required asks for the
// create fields (POST, PUT).
func ApplyVariable(raw map[string]json.RawMessage, v *model.Variable, required bool) error {
	errs := fault.Fields{}
	o := validate.NewObject(raw, errs, "")
	if required {
		o.Require("label")
	}
	if l, ok := o.Label("label"); ok {
		v.Label = l
	}
	readName(o, &v.Name, v.Label)
	if s, ok := o.String("description", maxDescription); ok {
		v.Description = s
	}
	if s, ok := o.String("unit", maxShortText); ok {
		v.Unit = s
	}
	if s, ok := o.String("icon", maxShortText); ok {
		v.Icon = s
	}
	if s, ok := o.Choice("type", variableTypes); ok {
		v.Type = s
	}
	if t, ok := o.Tags("tags"); ok {
		v.Tags = t
	}
	if p, ok := o.Properties("properties"); ok {
		v.Properties = mergeProperties(o, v.Properties, freeForm(p))
	}
	return errs.Err()
}

// freeForm splits a Variable's properties into attributes for mergeProperties; a null
// attribute removes it, as on Devices.
func freeForm(p json.RawMessage) map[string]json.RawMessage {
	m := map[string]json.RawMessage{}
	_ = json.Unmarshal(p, &m) // validated as an object by Properties
	for k, v := range m {
		if string(v) == "null" {
			m[k] = nil
		}
	}
	return m
}
