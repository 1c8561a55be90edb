package api_test

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

var env *testenv.Env

// Shapes every resource's fields share (API.md §3).
var (
	idRe        = regexp.MustCompile(`^[0-9a-f]{24}$`)
	createdAtRe = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`)
)

// TestMain runs the suite and reports how many responses were checked against
// docs/openapi.yaml. A full run fails when some documented operation was never seen
// succeeding: its success shape would then be untested (and with no response at all,
// the validator is not hooked in).
func TestMain(m *testing.M) {
	code := testenv.Run(m, &env)
	fmt.Fprintf(os.Stderr, "openapi: %d responses validated against docs/openapi.yaml\n", testenv.Validated())
	if code == 0 && flag.Lookup("test.run").Value.String() == "" {
		if missing := testenv.Unexercised(); len(missing) > 0 {
			fmt.Fprintf(os.Stderr, "openapi: no test saw these operations succeed:\n  %s\n", strings.Join(missing, "\n  "))
			code = 1
		}
	}
	os.Exit(code)
}
