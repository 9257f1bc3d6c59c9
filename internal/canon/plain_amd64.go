//go:build amd64 && !purego

package canon

import "golang.org/x/sys/cpu"

// useAVX2 selects plainLenAVX2: most of a record's bytes are in plain
// strings, and 32 bytes a step with three compares beat the word-at-a-time
// test of plainLenGeneric several times over.
var useAVX2 = cpu.X86.HasAVX2

// plainLenAVX2 returns the index of the first byte of s that is not plain
// (below 0x20, above 0x7f, '"' or '\\') among its whole 32-byte blocks, or,
// when they are all plain, the length of those blocks (len(s) rounded down
// to a multiple of 32).
//
//go:noescape
func plainLenAVX2(s []byte) int

// plainLen returns a length n such that s[:n] is plain, by plainLenAVX2 and
// then plainLenGeneric for the rest: n is maximal unless s holds a byte
// above 0x7f or below 0x20 in its last 31 bytes, where the caller's own loop
// takes over at a word boundary before it.
func plainLen(s []byte) int {
	if !useAVX2 || len(s) < 32 {
		return plainLenGeneric(s)
	}
	n := plainLenAVX2(s)
	return n + plainLenGeneric(s[n:])
}
