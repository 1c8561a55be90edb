package api

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"golang.org/x/crypto/bcrypt"

	"github.com/sensordata/sensorapi/pkg/apibody"
	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/model"
	"github.com/sensordata/sensorapi/pkg/store"
	"github.com/sensordata/sensorapi/pkg/validate"
)

// userRoutes registers Users, and the Organizations and Roles they are assigned to.
func (s *Server) userRoutes(v2 *gin.RouterGroup) {
	v2.GET("/users", wrap(s.listUsers))
	v2.POST("/users", wrap(s.createUser))
	v2.GET("/users/:key", wrap(s.getUser))
	v2.PATCH("/users/:key", wrap(s.patchUser))
	v2.PUT("/users/:key", wrap(s.putUser))
	v2.DELETE("/users/:key", wrap(s.deleteUser))
	v2.POST("/users/:key/_/assign_organizations", wrap(s.assignOrganizations))
	v2.POST("/users/:key/_/remove_organizations", wrap(s.removeOrganizations))
	s.organizationRoutes(v2)
}

const (
	msgUsernameTaken = "A user with that username already exists."
	msgPasswordSet   = "The password cannot be changed by this request."
)

// E1: create a User (200, as the spec shows, not 201).
func (s *Server) createUser(c *gin.Context) error {
	raw, err := decodeObject(c)
	if err != nil {
		return err
	}
	errs := fault.Fields{}
	o := validate.NewObject(raw, errs, "")
	o.Require("username", "email", "password")
	u := &model.User{AccountID: account(c).ID, FirstTime: true, IsActive: true, Tags: []string{},
		ContactMethods: []model.ContactMethod{}, Properties: json.RawMessage("{}")}
	apibody.ReadUser(o, u)
	password, _ := apibody.ReadPassword(o)
	if err := errs.Err(); err != nil {
		return err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return fmt.Errorf("hash password: %w", err)
	}
	u.PasswordHash = string(hash)
	if err := store.CreateUser(c, s.DB, u); err != nil {
		return userStoreError(err)
	}
	c.JSON(http.StatusOK, u.Response(s.baseURL(c)))
	return nil
}

func (s *Server) listUsers(c *gin.Context) error {
	p := store.ParseList(c.Request.URL.Query(), store.UserFields, "-createdAt", "u.id")
	users, n, err := store.ListUsers(c, s.DB, account(c).ID, p)
	if err != nil {
		return err
	}
	listPage(s, c, p, users, n, (*model.User).Response)
	return nil
}

func (s *Server) getUser(c *gin.Context) error {
	u, err := s.findUser(c)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, u.Response(s.baseURL(c)))
	return nil
}

// E2: partial update; only the sent fields change.
func (s *Server) patchUser(c *gin.Context) error { return s.updateUser(c) }

// PUT is a full update: PATCH's rules, with the fields required on create (except the
// password, which no update sets) present.
func (s *Server) putUser(c *gin.Context) error { return s.updateUser(c, "username", "email") }

func (s *Server) updateUser(c *gin.Context, required ...string) error {
	u, err := s.findUser(c)
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
	cols := apibody.ReadUser(o, u)
	if o.Has("password") {
		o.Fail("password", msgPasswordSet)
	}
	if err := errs.Err(); err != nil {
		return err
	}
	if err := store.UpdateUser(c, s.DB, u, cols); err != nil {
		return userStoreError(err)
	}
	c.JSON(http.StatusOK, u.Response(s.baseURL(c)))
	return nil
}

func (s *Server) deleteUser(c *gin.Context) error {
	u, err := s.findUser(c)
	if err != nil {
		return err
	}
	if err := store.DeleteUser(c, s.DB, u); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// findUser resolves the path key (id or ~username) within the account.
func (s *Server) findUser(c *gin.Context) (*model.User, error) {
	raw := c.Param("key")
	notFound := fault.NotFound(fmt.Sprintf("User '%s' was not found.", raw))
	var k store.UserKey
	if name, ok := strings.CutPrefix(raw, "~"); ok {
		if !apibody.UsernameRe.MatchString(name) {
			return nil, notFound
		}
		k.Username = name
	} else {
		if !validate.IsID(raw) {
			return nil, notFound
		}
		k.ID = raw
	}
	u, err := store.FindUser(c, s.DB, account(c).ID, k)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound
	}
	return u, err
}

func userStoreError(err error) error {
	if errors.Is(err, store.ErrUsernameTaken) {
		return fault.Invalid("username", msgUsernameTaken)
	}
	return err
}
