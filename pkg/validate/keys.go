package validate

import (
	"regexp"
	"strings"
)

var (
	labelRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_\-.:]{0,99}$`)
	idRe    = regexp.MustCompile(`^[0-9a-f]{24}$`)
)

// MsgLabel explains the label rule.
const MsgLabel = "Enter a valid label: 1 to 100 characters of a-z, 0-9, _ - . : starting with a letter or digit."

// Label lowercases a label and reports whether it is valid (API.md §3).
func Label(s string) (string, bool) {
	l := strings.ToLower(s)
	return l, labelRe.MatchString(l)
}

// IsID tells whether s has the form of a public id (24 lowercase hex characters).
func IsID(s string) bool { return idRe.MatchString(s) }

// Key is a parsed path or body key: an id, or a ~label.
type Key struct {
	ID    string // set for an id
	Label string // set for a ~label (normalized)
	Raw   string // as given
}

// ParseKey reads "id" or "~label". ok is false when it can match nothing (which callers
// answer as not found, never as a validation error on a path).
func ParseKey(s string) (k Key, ok bool) {
	k.Raw = s
	if rest, isLabel := strings.CutPrefix(s, "~"); isLabel {
		l, valid := Label(rest)
		k.Label = l
		return k, valid
	}
	k.ID = s
	return k, IsID(s)
}
