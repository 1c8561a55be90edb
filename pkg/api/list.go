package api

import (
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/sensordata/sensorapi/pkg/store"
)

// listBody is the DRF list shape: count, next and previous (absolute URLs keeping every
// other query parameter, or null) and the page's results.
func (s *Server) listBody(c *gin.Context, p store.ListParams, count int, results any) gin.H {
	link := func(page int) *string { return s.pageLink(c, page) }
	var next, prev *string
	if p.Page*p.PageSize < count {
		next = link(p.Page + 1)
	}
	if p.Page > 1 {
		// from past the end, "previous" leads to the last page that has rows
		last := max(1, (count+p.PageSize-1)/p.PageSize)
		prev = link(min(p.Page-1, last))
	}
	return gin.H{"count": count, "next": next, "previous": prev, "results": results}
}

// pageLink is the request's URL on another page, keeping other parameters but never
// the token.
func (s *Server) pageLink(c *gin.Context, page int) *string {
	q := c.Request.URL.Query()
	q.Del("token")
	q.Set("page", strconv.Itoa(page))
	u := s.baseURL(c) + c.Request.URL.Path + "?" + q.Encode()
	return &u
}
