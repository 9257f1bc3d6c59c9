package tiles

import (
	"errors"
	"testing"

	"github.com/transparency-dev/tessera/api/layout"
)

func TestPath_C2SPSpelling(t *testing.T) {
	for _, tc := range []struct {
		ref  Ref
		want string
	}{
		{Ref{Level: 0, Index: 0, W: Width}, "tile/0/000"},
		{Ref{Level: 0, Index: 1234067, W: Width}, "tile/0/x001/x234/067"}, // the C2SP example
		{Ref{Level: 2, Index: 1000, W: 17}, "tile/2/x001/000.p/17"},
		{Ref{Level: EntriesLevel, Index: 999, W: 1}, "tile/entries/999.p/1"},
		{Ref{Level: EntriesLevel, Index: 1000000, W: Width}, "tile/entries/x001/x000/000"},
		{Ref{Level: 63, Index: ^uint64(0), W: 255}, "tile/63/x018/x446/x744/x073/x709/x551/615.p/255"},
	} {
		if got := tc.ref.Path(); got != tc.want {
			t.Errorf("%+v.Path() = %q, want %q", tc.ref, got, tc.want)
		}
		back, err := ParsePath(tc.want)
		if err != nil || back != tc.ref {
			t.Errorf("ParsePath(%q) = %+v, %v; want %+v", tc.want, back, err, tc.ref)
		}
		// Tessera's layout package spells the same resources the same way.
		p := uint8(tc.ref.W % Width)
		var tess string
		if tc.ref.Entries() {
			tess = layout.EntriesPath(tc.ref.Index, p)
		} else {
			tess = layout.TilePath(uint64(tc.ref.Level), tc.ref.Index, p)
		}
		if tess != tc.want {
			t.Errorf("Tessera spells %+v %q, we %q", tc.ref, tess, tc.want)
		}
	}
}

func TestParsePath_RefusesOtherSpellings(t *testing.T) {
	for _, p := range []string{
		"", "tile", "tile/0", "tile/0/", "tile/00/000", "tile/64/000", "tile/-1/000",
		"tile/0/0", "tile/0/0000", "tile/0/x000/001", "tile/0/001/002", "tile/0/x01/002",
		"tile/0/000.p/0", "tile/0/000.p/256", "tile/0/000.p/01", "tile/0/000.p/",
		"tile/0/x018/x446/x744/x073/x709/x551/616", // 2^64
		"tile/entries/abc", "tile/ent/000", "/tile/0/000", "tile/0/000/", "tile/0/../000",
		"checkpoint", "tile/0/000.p/1/2",
	} {
		if r, err := ParsePath(p); err == nil {
			t.Errorf("ParsePath(%q) = %+v, want an error", p, r)
		} else if !errors.Is(err, ErrMalformed) {
			t.Errorf("ParsePath(%q) error %v is not ErrMalformed", p, err)
		}
	}
}

// TestRefs_C2SPExamples checks the layout against the examples in the
// C2SP tlog-tiles text.
func TestRefs_C2SPExamples(t *testing.T) {
	count := func(rs []Ref) map[[2]int]int {
		m := map[[2]int]int{}
		for _, r := range rs {
			m[[2]int{r.Level, r.W}]++
		}
		return m
	}
	// "a tree of size 70,000 will be represented by 273 full level 0
	// tiles, one partial level 0 tile of width 112, one full level 1 tile,
	// one partial level 1 tile of width 17, and one partial level 2 tile
	// of width 1."
	got := count(Refs(70000, 0))
	want := map[[2]int]int{{0, 256}: 273, {0, 112}: 1, {1, 256}: 1, {1, 17}: 1, {2, 1}: 1, {EntriesLevel, 256}: 273, {EntriesLevel, 112}: 1}
	if len(got) != len(want) {
		t.Fatalf("Refs(70000) = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("Refs(70000): %d tiles of (level %d, width %d), want %d", got[k], k[0], k[1], v)
		}
	}
	// "a tree of size 256 will be represented by a full level 0 tile and a
	// partial level 1 tile of width 1."
	got = count(Refs(256, 0))
	if len(got) != 3 || got[[2]int{0, 256}] != 1 || got[[2]int{1, 1}] != 1 || got[[2]int{EntriesLevel, 256}] != 1 {
		t.Errorf("Refs(256) = %v", got)
	}
	if rs := Refs(0, 0); len(rs) != 0 {
		t.Errorf("Refs(0) = %v, want none (empty tiles must not be served)", rs)
	}
	// Tessera's PartialTileSize agrees on every edge width.
	for _, size := range []uint64{1, 255, 256, 257, 65535, 65536, 65537, 70000, 1000000} {
		for l := 0; l < Levels(size); l++ {
			n := levelWidth(size, l)
			idx := n / Width
			if got, want := Edge(l, idx, size)%Width, int(layout.PartialTileSize(uint64(l), idx, size)); got != want {
				t.Errorf("size %d level %d: edge width %d, Tessera %d", size, l, got, want)
			}
		}
	}
}

func TestImplied(t *testing.T) {
	for _, tc := range []struct {
		r    Ref
		size uint64
		want bool
	}{
		{Ref{0, 0, 256}, 255, false},
		{Ref{0, 0, 255}, 255, true},
		{Ref{0, 0, 254}, 255, true}, // an older checkpoint's partial
		{Ref{0, 0, 256}, 256, true},
		{Ref{0, 1, 1}, 256, false},
		{Ref{1, 0, 1}, 256, true},
		{Ref{1, 0, 2}, 256, false},
		{Ref{EntriesLevel, 0, 256}, 256, true},
		{Ref{EntriesLevel, 1, 1}, 257, true},
		{Ref{2, 0, 1}, 65535, false},
		{Ref{2, 0, 1}, 65536, true},
		{Ref{0, ^uint64(0), 255}, ^uint64(0), false},
		{Ref{63, 0, 1}, ^uint64(0), false},
	} {
		if got := Implied(tc.r, tc.size); got != tc.want {
			t.Errorf("Implied(%s, %d) = %v, want %v", tc.r.Path(), tc.size, got, tc.want)
		}
	}
}
