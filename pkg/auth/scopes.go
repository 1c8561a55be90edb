package auth

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sensordata/sensorapi/pkg/validate"
)

// Scope is what a token may do in its account (API.md §13).
type Scope string

const (
	// ScopeFull may do everything in its account.
	ScopeFull Scope = "full"
	// ScopeRead may read: every GET, and the analytics POSTs, which only read.
	ScopeRead Scope = "read"
	// ScopeDevice may use the v1.6 value routes of its one device.
	ScopeDevice Scope = "device"
)

// Decision is the answer of the route table.
type Decision int

const (
	// Deny: 403001.
	Deny Decision = iota
	// Allow the request.
	Allow
	// AllowIfOwnVariable: allow when the variable the path names by id belongs to the
	// token's device; the caller checks, since it takes a database read.
	AllowIfOwnVariable
)

// rule says who may use one route. Full tokens may use every route in the table.
type rule struct {
	read   bool
	device deviceRule
}

// deviceRule says how a device token may use a route.
type deviceRule int

const (
	noDevice       deviceRule = iota
	ownLabel                  // the path's :device is the token's device label
	ownVariableKey            // the path's :id is a variable of the token's device
)

// routes is the one table of route × scope for HTTP, by method and Gin route pattern.
// A route missing here is denied to every token, so a new route cannot be
// forgotten silently (the scope matrix test walks the OpenAPI document).
var routes = map[string]rule{
	"GET /api/v2.0/account": {read: true},

	"GET /api/v2.0/users":                                  {read: true},
	"POST /api/v2.0/users":                                 {},
	"GET /api/v2.0/users/:key":                             {read: true},
	"PATCH /api/v2.0/users/:key":                           {},
	"PUT /api/v2.0/users/:key":                             {},
	"DELETE /api/v2.0/users/:key":                          {},
	"POST /api/v2.0/users/:key/_/assign_organizations":     {},
	"POST /api/v2.0/users/:key/_/remove_organizations":     {},
	"GET /api/v2.0/organizations":                          {read: true},
	"POST /api/v2.0/organizations":                         {},
	"GET /api/v2.0/organizations/:key":                     {read: true},
	"PATCH /api/v2.0/organizations/:key":                   {},
	"PUT /api/v2.0/organizations/:key":                     {},
	"DELETE /api/v2.0/organizations/:key":                  {},
	"GET /api/v2.0/roles":                                  {read: true},
	"GET /api/v2.0/roles/:key":                             {read: true},
	"GET /api/v2.0/devices":                                {read: true},
	"POST /api/v2.0/devices":                               {},
	"POST /api/v2.0/devices/_/bulk/create":                 {},
	"GET /api/v2.0/devices/:device":                        {read: true},
	"PATCH /api/v2.0/devices/:device":                      {},
	"PUT /api/v2.0/devices/:device":                        {},
	"DELETE /api/v2.0/devices/:device":                     {},
	"GET /api/v2.0/devices/:device/variables":              {read: true},
	"POST /api/v2.0/devices/:device/variables":             {},
	"GET /api/v2.0/devices/:device/variables/:variable":    {read: true},
	"PATCH /api/v2.0/devices/:device/variables/:variable":  {},
	"PUT /api/v2.0/devices/:device/variables/:variable":    {},
	"DELETE /api/v2.0/devices/:device/variables/:variable": {},
	"GET /api/v2.0/variables":                              {read: true},
	"GET /api/v2.0/variables/:variable":                    {read: true},
	"PATCH /api/v2.0/variables/:variable":                  {},
	"PUT /api/v2.0/variables/:variable":                    {},
	"DELETE /api/v2.0/variables/:variable":                 {},

	// tokens: full tokens only, whatever the kind of token they manage
	"GET /api/v2.0/tokens":                        {},
	"POST /api/v2.0/tokens":                       {},
	"DELETE /api/v2.0/tokens/:id":                 {},
	"GET /api/v2.0/devices/:device/tokens":        {},
	"POST /api/v2.0/devices/:device/tokens":       {},
	"DELETE /api/v2.0/devices/:device/tokens/:id": {},

	// events (API.md §18): read tokens list and get them; writes need a full token
	"GET /api/v2.0/events":                   {read: true},
	"POST /api/v2.0/events":                  {},
	"GET /api/v2.0/events/:event":            {read: true},
	"PATCH /api/v2.0/events/:event":          {},
	"PUT /api/v2.0/events/:event":            {},
	"DELETE /api/v2.0/events/:event":         {},
	"GET /api/v2.0/events/:event/deliveries": {read: true},

	// analytics: reads, though POSTed
	"POST /api/v2.0/data/statistics":        {read: true},
	"POST /api/v1.6/data/stats/resample":    {read: true},
	"POST /api/v1.6/data/stats/aggregation": {read: true},

	// values (v1.6): a device token's own device only
	"POST /api/v1.6/devices/:device":                          {device: ownLabel},
	"POST /api/v1.6/devices/:device/:variable/values":         {device: ownLabel},
	"GET /api/v1.6/devices/:device/:variable/values":          {read: true, device: ownLabel},
	"GET /api/v1.6/devices/:device/:variable/lv":              {read: true, device: ownLabel},
	"POST /api/v1.6/variables/:id/values":                     {device: ownVariableKey},
	"GET /api/v1.6/variables/:id/values":                      {read: true, device: ownVariableKey},
	"GET /api/v1.6/variables/:id/statistics/:agg/:start/:end": {read: true, device: ownVariableKey},
	"DELETE /api/v1.6/variables/:id/values/:start/:end":       {},
	"POST /api/v1.6/collections/values":                       {},
	// history import (API.md §21): as posting to the same target
	"POST /api/v1.6/devices/:device/:variable/values/import": {device: ownLabel},
	"POST /api/v1.6/variables/:id/values/import":             {device: ownVariableKey},
	"POST /api/v1.6/collections/values/import":               {},
}

// Route decides whether a token may use a route (method and Gin pattern); param reads
// the request's path parameters.
func (a *Access) Route(method, pattern string, param func(string) string) Decision {
	r, ok := routes[method+" "+pattern]
	switch {
	case !ok:
		return Deny
	case a.Scope == ScopeFull:
		return Allow
	case a.Scope == ScopeRead && r.read:
		return Allow
	case a.Scope != ScopeDevice || a.Device == nil:
		return Deny
	}
	switch r.device {
	case ownLabel:
		if l, ok := validate.Label(param("device")); ok && l == a.Device.Label {
			return Allow
		}
	case ownVariableKey:
		return AllowIfOwnVariable
	}
	return Deny
}

// Publish decides whether a token may publish to a device (API.md §12 topics): full
// tokens anywhere in their account, device tokens to their device only.
func (a *Access) Publish(device string) bool {
	switch a.Scope {
	case ScopeFull:
		return true
	case ScopeDevice:
		return a.Device != nil && device == a.Device.Label
	}
	return false
}

// Subscribe decides whether a token may subscribe to a filter's device (a label or
// "+"): full and read tokens anywhere, device tokens under their device only.
func (a *Access) Subscribe(device string) bool {
	switch a.Scope {
	case ScopeFull, ScopeRead:
		return true
	case ScopeDevice:
		return a.Device != nil && device == a.Device.Label
	}
	return false
}

// ParseScope reads an account token's scope ("" is full).
func ParseScope(s string) (Scope, bool) {
	switch Scope(strings.TrimSpace(s)) {
	case "", ScopeFull:
		return ScopeFull, true
	case ScopeRead:
		return ScopeRead, true
	}
	return "", false
}

// OwnsVariable tells whether the variable with that public id belongs to the device of
// a device token.
func OwnsVariable(ctx context.Context, db *pgxpool.Pool, a *Access, publicID string) (bool, error) {
	if a.Device == nil || !validate.IsID(publicID) {
		return false, nil
	}
	var own bool
	err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM variables WHERE public_id = $1 AND device_id = $2)`,
		publicID, a.Device.ID).Scan(&own)
	if err != nil {
		return false, fmt.Errorf("check the variable's device: %w", err)
	}
	return own, nil
}
