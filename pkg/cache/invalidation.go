package cache

import (
	"encoding/json"
	"fmt"
	"sync"
)

// Channel is the NOTIFY channel the database's invalidation triggers send on
// (sql/20261124000001_invalidation.up.sql).
const Channel = "sensorapi_invalidate"

// Invalidation is one trigger message: which cached fact stopped being true.
type Invalidation struct {
	Kind    string `json:"k"` // token, account, device or variable
	Hash    string `json:"h"` // token: hex SHA-256 of the token
	Account int64  `json:"a"` // account, device
	Device  int64  `json:"d"` // variable
	Label   string `json:"l"` // device, variable: the label before the change
}

// Router hands each invalidation to the handlers registered for its kind.
type Router struct {
	mu       sync.RWMutex
	handlers map[string][]func(Invalidation)
}

// NewRouter makes an empty router.
func NewRouter() *Router { return &Router{handlers: map[string][]func(Invalidation){}} }

// On registers f for invalidations of kind.
func (r *Router) On(kind string, f func(Invalidation)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handlers[kind] = append(r.handlers[kind], f)
}

// Dispatch parses a payload and routes it; an unparsable payload is an error for the
// caller to log (a newer schema's kind is simply ignored).
func (r *Router) Dispatch(payload string) error {
	var inv Invalidation
	if err := json.Unmarshal([]byte(payload), &inv); err != nil {
		return fmt.Errorf("invalidation %q: %w", payload, err)
	}
	r.mu.RLock()
	hs := r.handlers[inv.Kind]
	r.mu.RUnlock()
	for _, f := range hs {
		f(inv)
	}
	return nil
}
