package validate

import (
	"strings"
	"testing"
)

func FuzzLabelAndKey(f *testing.F) {
	for _, s := range []string{"kitchen", "~Kitchen", "~", "0123456789abcdef01234567", "~a'; DROP TABLE x;--", "Ä", "~" + strings.Repeat("a", 101)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if l, ok := Label(s); ok {
			if l != strings.ToLower(l) || len(l) < 1 || len(l) > 100 || strings.ContainsAny(l, " '\"\\;%") {
				t.Fatalf("label %q accepted from %q", l, s)
			}
		}
		k, ok := ParseKey(s)
		if !ok {
			return
		}
		switch {
		case k.ID != "" && (len(k.ID) != 24 || k.Label != ""):
			t.Fatalf("key %q parsed as %+v", s, k)
		case k.ID == "" && (k.Label == "" || !strings.HasPrefix(s, "~")):
			t.Fatalf("key %q parsed as %+v", s, k)
		}
	})
}
