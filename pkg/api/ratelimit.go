package api

import (
	"crypto/sha256"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/time/rate"

	"github.com/sensordata/sensorapi/pkg/apierr"
)

// limiters holds one token bucket per API token (keyed by the token's hash, so clear
// tokens are not kept). Only authenticated tokens get one, so the map is bounded by
// the number of valid tokens.
type limiters struct {
	mu      sync.Mutex
	perSec  rate.Limit
	burst   int
	buckets map[[32]byte]*rate.Limiter
}

func newLimiters(perSec float64, burst int) *limiters {
	if perSec <= 0 {
		return nil
	}
	return &limiters{perSec: rate.Limit(perSec), burst: max(1, burst), buckets: map[[32]byte]*rate.Limiter{}}
}

// allow takes one token from the bucket of tok, or tells how long to wait.
func (l *limiters) allow(tok string) (bool, time.Duration) {
	key := sha256.Sum256([]byte(tok))
	l.mu.Lock()
	b, ok := l.buckets[key]
	if !ok {
		b = rate.NewLimiter(l.perSec, l.burst)
		l.buckets[key] = b
	}
	l.mu.Unlock()
	r := b.Reserve()
	if d := r.Delay(); d > 0 {
		r.Cancel()
		return false, d
	}
	return true, 0
}

// rateLimit answers 429 with Retry-After once a token's bucket is empty.
func (s *Server) rateLimit(c *gin.Context, tok string) bool {
	if s.limits == nil {
		return true
	}
	ok, wait := s.limits.allow(tok)
	if ok {
		return true
	}
	secs := strconv.Itoa(int(math.Ceil(wait.Seconds())))
	s.writeError(c, apierr.TooManyRequests(secs))
	return false
}
