// Package canon produces and checks the canonical JSON form that every
// runseal hash is computed over.
//
// The form is RFC 8785 (JCS) with one deliberate deviation: a number written
// without a fraction or exponent is an integer and is written exactly, at any
// magnitude, instead of passing through an IEEE-754 double. Object keys are
// sorted by UTF-16 code units at every depth, there is no insignificant
// whitespace, strings use the minimal JCS escapes, and other numbers use the
// ECMAScript formatting JCS prescribes.
//
// The parser is strict because canonical bytes are evidence: duplicate object
// keys, invalid UTF-8, lone surrogate escapes, trailing data and nesting deeper
// than MaxDepth are refused rather than repaired, so two different inputs can
// never canonicalize to the same bytes by silent correction.
package canon

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// MaxDepth bounds nesting so hostile input cannot exhaust the stack.
const MaxDepth = 128

// SyntaxError reports malformed or non-canonicalizable JSON at a byte offset.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("json at byte %d: %s", e.Offset, e.Msg)
}

// Canonicalize returns the canonical form of one JSON value.
func Canonicalize(in []byte) ([]byte, error) {
	p := parser{in: in}
	p.skipWS()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.skipWS()
	if p.pos != len(p.in) {
		return nil, p.fail("trailing data after the value")
	}
	var out bytes.Buffer
	out.Grow(len(in))
	v.write(&out)
	return out.Bytes(), nil
}

// IsCanonical reports whether b is already in canonical form.
func IsCanonical(b []byte) bool {
	c, err := Canonicalize(b)
	return err == nil && bytes.Equal(b, c)
}

// Value is a parsed JSON value, kept in a form that re-serializes exactly.
// It is exported so callers can read fields of a canonical object without a
// second parser that might disagree with this one.
type Value struct {
	Kind    Kind
	Str     string   // String: the decoded string; Number: the canonical literal
	Bool    bool     // Bool
	Members []Member // Object, sorted canonically
	Items   []Value  // Array
}

// Member is one object member.
type Member struct {
	Key   string
	Value Value
}

// Kind says which JSON type a Value holds.
type Kind uint8

// The JSON value kinds.
const (
	Null Kind = iota
	Bool
	Number
	String
	Array
	Object
)

// Parse parses one JSON value strictly (the same rules as Canonicalize).
func Parse(in []byte) (Value, error) {
	p := parser{in: in}
	p.skipWS()
	v, err := p.value(0)
	if err != nil {
		return Value{}, err
	}
	p.skipWS()
	if p.pos != len(p.in) {
		return Value{}, p.fail("trailing data after the value")
	}
	return v, nil
}

// Marshal writes v in canonical form.
func (v Value) Marshal() []byte {
	var b bytes.Buffer
	v.write(&b)
	return b.Bytes()
}

// Get returns the member named key of an object.
func (v Value) Get(key string) (Value, bool) {
	for _, m := range v.Members {
		if m.Key == key {
			return m.Value, true
		}
	}
	return Value{}, false
}

// IsInteger reports whether v is a number written as an integer.
func (v Value) IsInteger() bool {
	if v.Kind != Number || v.Str == "" {
		return false
	}
	s := v.Str
	if s[0] == '-' {
		s = s[1:]
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return len(s) > 0
}

// NewObject builds an object value, sorting members canonically. It refuses
// duplicate keys for the same reason the parser does.
func NewObject(members []Member) (Value, error) {
	ms := slices.Clone(members)
	sortMembers(ms)
	for i := 1; i < len(ms); i++ {
		if ms[i].Key == ms[i-1].Key {
			return Value{}, fmt.Errorf("duplicate object key %q", ms[i].Key)
		}
	}
	return Value{Kind: Object, Members: ms}, nil
}

// MarshalAround writes object v in canonical form in two parts around the
// value of its member key: v.Marshal() is before, that value's canonical
// form, then after. A caller writing many objects that differ only in that
// value (a record body's seq) sorts and encodes the rest once. ok is false
// when v is not an object or has no member key.
func (v Value) MarshalAround(key string) (before, after []byte, ok bool) {
	if v.Kind != Object {
		return nil, nil, false
	}
	i := slices.IndexFunc(v.Members, func(m Member) bool { return m.Key == key })
	if i < 0 {
		return nil, nil, false
	}
	var b bytes.Buffer
	b.Grow(256)
	b.WriteByte('{')
	for k, m := range v.Members {
		if k > 0 {
			b.WriteByte(',')
		}
		writeString(&b, m.Key)
		b.WriteByte(':')
		if k == i {
			before = b.Bytes() // up to here; the value is left out
			continue
		}
		m.Value.write(&b)
	}
	b.WriteByte('}')
	out := b.Bytes()
	n := len(before)
	return out[:n:n], out[n:], true
}

// StringValue returns a JSON string value.
func StringValue(s string) Value { return Value{Kind: String, Str: s} }

// UintValue returns a JSON integer value.
func UintValue(n uint64) Value { return Value{Kind: Number, Str: strconv.FormatUint(n, 10)} }

type parser struct {
	in  []byte
	pos int
}

func (p *parser) fail(msg string) error { return &SyntaxError{Offset: p.pos, Msg: msg} }

func (p *parser) skipWS() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (Value, error) {
	if depth > MaxDepth {
		return Value{}, p.fail("nesting deeper than 128")
	}
	if p.pos >= len(p.in) {
		return Value{}, p.fail("unexpected end of input")
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, err := p.str()
		return Value{Kind: String, Str: s}, err
	case c == 't':
		return Value{Kind: Bool, Bool: true}, p.literal("true")
	case c == 'f':
		return Value{Kind: Bool}, p.literal("false")
	case c == 'n':
		return Value{Kind: Null}, p.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	default:
		return Value{}, p.fail(fmt.Sprintf("unexpected character %q", c))
	}
}

func (p *parser) literal(lit string) error {
	if !bytes.HasPrefix(p.in[p.pos:], []byte(lit)) {
		return p.fail("invalid literal")
	}
	p.pos += len(lit)
	return nil
}

func (p *parser) object(depth int) (Value, error) {
	p.pos++ // {
	v := Value{Kind: Object}
	p.skipWS()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		return v, nil
	}
	for {
		p.skipWS()
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return Value{}, p.fail("expected an object key")
		}
		k, err := p.str()
		if err != nil {
			return Value{}, err
		}
		p.skipWS()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return Value{}, p.fail("expected ':' after object key")
		}
		p.pos++
		p.skipWS()
		m, err := p.value(depth + 1)
		if err != nil {
			return Value{}, err
		}
		v.Members = append(v.Members, Member{Key: k, Value: m})
		p.skipWS()
		if p.pos >= len(p.in) {
			return Value{}, p.fail("unterminated object")
		}
		if p.in[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.in[p.pos] == '}' {
			p.pos++
			break
		}
		return Value{}, p.fail("expected ',' or '}' in object")
	}
	sortMembers(v.Members)
	for i := 1; i < len(v.Members); i++ {
		if v.Members[i].Key == v.Members[i-1].Key {
			return Value{}, p.fail(fmt.Sprintf("duplicate object key %q", v.Members[i].Key))
		}
	}
	return v, nil
}

func (p *parser) array(depth int) (Value, error) {
	p.pos++ // [
	v := Value{Kind: Array}
	p.skipWS()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		return v, nil
	}
	for {
		p.skipWS()
		it, err := p.value(depth + 1)
		if err != nil {
			return Value{}, err
		}
		v.Items = append(v.Items, it)
		p.skipWS()
		if p.pos >= len(p.in) {
			return Value{}, p.fail("unterminated array")
		}
		if p.in[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.in[p.pos] == ']' {
			p.pos++
			return v, nil
		}
		return Value{}, p.fail("expected ',' or ']' in array")
	}
}

func (p *parser) str() (string, error) {
	p.pos++ // opening quote
	// Fast path: a string of plain ASCII with no escapes is its own bytes.
	// Anything else falls to the loop below at the same position, with the
	// plain prefix already taken, so errors and results are unchanged.
	start := p.pos
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		if c == '"' {
			p.pos++
			return string(p.in[start : p.pos-1]), nil
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
		p.pos++
	}
	b := append([]byte(nil), p.in[start:p.pos]...)
	for {
		if p.pos >= len(p.in) {
			return "", p.fail("unterminated string")
		}
		c := p.in[p.pos]
		switch {
		case c == '"':
			p.pos++
			return string(b), nil
		case c == '\\':
			if p.pos+1 >= len(p.in) {
				return "", p.fail("unterminated escape")
			}
			e := p.in[p.pos+1]
			p.pos += 2
			switch e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, err := p.hex4()
				if err != nil {
					return "", err
				}
				if utf16.IsSurrogate(r) {
					if r >= 0xDC00 || p.pos+6 > len(p.in) || p.in[p.pos] != '\\' || p.in[p.pos+1] != 'u' {
						return "", p.fail("lone UTF-16 surrogate in string escape")
					}
					p.pos += 2
					r2, err := p.hex4()
					if err != nil {
						return "", err
					}
					dec := utf16.DecodeRune(r, r2)
					if dec == utf8.RuneError {
						return "", p.fail("invalid UTF-16 surrogate pair in string escape")
					}
					r = dec
				}
				b = utf8.AppendRune(b, r)
			default:
				return "", p.fail(fmt.Sprintf("invalid escape \\%c", e))
			}
		case c < 0x20:
			return "", p.fail("unescaped control character in string")
		case c < utf8.RuneSelf:
			b = append(b, c)
			p.pos++
		default:
			r, n := utf8.DecodeRune(p.in[p.pos:])
			if r == utf8.RuneError && n <= 1 {
				return "", p.fail("invalid UTF-8 in string")
			}
			b = append(b, p.in[p.pos:p.pos+n]...)
			p.pos += n
		}
	}
}

func (p *parser) hex4() (rune, error) {
	if p.pos+4 > len(p.in) {
		return 0, p.fail("short \\u escape")
	}
	n, err := strconv.ParseUint(string(p.in[p.pos:p.pos+4]), 16, 16)
	if err != nil {
		return 0, p.fail("invalid \\u escape")
	}
	p.pos += 4
	return rune(n), nil
}

func (p *parser) number() (Value, error) {
	start := p.pos
	if p.in[p.pos] == '-' {
		p.pos++
	}
	digits := func() int {
		n := 0
		for p.pos < len(p.in) && p.in[p.pos] >= '0' && p.in[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	intStart := p.pos
	if digits() == 0 {
		return Value{}, p.fail("invalid number")
	}
	if p.in[intStart] == '0' && p.pos-intStart > 1 {
		return Value{}, p.fail("number with a leading zero")
	}
	integer := true
	if p.pos < len(p.in) && p.in[p.pos] == '.' {
		integer = false
		p.pos++
		if digits() == 0 {
			return Value{}, p.fail("invalid number fraction")
		}
	}
	if p.pos < len(p.in) && (p.in[p.pos] == 'e' || p.in[p.pos] == 'E') {
		integer = false
		p.pos++
		if p.pos < len(p.in) && (p.in[p.pos] == '+' || p.in[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return Value{}, p.fail("invalid number exponent")
		}
	}
	lit := string(p.in[start:p.pos])
	if integer {
		if lit == "-0" {
			lit = "0"
		}
		return Value{Kind: Number, Str: lit}, nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return Value{}, &SyntaxError{Offset: start, Msg: "number out of range for a double"}
	}
	s, err := jcs.NumberToJSON(f)
	if err != nil {
		return Value{}, &SyntaxError{Offset: start, Msg: err.Error()}
	}
	return Value{Kind: Number, Str: s}, nil
}

func sortMembers(ms []Member) {
	slices.SortStableFunc(ms, func(a, b Member) int { return compareUTF16(a.Key, b.Key) })
}

// compareUTF16 orders strings by UTF-16 code units, as RFC 8785 requires; this
// differs from byte order only for characters above U+FFFF against U+E000..U+FFFF.
func compareUTF16(a, b string) int {
	if isASCII(a) && isASCII(b) {
		return strings.Compare(a, b)
	}
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	return slices.Compare(ua, ub)
}

func (v Value) write(out *bytes.Buffer) {
	switch v.Kind {
	case Null:
		out.WriteString("null")
	case Bool:
		if v.Bool {
			out.WriteString("true")
		} else {
			out.WriteString("false")
		}
	case Number:
		out.WriteString(v.Str)
	case String:
		writeString(out, v.Str)
	case Array:
		out.WriteByte('[')
		for i, it := range v.Items {
			if i > 0 {
				out.WriteByte(',')
			}
			it.write(out)
		}
		out.WriteByte(']')
	case Object:
		out.WriteByte('{')
		for i, m := range v.Members {
			if i > 0 {
				out.WriteByte(',')
			}
			writeString(out, m.Key)
			out.WriteByte(':')
			m.Value.write(out)
		}
		out.WriteByte('}')
	}
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

const hexDigits = "0123456789abcdef"

func writeString(out *bytes.Buffer, s string) {
	out.WriteByte('"')
	// Copy the runs of bytes that need no escape whole: most strings are
	// one such run, and byte-at-a-time writing dominated encoding time.
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		out.WriteString(s[start:i])
		start = i + 1
		switch c {
		case '"':
			out.WriteString(`\"`)
		case '\\':
			out.WriteString(`\\`)
		case '\b':
			out.WriteString(`\b`)
		case '\f':
			out.WriteString(`\f`)
		case '\n':
			out.WriteString(`\n`)
		case '\r':
			out.WriteString(`\r`)
		case '\t':
			out.WriteString(`\t`)
		default: // another control character
			out.WriteString(`\u00`)
			out.WriteByte(hexDigits[c>>4])
			out.WriteByte(hexDigits[c&0xF])
		}
	}
	out.WriteString(s[start:])
	out.WriteByte('"')
}
