package synthetic_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sensordata/sensorapi/pkg/synthetic"
	"github.com/sensordata/sensorapi/querybuilder"
)

// TestCallShapes pins what the parser answers for calls of every argument shape of the
// function table (querybuilder.Function): the counts, the series, the constant
// integers, the periods and zones, and their messages (API text), against
// testdata/calls.golden. A new function's entry adds its cases there.
func TestCallShapes(t *testing.T) {
	resolve := func(ref string) (querybuilder.Ref, bool, error) {
		return querybuilder.Ref{Key: 1, ID: ref}, ref != "none", nil
	}
	var b strings.Builder
	for _, x := range []string{
		`foo({{a}})`, `2 * bar({{a}})`, `abs({{a}}, 1)`, `abs()`, `where({{a}}, 1)`, `where({{a}}, 1, 2)`,
		`round({{a}})`, `round({{a}}, 2, 3)`, `round({{a}}, 2)`, `round({{a}}, 16)`, `round({{a}}, -15)`, `round({{a}}, 1.5)`, `round({{a}}, {{b}})`, `round(2, 1)`,
		`shift({{a}})`, `shift({{a}}, 0)`, `shift({{a}}, 100001)`, `shift({{a}}, 3)`, `shift(2, 3)`, `shift({{a}}, "1H")`,
		`diff(2)`, `diff({{a}})`, `cumsum({{a}}, 1)`, `diff({{a}} + 1)`,
		`mean({{a}})`, `mean({{a}}, "1H", "UTC", 3)`, `mean({{a}}, 1)`, `mean({{a}}, "5X")`, `mean({{a}}, "1H", "Mars/X")`, `mean({{a}}, "1H", 3)`,
		`mean({{a}}, "1D", "Europe/Madrid")`, `mean(2, "1H")`, `sum({{a}}, "1W")`, `std({{a}}, "1M", "UTC")`,
		`min({{a}})`, `min({{a}}, {{b}})`, `min({{a}}, "1H")`, `min({{a}}, "1H", "Europe/Berlin")`, `max(2, "1H")`, `max({{a}}, "1H", "x", 4)`, `min({{a}}, 2, 3)`,
		`max({{a}}, "bad")`, `MEAN({{a}}, "1H")`, `Round({{a}}, 1)`, `min({{a}}, "1H" + 1)`, `mean({{a}}, ("1H"))`,
		`mean({{none}}, "1H")`, `round({{a}}, {{none}})`, `mean({{a}}, "1H", {{none}})`,
	} {
		e, err := synthetic.Parse(x, resolve)
		if err != nil {
			fmt.Fprintf(&b, "%s => ERR %v\n", x, err)
			continue
		}
		fmt.Fprintf(&b, "%s => %s N=%d P=%v Z=%q args=%d\n", x, e.Op, e.N, e.Period, e.Zone, len(e.Args))
	}
	path := filepath.Join("testdata", "calls.golden")
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("%s differs from the parser's answers\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}
