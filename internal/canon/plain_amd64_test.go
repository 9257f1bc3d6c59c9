//go:build amd64 && !purego

package canon

import "testing"

// The vector version is exact: it returns the first byte that needs a closer
// look, in a whole block or in the overlapping last one, whichever lane it
// is in.
func TestPlainLenAVX2Exact(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2 on this machine")
	}
	for b := range 256 {
		for n := 32; n <= 100; n++ {
			s := make([]byte, n)
			for pos := 0; pos < n; pos++ {
				for i := range s {
					s[i] = 'a' + byte(i%26)
				}
				s[pos] = byte(b)
				if got, want := plainLenAVX2(s), plainLenRef(s); got != want {
					t.Fatalf("plainLenAVX2(%q) = %d, want %d", s, got, want)
				}
				// A second bad byte after the first changes nothing.
				if pos+1 < n {
					s[n-1] = '"'
					if got, want := plainLenAVX2(s), plainLenRef(s); got != want {
						t.Fatalf("plainLenAVX2(%q) = %d, want %d", s, got, want)
					}
				}
			}
		}
	}
}
