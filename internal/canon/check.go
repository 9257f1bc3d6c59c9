package canon

import (
	"bytes"
	"encoding/binary"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// Check reports whether b is exactly one JSON value in canonical form, as
// IsCanonical does, but in one pass and without building a Value. A verifier
// that streams gigabytes of records needs the canonical check at hashing
// speed; the answer is the same as IsCanonical's for every input, which the
// differential fuzz target holds it to.
//
// A nil error means IsCanonical(b) is true. A non-nil error is a
// *SyntaxError whose offset points at the first byte that is malformed or
// not canonical.
func Check(b []byte) error {
	c := checker{in: b}
	if err := c.value(0, nil); err != nil {
		return err
	}
	if c.pos != len(c.in) {
		return c.fail("trailing data after the value")
	}
	return nil
}

// CheckObject is Check for a value that must be an object. It calls member
// for each top-level member, in order, with the key as written between its
// quotes (escapes intact: a canonical key spells each character one way, so
// a plain ASCII name can be compared directly) and the exact bytes of its
// value. The slices alias b. If b is not a canonical object, CheckObject
// returns an error, possibly after some calls to member.
func CheckObject(b []byte, member func(key, value []byte)) error {
	c := checker{in: b}
	if len(b) == 0 || b[0] != '{' {
		return c.fail("not a JSON object")
	}
	if err := c.value(0, member); err != nil {
		return err
	}
	if c.pos != len(c.in) {
		return c.fail("trailing data after the value")
	}
	return nil
}

type checker struct {
	in  []byte
	pos int
}

func (c *checker) fail(msg string) error { return &SyntaxError{Offset: c.pos, Msg: msg} }

// value checks one value at c.pos. top, when not nil, receives the members
// of the object being checked (used for the outermost object only).
func (c *checker) value(depth int, top func(key, value []byte)) error {
	if depth > MaxDepth {
		return c.fail("nesting deeper than 128")
	}
	if c.pos >= len(c.in) {
		return c.fail("unexpected end of input")
	}
	switch ch := c.in[c.pos]; {
	case ch == '{':
		return c.object(depth, top)
	case ch == '[':
		return c.array(depth)
	case ch == '"':
		_, _, err := c.str()
		return err
	case ch == 't':
		return c.literal("true")
	case ch == 'f':
		return c.literal("false")
	case ch == 'n':
		return c.literal("null")
	case ch == '-' || (ch >= '0' && ch <= '9'):
		return c.number()
	default:
		return c.fail("unexpected character or whitespace where a value is expected")
	}
}

func (c *checker) literal(lit string) error {
	if !bytes.HasPrefix(c.in[c.pos:], []byte(lit)) {
		return c.fail("invalid literal")
	}
	c.pos += len(lit)
	return nil
}

func (c *checker) object(depth int, top func(key, value []byte)) error {
	c.pos++ // {
	if c.pos < len(c.in) && c.in[c.pos] == '}' {
		c.pos++
		return nil
	}
	var prev []byte // the previous key, as written
	for {
		if c.pos >= len(c.in) || c.in[c.pos] != '"' {
			return c.fail("expected an object key")
		}
		keyStart := c.pos
		start, end, err := c.str()
		if err != nil {
			return err
		}
		key := c.in[start:end]
		if prev != nil {
			// Canonical members are sorted by UTF-16 code units; strictly
			// increasing also rules out duplicate keys.
			if cmp := compareCanonicalStrings(prev, key); cmp >= 0 {
				c.pos = keyStart
				if cmp == 0 {
					return c.fail("duplicate object key")
				}
				return c.fail("object keys are not in canonical order")
			}
		}
		prev = key
		if c.pos >= len(c.in) || c.in[c.pos] != ':' {
			return c.fail("expected ':' after object key")
		}
		c.pos++
		valStart := c.pos
		if err := c.value(depth+1, nil); err != nil {
			return err
		}
		if top != nil {
			top(key, c.in[valStart:c.pos])
		}
		if c.pos >= len(c.in) {
			return c.fail("unterminated object")
		}
		switch c.in[c.pos] {
		case ',':
			c.pos++
		case '}':
			c.pos++
			return nil
		default:
			return c.fail("expected ',' or '}' in object")
		}
	}
}

func (c *checker) array(depth int) error {
	c.pos++ // [
	if c.pos < len(c.in) && c.in[c.pos] == ']' {
		c.pos++
		return nil
	}
	for {
		if err := c.value(depth+1, nil); err != nil {
			return err
		}
		if c.pos >= len(c.in) {
			return c.fail("unterminated array")
		}
		switch c.in[c.pos] {
		case ',':
			c.pos++
		case ']':
			c.pos++
			return nil
		default:
			return c.fail("expected ',' or ']' in array")
		}
	}
}

// str checks a string in canonical spelling and returns the span of its
// contents (between the quotes).
func (c *checker) str() (start, end int, err error) {
	c.pos++ // opening quote
	start = c.pos
	c.pos += plainLen(c.in[c.pos:]) // plain.go: the common case, vectorised
	if c.pos < len(c.in) && c.in[c.pos] == '"' {
		// Plain to its closing quote, the common case: the loop below
		// would test a word and a byte only to find the quote.
		end = c.pos
		c.pos++
		return start, end, nil
	}
	for {
		// The common case, plain printable ASCII: eight bytes at a time
		// while none of them needs a closer look, then byte by byte.
		for c.pos+8 <= len(c.in) && plainASCII8(binary.LittleEndian.Uint64(c.in[c.pos:])) {
			c.pos += 8
		}
		for c.pos < len(c.in) {
			ch := c.in[c.pos]
			if ch < 0x20 || ch == '"' || ch == '\\' || ch >= utf8.RuneSelf {
				break
			}
			c.pos++
		}
		if c.pos >= len(c.in) {
			return 0, 0, c.fail("unterminated string")
		}
		ch := c.in[c.pos]
		switch {
		case ch == '"':
			end = c.pos
			c.pos++
			return start, end, nil
		case ch == '\\':
			if c.pos+1 >= len(c.in) {
				return 0, 0, c.fail("unterminated escape")
			}
			switch c.in[c.pos+1] {
			case '"', '\\', 'b', 'f', 'n', 'r', 't':
				c.pos += 2
			case 'u':
				// Only control characters without a short escape are
				// written \u00xx, in lower-case hex.
				if c.pos+6 > len(c.in) {
					return 0, 0, c.fail("short \\u escape")
				}
				h := c.in[c.pos+2 : c.pos+6]
				if h[0] != '0' || h[1] != '0' || (h[2] != '0' && h[2] != '1') || !isLowerHex(h[3]) {
					return 0, 0, c.fail("\\u escape not in canonical form")
				}
				switch string(h[2:]) {
				case "08", "09", "0a", "0c", "0d":
					return 0, 0, c.fail("\\u escape where a short escape is canonical")
				}
				c.pos += 6
			default:
				return 0, 0, c.fail("escape not in canonical form")
			}
		case ch < 0x20:
			return 0, 0, c.fail("unescaped control character in string")
		default:
			r, n := utf8.DecodeRune(c.in[c.pos:])
			if r == utf8.RuneError && n <= 1 {
				return 0, 0, c.fail("invalid UTF-8 in string")
			}
			c.pos += n
		}
	}
}

// plainASCII8 reports whether all eight bytes of x are printable ASCII
// other than '"' and '\\', by the word-at-a-time tests for a byte below a
// bound and a byte equal to a value (each exact when no byte of x has its
// high bit set, which the first test rules out).
func plainASCII8(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	if x&highs != 0 {
		return false
	}
	below20 := (x - ones*0x20) & ^x & highs
	quote := x ^ (ones * '"')
	hasQuote := (quote - ones) & ^quote & highs
	bslash := x ^ (ones * '\\')
	hasBslash := (bslash - ones) & ^bslash & highs
	return below20|hasQuote|hasBslash == 0
}

func isLowerHex(b byte) bool { return b >= '0' && b <= '9' || b >= 'a' && b <= 'f' }

func (c *checker) number() error {
	start := c.pos
	if c.in[c.pos] == '-' {
		c.pos++
	}
	digits := func() int {
		n := 0
		for c.pos < len(c.in) && c.in[c.pos] >= '0' && c.in[c.pos] <= '9' {
			c.pos++
			n++
		}
		return n
	}
	intStart := c.pos
	if digits() == 0 {
		return c.fail("invalid number")
	}
	if c.in[intStart] == '0' && c.pos-intStart > 1 {
		return c.fail("number with a leading zero")
	}
	integer := true
	if c.pos < len(c.in) && c.in[c.pos] == '.' {
		integer = false
		c.pos++
		if digits() == 0 {
			return c.fail("invalid number fraction")
		}
	}
	if c.pos < len(c.in) && (c.in[c.pos] == 'e' || c.in[c.pos] == 'E') {
		integer = false
		c.pos++
		if c.pos < len(c.in) && (c.in[c.pos] == '+' || c.in[c.pos] == '-') {
			c.pos++
		}
		if digits() == 0 {
			return c.fail("invalid number exponent")
		}
	}
	lit := c.in[start:c.pos]
	if integer {
		if string(lit) == "-0" {
			return &SyntaxError{Offset: start, Msg: "-0 is written 0 in canonical form"}
		}
		return nil
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return &SyntaxError{Offset: start, Msg: "number out of range for a double"}
	}
	s, err := jcs.NumberToJSON(f)
	if err != nil {
		return &SyntaxError{Offset: start, Msg: err.Error()}
	}
	if s != string(lit) {
		return &SyntaxError{Offset: start, Msg: "number not in canonical form"}
	}
	return nil
}

// compareCanonicalStrings orders two canonically escaped string contents by
// the UTF-16 code units of what they decode to, without decoding them into
// memory.
func compareCanonicalStrings(a, b []byte) int {
	for len(a) > 0 && len(b) > 0 {
		// An ASCII byte outside an escape is the character itself, one
		// UTF-16 code unit of the same value: two such bytes compare as
		// the characters do. Object keys are mostly ASCII names, which
		// this decides at the first byte that differs.
		if ca, cb := a[0], b[0]; ca < utf8.RuneSelf && cb < utf8.RuneSelf && ca != '\\' && cb != '\\' {
			if ca != cb {
				if ca < cb {
					return -1
				}
				return 1
			}
			a, b = a[1:], b[1:]
			continue
		}
		ra, na := decodeCanonical(a)
		rb, nb := decodeCanonical(b)
		if ra != rb {
			return compareUTF16Rune(ra, rb)
		}
		a, b = a[na:], b[nb:]
	}
	switch {
	case len(a) == len(b):
		return 0
	case len(a) == 0:
		return -1
	default:
		return 1
	}
}

// decodeCanonical decodes the first character of a canonical string's
// contents, which the checker has already validated.
func decodeCanonical(s []byte) (rune, int) {
	if s[0] != '\\' {
		if s[0] < utf8.RuneSelf {
			return rune(s[0]), 1
		}
		return utf8.DecodeRune(s)
	}
	switch s[1] {
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		return rune(unhex(s[4])<<4 | unhex(s[5])), 6
	default: // '"' or '\\'
		return rune(s[1]), 2
	}
}

func unhex(b byte) byte {
	if b >= 'a' {
		return b - 'a' + 10
	}
	return b - '0'
}

// compareUTF16Rune orders two different characters by their UTF-16 code
// units: code point order, except that characters above U+FFFF (encoded
// with surrogates from U+D800) sort before U+E000..U+FFFF.
func compareUTF16Rune(a, b rune) int {
	ua, ub := a, b
	if a > 0xFFFF {
		ua, _ = utf16.EncodeRune(a)
	}
	if b > 0xFFFF {
		ub, _ = utf16.EncodeRune(b)
	}
	if ua != ub {
		if ua < ub {
			return -1
		}
		return 1
	}
	// Same high surrogate: the low surrogates decide, in code point order.
	if a < b {
		return -1
	}
	return 1
}
