package canon

import (
	"math/rand/v2"
	"testing"
)

// plainLenRef is the byte-at-a-time definition plainLen must agree with
// wherever it claims bytes: none of them may need a closer look.
func plainLenRef(s []byte) int {
	for i, b := range s {
		if b < 0x20 || b >= 0x80 || b == '"' || b == '\\' {
			return i
		}
	}
	return len(s)
}

// plainLen may stop early only before a byte above 0x7f or below 0x20, and
// at most a word early; it never passes a byte that needs a closer look.
func TestPlainLen(t *testing.T) {
	for _, f := range plainLens {
		t.Run(f.name, func(t *testing.T) { testPlainLen(t, f.fn) })
	}
}

// plainLens are every version of plainLen this build holds: the one used
// (on amd64 with AVX2, the vector one; plain_amd64.s) and the portable one.
var plainLens = []struct {
	name string
	fn   func([]byte) int
}{{"used", plainLen}, {"generic", plainLenGeneric}}

// FuzzPlainLen holds every version of plainLen to plainLenRef.
func FuzzPlainLen(f *testing.F) {
	f.Add([]byte("abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ\\"))
	f.Add([]byte("abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ\u00e9\""))
	f.Add([]byte("abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ\x1f\""))
	f.Fuzz(func(t *testing.T, s []byte) {
		for _, p := range plainLens {
			checkPlainLen(t, p.fn, s)
		}
	})
}

func checkPlainLen(t *testing.T, plainLen func([]byte) int, s []byte) {
	t.Helper()
	{
		got, want := plainLen(s), plainLenRef(s)
		if got > want {
			t.Fatalf("plainLen(%q) = %d passes byte %#x at %d", s, got, s[want], want)
		}
		if got < want {
			// Only a byte outside ASCII's printable range in the word
			// after got, or in the 32-byte block it starts, may stop it.
			bad := false
			for _, b := range s[got:min(len(s), got+32, want+8)] {
				bad = bad || b < 0x20 || b >= 0x80
			}
			if !bad || want-got >= 32 {
				t.Fatalf("plainLen(%q) = %d, want %d", s, got, want)
			}
		}
	}
}

func testPlainLen(t *testing.T, plainLen func([]byte) int) {
	check := func(s []byte) { t.Helper(); checkPlainLen(t, plainLen, s) }
	// Every byte value in every position of strings of up to three 32-byte
	// blocks and a tail: each lane of the vector compare, and its edges.
	for b := range 256 {
		for n := range 100 {
			for pos := 0; pos < n; pos++ {
				s := make([]byte, n)
				for i := range s {
					s[i] = 'a' + byte(i%26)
				}
				s[pos] = byte(b)
				check(s)
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("abc XYZ09\"\\\x00\x1f\x7f\x80\xc3\xa9\xff")
	for range 20000 {
		s := make([]byte, r.IntN(100))
		for i := range s {
			if r.IntN(20) == 0 {
				s[i] = alphabet[r.IntN(len(alphabet))]
			} else {
				s[i] = alphabet[r.IntN(7)]
			}
		}
		check(s)
	}
}
