package tiles

import (
	"encoding/binary"

	"github.com/runseal/runseal/log"
)

// MarshalHashTile encodes hashes as a hash tile: their concatenation.
func MarshalHashTile(hs []log.Hash) []byte {
	b := make([]byte, 0, len(hs)*HashSize)
	for _, h := range hs {
		b = append(b, h[:]...)
	}
	return b
}

// ParseHashTile decodes the hash tile r, which must be exactly r.W hashes
// long: a tile of another length is refused, not truncated or padded.
func ParseHashTile(r Ref, data []byte) ([]log.Hash, error) {
	if r.Entries() || r.W < 1 || r.W > Width {
		return nil, tileErr(ErrMalformed, r.Path(), "not a hash tile reference")
	}
	if len(data) != r.W*HashSize {
		return nil, tileErr(ErrMalformed, r.Path(), "is %d bytes, want %d (%d hashes)", len(data), r.W*HashSize, r.W)
	}
	out := make([]log.Hash, r.W)
	for i := range out {
		copy(out[i][:], data[i*HashSize:])
	}
	return out, nil
}

// MarshalEntryBundle encodes entries as a C2SP entry bundle: each entry
// behind its length as a big-endian uint16.
func MarshalEntryBundle(entries []log.Hash) []byte {
	b := make([]byte, 0, len(entries)*(2+EntrySize))
	for _, e := range entries {
		b = binary.BigEndian.AppendUint16(b, EntrySize)
		b = append(b, e[:]...)
	}
	return b
}

// ParseEntryBundle decodes the entry bundle r, which must hold exactly
// r.W entries and nothing after them. Every runseal entry is a 32-byte
// leaf value (spec/tiles.md); an entry of another length is refused,
// since no runseal log can hold it.
func ParseEntryBundle(r Ref, data []byte) ([]log.Hash, error) {
	if !r.Entries() || r.W < 1 || r.W > Width {
		return nil, tileErr(ErrMalformed, r.Path(), "not an entry bundle reference")
	}
	out := make([]log.Hash, 0, r.W)
	rest := data
	for len(rest) > 0 {
		if len(out) == r.W {
			return nil, tileErr(ErrMalformed, r.Path(), "has %d bytes after its %d entries", len(rest), r.W)
		}
		if len(rest) < 2 {
			return nil, tileErr(ErrMalformed, r.Path(), "entry %d: truncated length", len(out))
		}
		n := int(binary.BigEndian.Uint16(rest))
		rest = rest[2:]
		if n != EntrySize {
			return nil, tileErr(ErrMalformed, r.Path(), "entry %d is %d bytes, want %d", len(out), n, EntrySize)
		}
		if len(rest) < n {
			return nil, tileErr(ErrMalformed, r.Path(), "entry %d: truncated (%d of %d bytes)", len(out), len(rest), n)
		}
		var e log.Hash
		copy(e[:], rest[:n])
		out = append(out, e)
		rest = rest[n:]
	}
	if len(out) != r.W {
		return nil, tileErr(ErrMalformed, r.Path(), "has %d entries, want %d", len(out), r.W)
	}
	return out, nil
}
