//go:build !amd64 || purego

package sha256x2

const enabled = false

func sum2(pa *[32]byte, a []byte, pb *[32]byte, b []byte) (da, db [32]byte) {
	return sumPrefixed(pa, a), sumPrefixed(pb, b)
}

// blocks2 is never called where enabled is false.
func blocks2(a, b *[8]uint32, pa, pb *byte, n int) {
	panic("sha256x2: blocks2 called without SHA-NI")
}
