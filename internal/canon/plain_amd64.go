//go:build amd64 && !purego

package canon

import "golang.org/x/sys/cpu"

// useAVX2 selects plainLenAVX2: most of a record's bytes are in plain
// strings, and 32 bytes a step with three compares beat the word-at-a-time
// test of plainLenGeneric several times over.
var useAVX2 = cpu.X86.HasAVX2

// plainLenAVX2 returns the index of the first byte of s that is not plain
// (below 0x20, above 0x7f, '"' or '\\'), or len(s). len(s) must be at
// least 32.
//
//go:noescape
func plainLenAVX2(s []byte) int

// plainLen returns the length of the plain prefix of s: exactly, where
// plainLenGeneric may stop a word short of a byte above 0x7f or below 0x20.
func plainLen(s []byte) int {
	if !useAVX2 {
		return plainLenGeneric(s)
	}
	if len(s) >= 32 {
		return plainLenAVX2(s)
	}
	for i, b := range s {
		if b < 0x20 || b >= 0x80 || b == '"' || b == '\\' {
			return i
		}
	}
	return len(s)
}
