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
	"github.com/sensordata/sensorapi/pkg/synthetic"
	"github.com/sensordata/sensorapi/pkg/validate"
)

// variableRoutes serves Variables under their Device and by id alone.
func (s *Server) variableRoutes(v2 *gin.RouterGroup) {
	v2.GET("/devices/:device/variables", wrap(s.listVariables))
	v2.POST("/devices/:device/variables", wrap(s.createVariable))
	v2.GET("/variables", wrap(s.listVariables))
	for _, path := range []string{"/devices/:device/variables/:variable", "/variables/:variable"} {
		v2.GET(path, wrap(s.getVariable))
		v2.PATCH(path, wrap(s.updateVariable(false)))
		v2.PUT(path, wrap(s.updateVariable(true)))
		v2.DELETE(path, wrap(s.deleteVariable))
	}
}

// listVariables lists the account's Variables, or one Device's when the path names it.
func (s *Server) listVariables(c *gin.Context) error {
	var deviceID int64
	if key := c.Param("device"); key != "" {
		d, err := findDevice(c, s.DB, account(c).ID, key, false)
		if err != nil {
			return err
		}
		deviceID = d.ID
	}
	p := store.ParseList(c.Request.URL.Query(), store.VariableFields, "-createdAt", "v.id")
	vars, count, err := store.ListVariables(c, s.DB, account(c).ID, deviceID, p)
	if err != nil {
		return err
	}
	listPage(s, c, p, vars, count, (*model.Variable).JSON)
	return nil
}

// getVariable is E6, on both single-Variable paths.
func (s *Server) getVariable(c *gin.Context) error {
	v, err := findVariable(c, s.DB, c, false)
	if err != nil {
		return err
	}
	if c.Query("explain") != "" {
		return s.explainSynthetic(c, v)
	}
	c.JSON(http.StatusOK, v.JSON(s.baseURL(c)))
	return nil
}

func (s *Server) createVariable(c *gin.Context) error {
	raw, err := decodeObject(c)
	if err != nil {
		return err
	}
	var v *model.Variable
	err = s.DB.RunInTx(c, nil, func(ctx context.Context, tx bun.Tx) error {
		d, err := findDevice(ctx, tx, account(c).ID, c.Param("device"), false)
		if err != nil {
			return err
		}
		v = &model.Variable{AccountID: d.AccountID, DeviceID: d.ID, Type: "raw", Tags: []string{},
			Properties: json.RawMessage("{}")}
		expr, err := syntheticField(raw)
		if err != nil {
			return err
		}
		if err := apibody.ApplyVariable(raw, v, true); err != nil {
			return err
		}
		if err := store.InsertVariable(ctx, tx, v); err != nil {
			return variableWriteError(err)
		}
		if expr != nil && *expr != "" {
			if err := synthetic.Define(ctx, synthetic.SQLTx(tx.Tx), v.AccountID, v.ID, *expr); err != nil {
				return err
			}
		}
		v, err = store.GetVariable(ctx, tx, v.AccountID, 0, validate.Key{ID: v.PublicID}, false)
		return err
	})
	if err != nil {
		return err
	}
	c.JSON(http.StatusCreated, v.JSON(s.baseURL(c)))
	return nil
}

// updateVariable is PATCH, and PUT when full (the create fields are then required).
func (s *Server) updateVariable(full bool) handlerFunc {
	return func(c *gin.Context) error {
		raw, err := decodeObject(c)
		if err != nil {
			return err
		}
		var v *model.Variable
		err = s.DB.RunInTx(c, nil, func(ctx context.Context, tx bun.Tx) error {
			var err error // the transaction's own, not the handler's
			if v, err = findVariable(ctx, tx, c, true); err != nil {
				return err
			}
			expr, err := syntheticField(raw)
			if err != nil {
				return err
			}
			if err := apibody.ApplyVariable(raw, v, full); err != nil {
				return err
			}
			if err := store.UpdateVariable(ctx, tx, v); err != nil {
				return variableWriteError(err)
			}
			if err := s.redefine(ctx, tx, v, expr); err != nil {
				return err
			}
			v, err = store.GetVariable(ctx, tx, v.AccountID, 0, validate.Key{ID: v.PublicID}, false)
			return err
		})
		if err != nil {
			return err
		}
		c.JSON(http.StatusOK, v.JSON(s.baseURL(c)))
		return nil
	}
}

// deleteVariable removes the Variable and its values, all or nothing.
func (s *Server) deleteVariable(c *gin.Context) error {
	err := s.DB.RunInTx(c, nil, func(ctx context.Context, tx bun.Tx) error {
		v, err := findVariable(ctx, tx, c, true)
		if err != nil {
			return err
		}
		return store.DeleteVariable(ctx, tx, v.ID)
	})
	if err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// findVariable reads the Variable the path names: /variables/<id>, or
// /devices/<device_key>/variables/<id or ~label>. Anything else is a 404.
func findVariable(ctx context.Context, db bun.IDB, c *gin.Context, forUpdate bool) (*model.Variable, error) {
	accountID := account(c).ID
	var deviceID int64
	if dk := c.Param("device"); dk != "" {
		d, err := findDevice(ctx, db, accountID, dk, false)
		if err != nil {
			return nil, err
		}
		deviceID = d.ID
	}
	rawKey := c.Param("variable")
	notFound := fault.NotFound(fmt.Sprintf("Variable '%s' was not found.", rawKey))
	key, ok := validate.ParseKey(rawKey)
	if !ok {
		return nil, notFound
	}
	v, err := store.GetVariable(ctx, db, accountID, deviceID, key, forUpdate)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound
	}
	return v, err
}

// variableWriteError turns a duplicate label within the Device into a 400001 on label.
func variableWriteError(err error) error {
	if store.IsUniqueViolation(err, "variables_device_id_label_key") {
		return fault.Invalid("label", "A variable with this label already exists in this device.")
	}
	return err
}
