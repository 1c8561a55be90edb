package apibody

import (
	"encoding/json"
	"strconv"

	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/validate"
)

// Assignment is one item of an assign_organizations or remove_organizations body,
// labels normalized; Role is empty when removing.
type Assignment struct{ Org, Role string }

// ReadAssignments validates the shape of each item; messages name "N.label", "N.role".
func ReadAssignments(items []json.RawMessage, errs fault.Fields, withRole bool) []Assignment {
	out := make([]Assignment, len(items))
	for i, it := range items {
		var m map[string]json.RawMessage
		if json.Unmarshal(it, &m) != nil || m == nil {
			errs.Add(strconv.Itoa(i), validate.MsgObject)
			continue
		}
		o := validate.NewObject(m, errs, strconv.Itoa(i)+".")
		o.Require("label")
		out[i].Org, _ = o.Label("label")
		if withRole {
			o.Require("role")
			out[i].Role, _ = o.Label("role")
		}
	}
	return out
}
