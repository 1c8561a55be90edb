package api_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/sensordata/sensorapi/pkg/testenv"
)

var env *testenv.Env

// Shapes every resource's fields share (API.md §3).
var (
	idRe        = regexp.MustCompile(`^[0-9a-f]{24}$`)
	createdAtRe = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`)
)

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }
