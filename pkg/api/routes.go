package api

import "github.com/gin-gonic/gin"

// routes registers the resource routes (paths without trailing slash; see
// trimTrailingSlash). Each resource keeps its routes beside its handlers.
func (s *Server) routes(v2, v16 *gin.RouterGroup) {
	s.accountRoutes(v2)
	s.valueRoutes(v16)
	s.importRoutes(v16)
	s.userRoutes(v2)
	s.deviceRoutes(v2)
	s.tokenRoutes(v2)
	s.resampleRoutes(v16)
	s.eventRoutes(v2)
}

// statisticsRoutes registers E7 on its own group (detail-only 401 bodies).
func (s *Server) statisticsRoutes(g *gin.RouterGroup) {
	g.POST("", wrap(s.statistics))
}
