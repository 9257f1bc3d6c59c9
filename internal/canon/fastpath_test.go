package canon

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// The string fast paths must not change a single output byte, result or
// error. These are the byte-at-a-time versions they replaced, kept as the
// reference to compare against.

func (p *parser) strRef() (string, error) {
	p.pos++ // opening quote
	var b []byte
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

func writeStringRef(out *bytes.Buffer, s string) {
	out.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
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
		default:
			if c < 0x20 {
				out.WriteString(`\u00`)
				out.WriteByte(hexDigits[c>>4])
				out.WriteByte(hexDigits[c&0xF])
			} else {
				out.WriteByte(c)
			}
		}
	}
	out.WriteByte('"')
}

// pieces are what random strings are built from: plain ASCII, every kind
// of escape, control bytes, multi-byte UTF-8, invalid UTF-8, surrogates.
var pieces = []string{
	"a", "Z", "0", " ", "~", "/", "\x7f", "\"", "\\", "\\\"", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t",
	"\\u00e9", "\\u0000", "\\u001f", "\\ud83d\\ude00", "\\ud83d", "\\ude00", "\\uZZZZ", "\\x", "\\",
	"\x00", "\x01", "\x1f", "\n", "é", "€", "😀", "\xff", "\xc3", "\xed\xa0\x80",
}

func randomString(r *rand.Rand) string {
	var b []byte
	for range r.IntN(12) {
		b = append(b, pieces[r.IntN(len(pieces))]...)
	}
	return string(b)
}

func TestStrFastPathMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200000 {
		body := randomString(r)
		in := []byte("\"" + body)
		if r.IntN(4) != 0 {
			in = append(in, '"')
		}
		p1, p2 := parser{in: in}, parser{in: in}
		got, gerr := p1.str()
		want, werr := p2.strRef()
		if got != want || fmt.Sprint(gerr) != fmt.Sprint(werr) || p1.pos != p2.pos {
			t.Fatalf("case %d %q: fast (%q, %v, pos %d), reference (%q, %v, pos %d)", i, in, got, gerr, p1.pos, want, werr, p2.pos)
		}
	}
}

func TestWriteStringMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	check := func(s string) {
		var got, want bytes.Buffer
		writeString(&got, s)
		writeStringRef(&want, s)
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("%q: fast %q, reference %q", s, got.Bytes(), want.Bytes())
		}
	}
	for c := range 256 {
		check(string([]byte{byte(c)}))
		check("ab" + string([]byte{byte(c)}) + "cd")
	}
	for range 200000 {
		check(randomString(r))
	}
}
