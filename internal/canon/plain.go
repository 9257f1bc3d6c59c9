package canon

import (
	"bytes"
	"encoding/binary"
)

// plainLenGeneric returns a length n such that s[:n] is plain: printable ASCII
// (0x20 to 0x7f) other than '"' and '\\', the bytes a canonical string
// holds as they are. It finds the string's first quote and backslash with
// bytes.IndexByte, which is vectorised, and then needs one subtraction and
// two ORs per eight bytes for the rest, where plainASCII8 needs a dozen
// operations: most of a record's bytes are in plain strings, so this is
// most of the canonical check's cost. n is maximal unless s holds a byte
// above 0x7f or below 0x20, where the caller's own loop takes over at a
// word boundary before it.
func plainLenGeneric(s []byte) int {
	end := bytes.IndexByte(s, '"')
	if end < 0 {
		end = len(s)
	}
	if i := bytes.IndexByte(s[:end], '\\'); i >= 0 {
		end = i
	}
	// A byte below 0x20 borrows in x - 0x20 per byte, which sets the high
	// bit of the lowest such byte; a byte above 0x7f has it set in x.
	// Bytes from 0x20 to 0x7f leave every high bit clear in both.
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+32 <= end; i += 32 {
		x0 := binary.LittleEndian.Uint64(s[i:])
		x1 := binary.LittleEndian.Uint64(s[i+8:])
		x2 := binary.LittleEndian.Uint64(s[i+16:])
		x3 := binary.LittleEndian.Uint64(s[i+24:])
		if (x0|(x0-ones*0x20)|x1|(x1-ones*0x20)|x2|(x2-ones*0x20)|x3|(x3-ones*0x20))&highs != 0 {
			break
		}
	}
	for ; i+8 <= end; i += 8 {
		x := binary.LittleEndian.Uint64(s[i:])
		if (x|(x-ones*0x20))&highs != 0 {
			return i
		}
	}
	for ; i < end; i++ {
		if s[i] < 0x20 || s[i] >= 0x80 {
			return i
		}
	}
	return end
}
