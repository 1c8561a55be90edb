package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/sensordata/sensorapi/pkg/apibody"
	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/model"
	"github.com/sensordata/sensorapi/pkg/store"
	"github.com/sensordata/sensorapi/pkg/validate"
)

// maxBulkDevices is the most Devices one bulk creation takes (API.md §21).
const maxBulkDevices = 10_000

// createDevices is POST /api/v2.0/devices/_/bulk/create/ (API.md §21): E3 for a list of
// 1 to 10,000 bodies, all or nothing in one transaction. Errors name "<index>.<field>";
// a label the list repeats, or one the account has (also one created meanwhile), is an
// error on that item. 201 with the created Devices in the list's order.
func (s *Server) createDevices(c *gin.Context) error {
	items, err := decodeList(c)
	if err != nil {
		return err
	}
	acct := account(c).ID
	var created []*model.Device
	err = s.DB.RunInTx(c, nil, func(ctx context.Context, tx bun.Tx) error {
		ds, err := readDevices(ctx, tx, acct, items)
		if err != nil {
			return err
		}
		skipped, err := store.InsertDevices(ctx, tx, ds)
		if err != nil {
			return err
		}
		if len(skipped) > 0 {
			errs := fault.Fields{}
			for _, i := range skipped {
				errs.Add(strconv.Itoa(i)+".label", msgDeviceExists)
			}
			return errs.Err()
		}
		ids := make([]int64, len(ds))
		for i, d := range ds {
			ids[i] = d.ID
		}
		created, err = store.GetDevicesByID(ctx, tx, acct, ids)
		return err
	})
	if err != nil {
		return err
	}
	out := make([]model.DeviceJSON, len(created))
	base := s.baseURL(c)
	for i, d := range created {
		out[i] = d.JSON(base)
	}
	c.JSON(http.StatusCreated, out)
	return nil
}

// decodeList reads a body that must be a JSON list of 1 to maxBulkDevices items.
func decodeList(c *gin.Context) ([]json.RawMessage, error) {
	body, err := readJSON(c)
	if err != nil {
		return nil, err
	}
	var items []json.RawMessage
	if err := json.Unmarshal(body, &items); err != nil || items == nil {
		return nil, fault.ParseError("expected a JSON list")
	}
	if len(items) == 0 || len(items) > maxBulkDevices {
		return nil, fault.Invalid("body", fmt.Sprintf("Ensure this list has between 1 and %d items.", maxBulkDevices))
	}
	return items, nil
}

// readDevices validates each body as E3 does, its messages under "<index>.", and
// refuses a label an earlier item of the list has.
func readDevices(ctx context.Context, db bun.IDB, accountID int64, items []json.RawMessage) ([]*model.Device, error) {
	errs := fault.Fields{}
	orgs := organizationsOf(ctx, db, accountID).once()
	first := map[string]int{}
	ds := make([]*model.Device, len(items))
	for i, item := range items {
		prefix := strconv.Itoa(i) + "."
		var raw map[string]json.RawMessage
		if json.Unmarshal(item, &raw) != nil || raw == nil {
			errs.Add(strconv.Itoa(i), "Expected a JSON object.")
			continue
		}
		ds[i] = newDevice(accountID)
		o := validate.NewObject(raw, errs, prefix)
		apibody.ReadDevice(o, ds[i], true)
		if err := readDeviceOrganization(o, ds[i], orgs); err != nil {
			return nil, err
		}
		if j, seen := first[ds[i].Label]; seen {
			o.Fail("label", fmt.Sprintf("Item %d of the list has this label already.", j))
		} else if ds[i].Label != "" {
			first[ds[i].Label] = i
		}
	}
	return ds, errs.Err()
}

// once asks for each key at most once (a list of Devices often names one Organization).
func (r organizationResolver) once() organizationResolver {
	type answer struct {
		id  int64
		err error
	}
	seen := map[validate.Key]answer{}
	return func(key validate.Key) (int64, error) {
		a, ok := seen[key]
		if !ok {
			a.id, a.err = r(key)
			seen[key] = a
		}
		return a.id, a.err
	}
}
