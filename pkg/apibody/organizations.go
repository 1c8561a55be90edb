package apibody

import (
	"github.com/sensordata/sensorapi/pkg/model"
	"github.com/sensordata/sensorapi/pkg/validate"
)

// ReadOrganization applies the sent fields to org and returns the columns that changed.
func ReadOrganization(o *validate.Object, org *model.Organization) []string {
	var cols []string
	if l, ok := o.Label("label"); ok {
		org.Label = l
		cols = append(cols, "label")
	}
	if v, ok := o.String("name", 200); ok {
		if v == "" {
			o.Fail("name", validate.MsgBlank)
		} else {
			org.Name = v
			cols = append(cols, "name")
		}
	}
	if readString(o, "description", 2000, &org.Description) {
		cols = append(cols, "description")
	}
	if p, ok := o.Properties("properties"); ok {
		org.Properties = p
		cols = append(cols, "properties")
	}
	return cols
}
