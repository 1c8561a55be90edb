package api

import (
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/sensordata/sensorapi/pkg/auth"
	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/model"
	"github.com/sensordata/sensorapi/pkg/store"
	"github.com/sensordata/sensorapi/pkg/validate"
)

// tokenRoutes are API.md §13: account tokens, and device tokens under their device.
// Who may call them is the scope table's business (pkg/auth/scopes.go): full only.
func (s *Server) tokenRoutes(v2 *gin.RouterGroup) {
	v2.GET("/tokens", wrap(s.listTokens))
	v2.POST("/tokens", wrap(s.createToken))
	v2.DELETE("/tokens/:id", wrap(s.deleteToken))
	v2.GET("/devices/:device/tokens", wrap(s.listTokens))
	v2.POST("/devices/:device/tokens", wrap(s.createToken))
	v2.DELETE("/devices/:device/tokens/:id", wrap(s.deleteToken))
}

// tokenDevice is the device of a device-token route (nil on the account routes).
func (s *Server) tokenDevice(c *gin.Context) (*model.Device, error) {
	if c.Param("device") == "" {
		return nil, nil
	}
	return findDevice(c, s.DB, account(c).ID, c.Param("device"), false)
}

// deviceKey is the internal key of a device-token route's device (0: account routes).
func deviceKey(d *model.Device) int64 {
	if d == nil {
		return 0
	}
	return d.ID
}

func (s *Server) listTokens(c *gin.Context) error {
	dev, err := s.tokenDevice(c)
	if err != nil {
		return err
	}
	p := store.ParseList(c.Request.URL.Query(), store.TokenFields, "-createdAt", "t.id")
	tokens, count, err := store.ListTokens(c, s.DB, account(c).ID, deviceKey(dev), p)
	if err != nil {
		return err
	}
	listPage(s, c, p, tokens, count, (*model.Token).JSON)
	return nil
}

// createToken answers 201 with the secret, shown this once: only its hash is kept.
func (s *Server) createToken(c *gin.Context) error {
	dev, err := s.tokenDevice(c)
	if err != nil {
		return err
	}
	raw, err := decodeObject(c)
	if err != nil {
		return err
	}
	t, err := readToken(raw, account(c).ID, dev)
	if err != nil {
		return err
	}
	secret, err := auth.NewToken()
	if err != nil {
		return err
	}
	t.Hash = auth.HashToken(secret)
	if err := store.CreateToken(c, s.DB, t); err != nil {
		return err
	}
	r := t.JSON("")
	if dev != nil {
		r.Device = &model.DeviceBrief{ID: dev.PublicID, Label: dev.Label}
	}
	r.Secret = secret
	c.JSON(http.StatusCreated, r)
	return nil
}

func (s *Server) deleteToken(c *gin.Context) error {
	dev, err := s.tokenDevice(c)
	if err != nil {
		return err
	}
	ok, err := store.DeleteToken(c, s.DB, account(c).ID, deviceKey(dev), c.Param("id"))
	if err != nil {
		return err
	}
	if !ok {
		return fault.NotFound("Token '" + c.Param("id") + "' was not found.")
	}
	c.Status(http.StatusNoContent)
	return nil
}

// readToken validates a token body: label (required), and on the account routes scope
// (full or read, default full); a device route's token has scope device.
func readToken(raw map[string]json.RawMessage, accountID int64, dev *model.Device) (*model.Token, error) {
	errs := fault.Fields{}
	o := validate.NewObject(raw, errs, "")
	t := &model.Token{AccountID: accountID, Scope: string(auth.ScopeDevice)}
	if o.Require("label") {
		t.Label, _ = o.String("label", 100)
	}
	if dev != nil {
		t.DeviceID = &dev.ID
		return t, errs.Err()
	}
	scope, _ := o.String("scope", 0)
	sc, ok := auth.ParseScope(scope)
	if !ok {
		o.Fail("scope", `Choose "full" or "read" (device tokens are made under their device).`)
	}
	t.Scope = string(sc)
	return t, errs.Err()
}
