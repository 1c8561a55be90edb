package analytics

import (
	"strconv"
	"strings"
	"time"

	"github.com/sensordata/sensorapi/querybuilder"
)

// ParsePeriod reads a pandas offset alias as E8's period (API.md §8): nT, nH, nD
// (n from 1 to 100000, 1 may be omitted), W or M. Synthetic window functions read
// their periods with it (API.md §17).
func ParsePeriod(s string) (querybuilder.Period, bool) {
	switch s {
	case "W":
		return querybuilder.Period{Unit: querybuilder.Week, N: 1}, true
	case "M":
		return querybuilder.Period{Unit: querybuilder.Month, N: 1}, true
	}
	m := periodRe.FindStringSubmatch(s)
	if m == nil {
		return querybuilder.Period{}, false
	}
	n := 1
	if m[1] != "" {
		n, _ = strconv.Atoi(m[1])
	}
	if n > maxPeriodN {
		return querybuilder.Period{}, false
	}
	return querybuilder.Period{Unit: querybuilder.Unit(m[2][0]), N: n}, true
}

// PeriodForms says which periods are accepted.
const PeriodForms = periodForms

// IsZone tells whether s is an exact IANA zone name, as E8's tz must be.
func IsZone(s string) bool {
	_, err := time.LoadLocation(s)
	return err == nil && !notZones[s] && !strings.HasPrefix(s, "posix/") && !strings.HasPrefix(s, "right/")
}
