package tiles

import (
	"fmt"
	"strconv"
	"strings"
)

// Layout constants from C2SP tlog-tiles.
const (
	// Width is the number of hashes in a full tile and entries in a full
	// bundle.
	Width = 256
	// HashSize is the size of one tile hash.
	HashSize = 32
	// FullTileSize is the size of a full hash tile in bytes (8,192).
	FullTileSize = Width * HashSize
	// EntrySize is the size of one runseal log entry (the 32-byte leaf
	// value); spec/tiles.md fixes it.
	EntrySize = 32
	// EntryBundleSize is the size of a full runseal entry bundle: 256
	// entries, each behind a 2-byte big-endian length.
	EntryBundleSize = Width * (2 + EntrySize)
	// MaxLevel is the highest tile level a path may name.
	MaxLevel = 63
)

// Names of the mutable resources under the prefix.
const (
	// CheckpointPath is the newest signed checkpoint (C2SP tlog-tiles).
	CheckpointPath = "checkpoint"
	// WitnessedPath is runseal's addition: the newest checkpoint whose
	// cosignatures met the witness policy, carrying them. It is a file
	// beside checkpoint, not under it, so a directory can hold both.
	WitnessedPath = "checkpoint-witnessed"
)

// EntriesLevel is the Level of a Ref to an entry bundle; hash tiles have
// levels 0 to 63.
const EntriesLevel = -1

// A Ref names one tile or entry bundle: its level (EntriesLevel for a
// bundle), its index within the level and its width (Width for a full
// one, 1 to 255 for a partial one).
type Ref struct {
	Level int
	Index uint64
	W     int
}

// Entries reports whether r names an entry bundle.
func (r Ref) Entries() bool { return r.Level == EntriesLevel }

// Full reports whether r names a full tile or bundle.
func (r Ref) Full() bool { return r.W == Width }

// Path is r's path under the prefix, as C2SP tlog-tiles spells it:
// "tile/<L>/<N>[.p/<W>]" or "tile/entries/<N>[.p/<W>]", where N is written
// in 3-digit groups, all but the last prefixed with "x" (1234067 is
// "x001/x234/067").
func (r Ref) Path() string {
	var b strings.Builder
	b.WriteString("tile/")
	if r.Entries() {
		b.WriteString("entries")
	} else {
		b.WriteString(strconv.Itoa(r.Level))
	}
	b.WriteByte('/')
	b.WriteString(formatIndex(r.Index))
	if r.W != Width {
		b.WriteString(".p/")
		b.WriteString(strconv.Itoa(r.W))
	}
	return b.String()
}

func (r Ref) String() string { return r.Path() }

func formatIndex(n uint64) string {
	s := fmt.Sprintf("%03d", n%1000)
	for n /= 1000; n > 0; n /= 1000 {
		s = fmt.Sprintf("x%03d/%s", n%1000, s)
	}
	return s
}

// maxPath bounds the paths ParsePath reads: the longest valid one
// ("tile/entries/" + 7 groups + ".p/255") is well under it.
const maxPath = 64

// ParsePath parses a tile or entry bundle path under the prefix (no
// leading slash). It accepts exactly the spelling Path produces, so one
// resource has one path: no leading zeros in L or W, 3-digit groups, an
// index that fits in 64 bits, W from 1 to 255.
func ParsePath(p string) (Ref, error) {
	bad := func(why string) (Ref, error) {
		q := p
		if len(q) > maxPath {
			q = q[:maxPath] + "..."
		}
		return Ref{}, &TileError{Path: q, Detail: why, Err: ErrMalformed}
	}
	if len(p) > maxPath {
		return bad("path too long")
	}
	rest, ok := strings.CutPrefix(p, "tile/")
	if !ok {
		return bad(`does not start with "tile/"`)
	}
	lvl, rest, ok := strings.Cut(rest, "/")
	if !ok {
		return bad("no index")
	}
	r := Ref{W: Width}
	if lvl == "entries" {
		r.Level = EntriesLevel
	} else {
		l, ok := parseDecimal(lvl, MaxLevel)
		if !ok {
			return bad("level is not a decimal from 0 to 63 without leading zeros")
		}
		r.Level = int(l)
	}
	idx, w, partial := strings.Cut(rest, ".p/")
	if partial {
		n, ok := parseDecimal(w, Width-1)
		if !ok || n == 0 {
			return bad("partial width is not a decimal from 1 to 255 without leading zeros")
		}
		r.W = int(n)
	}
	groups := strings.Split(idx, "/")
	var n uint64
	for i, g := range groups {
		if i < len(groups)-1 {
			var ok bool
			if g, ok = strings.CutPrefix(g, "x"); !ok {
				return bad(`index group without its "x" prefix`)
			}
		}
		if len(g) != 3 || g[0] < '0' || g[0] > '9' || g[1] < '0' || g[1] > '9' || g[2] < '0' || g[2] > '9' {
			return bad("index group is not 3 digits")
		}
		d := uint64(g[0]-'0')*100 + uint64(g[1]-'0')*10 + uint64(g[2]-'0')
		if n > (^uint64(0)-d)/1000 {
			return bad("index overflows 64 bits")
		}
		n = n*1000 + d
	}
	// One index, one spelling: no leading all-zero group.
	if len(groups) > 1 && groups[0] == "x000" {
		return bad("index has a leading zero group")
	}
	r.Index = n
	return r, nil
}

// parseDecimal parses a canonical decimal (no sign, no leading zeros) no
// larger than max.
func parseDecimal(s string, max uint64) (uint64, bool) {
	if s == "" || len(s) > 3 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + uint64(s[i]-'0')
	}
	return n, n <= max
}
