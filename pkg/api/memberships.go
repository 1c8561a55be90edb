package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/sensordata/sensorapi/pkg/apibody"
	"github.com/sensordata/sensorapi/pkg/fault"
	"github.com/sensordata/sensorapi/pkg/store"
)

// assignOrganizations puts the User in each Organization with the Role given, or
// changes its Role there: [{"label": ORG_LABEL, "role": ROLE_LABEL}] → the User.
func (s *Server) assignOrganizations(c *gin.Context) error { return s.changeMemberships(c, true) }

// removeOrganizations takes the User out of each Organization: [{"label": ORG_LABEL}]
// → the User. An Organization the User is not in is no error.
func (s *Server) removeOrganizations(c *gin.Context) error { return s.changeMemberships(c, false) }

func (s *Server) changeMemberships(c *gin.Context, assign bool) error {
	u, err := s.findUser(c)
	if err != nil {
		return err
	}
	items, err := decodeArray(c)
	if err != nil {
		return err
	}
	errs := fault.Fields{}
	wanted := apibody.ReadAssignments(items, errs, assign)
	if err := errs.Err(); err != nil {
		return err
	}
	as, err := s.resolveAssignments(c, account(c).ID, wanted, errs)
	if err != nil {
		return err
	}
	if err := errs.Err(); err != nil {
		return err
	}
	err = s.DB.RunInTx(c, nil, func(ctx context.Context, tx bun.Tx) error {
		change := store.RemoveOrganizations
		if assign {
			change = store.AssignOrganizations
		}
		if err := change(ctx, tx, u.ID, as); err != nil {
			return err
		}
		return store.UpdateUser(ctx, tx, u, nil)
	})
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, u.Response(s.baseURL(c)))
	return nil
}

// decodeArray reads a body that must be a JSON array into its raw items.
func decodeArray(c *gin.Context) ([]json.RawMessage, error) {
	body, err := readJSON(c)
	if err != nil {
		return nil, err
	}
	var items []json.RawMessage
	if err := json.Unmarshal(body, &items); err != nil || items == nil {
		return nil, fault.ParseError("expected a JSON array")
	}
	return items, nil
}

// resolveAssignments maps labels to the account's rows; an unknown one is a message on
// its item. Assignments apply in order, so a later item for the same Organization wins.
func (s *Server) resolveAssignments(ctx context.Context, accountID int64, wanted []apibody.Assignment,
	errs fault.Fields) ([]store.Assignment, error) {
	var orgLabels, roleLabels []string
	for _, w := range wanted {
		orgLabels = append(orgLabels, w.Org)
		if w.Role != "" {
			roleLabels = append(roleLabels, w.Role)
		}
	}
	orgs, err := store.IDsByLabel(ctx, s.DB, "organizations", accountID, orgLabels)
	if err != nil {
		return nil, err
	}
	roles, err := store.IDsByLabel(ctx, s.DB, "roles", accountID, roleLabels)
	if err != nil {
		return nil, err
	}
	var out []store.Assignment
	for i, w := range wanted {
		orgID, okOrg := orgs[w.Org]
		roleID, okRole := roles[w.Role]
		okRole = okRole || w.Role == ""
		if !okOrg {
			errs.Add(fmt.Sprintf("%d.label", i), fmt.Sprintf("Organization '%s' was not found.", w.Org))
		}
		if !okRole {
			errs.Add(fmt.Sprintf("%d.role", i), fmt.Sprintf("Role '%s' was not found.", w.Role))
		}
		if okOrg && okRole {
			out = append(out, store.Assignment{OrganizationID: orgID, RoleID: roleID})
		}
	}
	return out, nil
}
