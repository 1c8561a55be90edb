package api

import (
	"context"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
)

// readHorizon is the raw horizon for a read whose range starts at start (nil: at the
// first value): when retention removed values the range covers, the answer comes from
// the tiers before the horizon and says so in X-Raw-Horizon (API.md §16). nil when no
// value was removed, or the range lies after the horizon. When it cannot be read, the
// read goes on with the last one known, like writes.
func (s *Server) readHorizon(c *gin.Context, start *time.Time) *time.Time {
	h, ok := s.Horizon.Known(c, s.Log)
	if !ok || (start != nil && !start.Before(h)) {
		return nil
	}
	c.Header("X-Raw-Horizon", strconv.FormatInt(h.UnixMilli(), 10))
	return &h
}

// rollupsUntil is the rollup tiles' mark (pkg/values rollupmark.go): reads take the
// tiles ending by it only. When it cannot be read, the last one known is used (none at
// first: no tile at all, slower but exact).
func (s *Server) rollupsUntil(ctx context.Context) *time.Time {
	t, err := s.Rollups.Get(ctx)
	if err != nil {
		s.Log.Warn("rollup tiles' mark unreadable; going on with the last one known", "error", err.Error())
	}
	return &t
}
