package validate

import (
	"encoding/json"
	"unicode/utf8"
)

// Why PostgreSQL's jsonb input (in a UTF8 database) refuses a JSON text, each of
// which would otherwise fail the write with an SQLSTATE of class 22 (in parentheses).
const (
	// lax JSON that a lenient parser let through (22P02)
	MsgJSONText = "Expected valid JSON."
	// bytes that are not UTF-8 (22021)
	MsgUTF8 = "Text must be valid UTF-8."
	// text cannot hold NUL (22P05)
	MsgNULEscape = `Strings and keys may not contain the null character (\u0000).`
	// a surrogate escape not in a high-low pair (22P02)
	MsgLoneSurrogate = `Strings and keys may not contain an unpaired surrogate escape (\ud800 to \udfff).`
	// beyond the numeric type (22003)
	MsgNumericRange = "Numbers must be less than 1e131072 in magnitude, with at most 16383 digits after the decimal point."
)

// JSONB tells why PostgreSQL would refuse b as jsonb ("" when it accepts it): invalid
// JSON or UTF-8, the escape \u0000 (text cannot hold NUL), an unpaired surrogate
// escape, or a number beyond the numeric type. encoding/json accepts the last three
// (it reads a lone surrogate as U+FFFD), so text that it validated, or that a lenient
// parser passed on with its escapes untouched, reaches the database with them.
func JSONB(b []byte) string {
	switch {
	case !utf8.Valid(b):
		return MsgUTF8
	case !json.Valid(b):
		return MsgJSONText
	}
	for i := 0; i < len(b); {
		var n int
		var msg string
		switch c := b[i]; {
		case c == '"':
			n, msg = jsonbString(b[i:])
		case c == '-' || (c >= '0' && c <= '9'):
			n, msg = jsonbNumber(b[i:])
		default:
			n = 1
		}
		if msg != "" {
			return msg
		}
		i += n
	}
	return ""
}

// jsonbString checks the escapes of the valid JSON string that b starts with and
// returns its length with both quotes.
func jsonbString(b []byte) (int, string) {
	pendingHigh := false // a high surrogate escape that must be followed by a low one
	for i := 1; ; {
		switch b[i] {
		case '"':
			if pendingHigh {
				return 0, MsgLoneSurrogate
			}
			return i + 1, ""
		case '\\':
			if b[i+1] != 'u' {
				if pendingHigh {
					return 0, MsgLoneSurrogate
				}
				i += 2
				continue
			}
			r := hex4(b[i+2 : i+6])
			switch {
			case r == 0:
				return 0, MsgNULEscape
			case pendingHigh != (r >= 0xdc00 && r <= 0xdfff):
				return 0, MsgLoneSurrogate
			}
			pendingHigh = r >= 0xd800 && r <= 0xdbff
			i += 6
		default:
			if pendingHigh {
				return 0, MsgLoneSurrogate
			}
			i++
		}
	}
}

// hex4 reads the four hex digits of a \u escape (valid JSON: they are hex digits).
func hex4(h []byte) rune {
	var r rune
	for _, c := range h {
		switch {
		case c <= '9':
			r = r<<4 | rune(c-'0')
		case c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			r = r<<4 | rune(c-'a'+10)
		}
	}
	return r
}

// PostgreSQL's numeric (numeric.c): an exponent of at most PG_INT32_MAX/2 as written,
// a leading digit of weight at most 32767 in base 10000 (decimal exponent 131071), and
// at most 16383 digits after the point. The least weight cannot be reached without
// passing the scale's limit first.
const (
	maxNumericExponent = 1<<30 - 1
	maxNumericWeight   = 131071
	maxNumericScale    = 16383
)

// jsonbNumber checks that the valid JSON number b starts with fits numeric, and
// returns its length.
func jsonbNumber(b []byte) (int, string) {
	i := 0
	if b[i] == '-' {
		i++
	}
	whole, i := digits(b, i)
	var frac []byte
	if i < len(b) && b[i] == '.' {
		frac, i = digits(b, i+1)
	}
	exp := 0
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		neg := b[i] == '-'
		if b[i] == '-' || b[i] == '+' {
			i++
		}
		var e []byte
		e, i = digits(b, i)
		for _, c := range e {
			exp = min(exp*10+int(c-'0'), maxNumericExponent+1) // saturates: past the limit is enough
		}
		if exp > maxNumericExponent {
			return 0, MsgNumericRange
		}
		if neg {
			exp = -exp
		}
	}
	if len(frac)-exp > maxNumericScale {
		return 0, MsgNumericRange
	}
	if w, nonzero := leadingWeight(whole, frac); nonzero && w+exp > maxNumericWeight {
		return 0, MsgNumericRange
	}
	return i, ""
}

// digits returns the run of decimal digits in b from i, and the index after it.
func digits(b []byte, i int) ([]byte, int) {
	s := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return b[s:i], i
}

// leadingWeight is the decimal exponent of the first nonzero digit of whole.frac;
// nonzero is false when every digit is 0.
func leadingWeight(whole, frac []byte) (w int, nonzero bool) {
	for i, c := range whole {
		if c != '0' {
			return len(whole) - 1 - i, true
		}
	}
	for i, c := range frac {
		if c != '0' {
			return -(i + 1), true
		}
	}
	return 0, false
}
