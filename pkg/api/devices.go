package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/sensordata/sensorapi/pkg/apibody"
	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/model"
	"github.com/sensordata/sensorapi/pkg/store"
	"github.com/sensordata/sensorapi/pkg/validate"
)

func (s *Server) deviceRoutes(v2 *gin.RouterGroup) {
	v2.GET("/devices", wrap(s.listDevices))
	v2.POST("/devices", wrap(s.createDevice))
	v2.POST("/devices/_/bulk/create", wrap(s.createDevices))
	v2.GET("/devices/:device", wrap(s.getDevice))
	v2.PATCH("/devices/:device", wrap(s.updateDevice(false)))
	v2.PUT("/devices/:device", wrap(s.updateDevice(true)))
	v2.DELETE("/devices/:device", wrap(s.deleteDevice))
	s.variableRoutes(v2)
}

// listDevices is E5: filters, search, sort and page all run in SQL.
func (s *Server) listDevices(c *gin.Context) error {
	p := store.ParseList(c.Request.URL.Query(), store.DeviceFields, "-createdAt", "d.id")
	devices, count, err := store.ListDevices(c, s.DB, account(c).ID, p)
	if err != nil {
		return err
	}
	listPage(s, c, p, devices, count, (*model.Device).JSON)
	return nil
}

func (s *Server) getDevice(c *gin.Context) error {
	d, err := findDevice(c, s.DB, account(c).ID, c.Param("device"), false)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, d.JSON(s.baseURL(c)))
	return nil
}

// createDevice is E3.
func (s *Server) createDevice(c *gin.Context) error {
	raw, err := decodeObject(c)
	if err != nil {
		return err
	}
	d := newDevice(account(c).ID)
	err = s.DB.RunInTx(c, nil, func(ctx context.Context, tx bun.Tx) error {
		var err error // the transaction's own, not the handler's
		if err = applyDevice(ctx, tx, raw, d, true); err != nil {
			return err
		}
		if err := store.InsertDevice(ctx, tx, d); err != nil {
			return deviceWriteError(err)
		}
		d, err = store.GetDevice(ctx, tx, d.AccountID, validate.Key{ID: d.PublicID}, false)
		return err
	})
	if err != nil {
		return err
	}
	c.JSON(http.StatusCreated, d.JSON(s.baseURL(c)))
	return nil
}

// newDevice is a Device of the account with E3's defaults.
func newDevice(accountID int64) *model.Device {
	return &model.Device{AccountID: accountID, IsActive: true, Tags: []string{}, Properties: json.RawMessage("{}")}
}

// updateDevice is E4 (PATCH) and its full form PUT, which requires the create fields.
func (s *Server) updateDevice(full bool) handlerFunc {
	return func(c *gin.Context) error {
		raw, err := decodeObject(c)
		if err != nil {
			return err
		}
		var d *model.Device
		err = s.DB.RunInTx(c, nil, func(ctx context.Context, tx bun.Tx) error {
			var err error // the transaction's own, not the handler's
			if d, err = findDevice(ctx, tx, account(c).ID, c.Param("device"), true); err != nil {
				return err
			}
			if err := applyDevice(ctx, tx, raw, d, full); err != nil {
				return err
			}
			if err := store.UpdateDevice(ctx, tx, d); err != nil {
				return deviceWriteError(err)
			}
			d, err = store.GetDevice(ctx, tx, d.AccountID, validate.Key{ID: d.PublicID}, false)
			return err
		})
		if err != nil {
			return err
		}
		c.JSON(http.StatusOK, d.JSON(s.baseURL(c)))
		return nil
	}
}

// deleteDevice removes the Device with its Variables and their values, all or nothing.
func (s *Server) deleteDevice(c *gin.Context) error {
	err := s.DB.RunInTx(c, nil, func(ctx context.Context, tx bun.Tx) error {
		d, err := findDevice(ctx, tx, account(c).ID, c.Param("device"), true)
		if err != nil {
			return err
		}
		return store.DeleteDevice(ctx, tx, d.ID)
	})
	if err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// findDevice reads the account's Device by path key; anything else is a 404.
func findDevice(ctx context.Context, db bun.IDB, accountID int64, rawKey string, forUpdate bool) (*model.Device, error) {
	notFound := fault.NotFound(fmt.Sprintf("Device '%s' was not found.", rawKey))
	key, ok := validate.ParseKey(rawKey)
	if !ok {
		return nil, notFound
	}
	d, err := store.GetDevice(ctx, db, accountID, key, forUpdate)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound
	}
	return d, err
}

// applyDevice validates the sent fields and applies them to d; required asks for the
// create fields (POST, PUT). Unknown and read-only fields are ignored, as DRF does.
func applyDevice(ctx context.Context, db bun.IDB, raw map[string]json.RawMessage, d *model.Device, required bool) error {
	errs := fault.Fields{}
	o := validate.NewObject(raw, errs, "")
	apibody.ReadDevice(o, d, required)
	if err := readDeviceOrganization(o, d, organizationsOf(ctx, db, d.AccountID)); err != nil {
		return err
	}
	return errs.Err()
}

// organizationResolver finds an Organization of the account by key (store.ErrNotFound:
// none).
type organizationResolver func(key validate.Key) (int64, error)

func organizationsOf(ctx context.Context, db bun.IDB, accountID int64) organizationResolver {
	return func(key validate.Key) (int64, error) { return store.OrganizationID(ctx, db, accountID, key) }
}

// readDeviceOrganization resolves a sent Organization key (null detaches the Device).
func readDeviceOrganization(o *validate.Object, d *model.Device, resolve organizationResolver) error {
	key, sent := apibody.ReadOrganizationKey(o)
	if !sent {
		return nil
	}
	if key == nil {
		d.OrganizationID = nil
		return nil
	}
	id, err := resolve(*key)
	if errors.Is(err, store.ErrNotFound) {
		o.Fail("organization", apibody.OrganizationNotFound(key.Raw))
		return nil
	}
	if err != nil {
		return err
	}
	d.OrganizationID = &id
	return nil
}

const msgDeviceExists = "A device with this label already exists."

// deviceWriteError turns a duplicate label (caught by the unique constraint, so two
// concurrent creates cannot both pass) into a 400001 on label.
func deviceWriteError(err error) error {
	if store.IsUniqueViolation(err, "devices_account_id_label_key") {
		return fault.Invalid("label", msgDeviceExists)
	}
	return err
}
