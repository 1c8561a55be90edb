package api_test

import (
	"flag"
	"fmt"
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

// TestMain runs the suite and reports how many responses were checked against
// docs/openapi.yaml; a full run that checked none fails, since then the validator is
// not hooked in.
func TestMain(m *testing.M) {
	code := testenv.Run(m, &env)
	n := testenv.Validated()
	fmt.Fprintf(os.Stderr, "openapi: %d responses validated against docs/openapi.yaml\n", n)
	if code == 0 && n == 0 && flag.Lookup("test.run").Value.String() == "" {
		fmt.Fprintln(os.Stderr, "openapi: no response was validated")
		code = 1
	}
	os.Exit(code)
}
