package api

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/sensordata/sensorapi/pkg/store"
)

// listPage answers a page of rows in their response shape as the DRF list body.
func listPage[T, R any](s *Server, c *gin.Context, p store.ListParams, rows []T, count int, shape func(*T, string) R) {
	base := s.baseURL(c)
	results := make([]R, len(rows))
	for i := range rows {
		results[i] = shape(&rows[i], base)
	}
	c.JSON(http.StatusOK, s.listBody(c, p, count, results))
}

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
