package api

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

func (s *Server) accountRoutes(v2 *gin.RouterGroup) {
	v2.GET("/account", wrap(s.getAccount))
}

// getAccount answers who the token belongs to; tools use it to check a token.
func (s *Server) getAccount(c *gin.Context) error {
	a := account(c)
	c.JSON(http.StatusOK, gin.H{"name": a.Name, "decimalPlaces": a.DecimalPlaces})
	return nil
}
