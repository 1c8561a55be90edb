package api

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/sensordata/sensorapi/pkg/apibody"
	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/model"
	"github.com/sensordata/sensorapi/pkg/store"
	"github.com/sensordata/sensorapi/pkg/validate"
)

func (s *Server) organizationRoutes(v2 *gin.RouterGroup) {
	v2.GET("/organizations", wrap(s.listOrganizations))
	v2.POST("/organizations", wrap(s.createOrganization))
	v2.GET("/organizations/:key", wrap(s.getOrganization))
	v2.PATCH("/organizations/:key", wrap(s.patchOrganization))
	v2.PUT("/organizations/:key", wrap(s.putOrganization))
	v2.DELETE("/organizations/:key", wrap(s.deleteOrganization))
	v2.GET("/roles", wrap(s.listRoles))
	v2.GET("/roles/:key", wrap(s.getRole))
}

const msgLabelTaken = "An organization with that label already exists."

func (s *Server) createOrganization(c *gin.Context) error {
	raw, err := decodeObject(c)
	if err != nil {
		return err
	}
	errs := fault.Fields{}
	o := validate.NewObject(raw, errs, "")
	o.Require("label")
	org := &model.Organization{AccountID: account(c).ID, Properties: json.RawMessage("{}")}
	apibody.ReadOrganization(o, org)
	if err := errs.Err(); err != nil {
		return err
	}
	if !o.Has("name") {
		org.Name = org.Label
	}
	if err := store.CreateOrganization(c, s.DB, org); err != nil {
		return organizationStoreError(err)
	}
	c.JSON(http.StatusCreated, org.Response(s.baseURL(c)))
	return nil
}

func (s *Server) listOrganizations(c *gin.Context) error {
	p := store.ParseList(c.Request.URL.Query(), store.OrganizationFields, "-createdAt", "o.id")
	orgs, n, err := store.ListOrganizations(c, s.DB, account(c).ID, p)
	if err != nil {
		return err
	}
	listPage(s, c, p, orgs, n, (*model.Organization).Response)
	return nil
}

func (s *Server) getOrganization(c *gin.Context) error {
	org, err := s.findOrganization(c)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, org.Response(s.baseURL(c)))
	return nil
}

func (s *Server) patchOrganization(c *gin.Context) error { return s.updateOrganization(c) }

// PUT is a full update: PATCH's rules with label present.
func (s *Server) putOrganization(c *gin.Context) error { return s.updateOrganization(c, "label") }

func (s *Server) updateOrganization(c *gin.Context, required ...string) error {
	org, err := s.findOrganization(c)
	if err != nil {
		return err
	}
	raw, err := decodeObject(c)
	if err != nil {
		return err
	}
	errs := fault.Fields{}
	o := validate.NewObject(raw, errs, "")
	o.Require(required...)
	cols := apibody.ReadOrganization(o, org)
	if err := errs.Err(); err != nil {
		return err
	}
	if err := store.UpdateOrganization(c, s.DB, org, cols); err != nil {
		return organizationStoreError(err)
	}
	c.JSON(http.StatusOK, org.Response(s.baseURL(c)))
	return nil
}

func (s *Server) deleteOrganization(c *gin.Context) error {
	org, err := s.findOrganization(c)
	if err != nil {
		return err
	}
	if err := store.DeleteOrganization(c, s.DB, org); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

func (s *Server) findOrganization(c *gin.Context) (*model.Organization, error) {
	raw := c.Param("key")
	notFound := fault.NotFound(fmt.Sprintf("Organization '%s' was not found.", raw))
	k, ok := validate.ParseKey(raw)
	if !ok {
		return nil, notFound
	}
	org, err := store.FindOrganization(c, s.DB, account(c).ID, k)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound
	}
	return org, err
}

func organizationStoreError(err error) error {
	if errors.Is(err, store.ErrLabelTaken) {
		return fault.Invalid("label", msgLabelTaken)
	}
	return err
}

func (s *Server) listRoles(c *gin.Context) error {
	p := store.ParseList(c.Request.URL.Query(), store.RoleFields, "label", "r.id")
	roles, n, err := store.ListRoles(c, s.DB, account(c).ID, p)
	if err != nil {
		return err
	}
	listPage(s, c, p, roles, n, (*model.Role).Response)
	return nil
}

func (s *Server) getRole(c *gin.Context) error {
	raw := c.Param("key")
	notFound := fault.NotFound(fmt.Sprintf("Role '%s' was not found.", raw))
	k, ok := validate.ParseKey(raw)
	if !ok {
		return notFound
	}
	r, err := store.FindRole(c, s.DB, account(c).ID, k)
	if errors.Is(err, sql.ErrNoRows) {
		return notFound
	}
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, r.Response(s.baseURL(c)))
	return nil
}
