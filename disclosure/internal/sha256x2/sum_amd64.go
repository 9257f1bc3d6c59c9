//go:build !purego

package sha256x2

import "golang.org/x/sys/cpu"

var enabled = cpu.X86.HasAVX && cpu.X86.HasSSE41 && cpu.X86.HasSSSE3 && hasSHA()

// hasSHA reports whether CPUID says the CPU has the SHA extensions.
func hasSHA() bool {
	if max, _, _, _ := cpuid(0, 0); max < 7 {
		return false
	}
	_, ebx, _, _ := cpuid(7, 0)
	return ebx&(1<<29) != 0
}

//go:noescape
func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)

// blocks2 hashes n 64-byte blocks at pa into a and n at pb into b.
//
//go:noescape
func blocks2(a, b *[8]uint32, pa, pb *byte, n int)

// sum2 runs the two lanes' blocks through blocks2 together; once one lane
// is done, the other's last blocks go through with a scratch partner,
// which costs little beside them (the unit waits on each lane anyway).
func sum2(pa *[32]byte, a []byte, pb *[32]byte, b []byte) (da, db [32]byte) {
	var la, lb lane
	la.init(pa, a)
	lb.init(pb, b)
	var scratch [8]uint32
	for la.more() || lb.more() {
		switch {
		case !la.more():
			p, n := lb.next()
			blocks2(&scratch, &lb.h, p, p, n)
			lb.advance(n)
		case !lb.more():
			p, n := la.next()
			blocks2(&la.h, &scratch, p, p, n)
			la.advance(n)
		default:
			p, na := la.next()
			q, nb := lb.next()
			n := min(na, nb)
			blocks2(&la.h, &lb.h, p, q, n)
			la.advance(n)
			lb.advance(n)
		}
	}
	return la.sum(), lb.sum()
}
