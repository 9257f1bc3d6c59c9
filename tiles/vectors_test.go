package tiles

import (
	"context"
	"encoding/hex"
	"testing"

	"github.com/runseal/runseal/log"
)

// TestSpecVectors pins the vectors of spec/tiles.md §6: leaf i is
// SHA-256 of i as a big-endian uint64.
func TestSpecVectors(t *testing.T) {
	ctx := context.Background()
	m := newMemLog(t)
	m.grow(t, 3)
	h := func(b []byte) string { return hex.EncodeToString(b) }
	bundle := MarshalEntryBundle([]log.Hash{leafValue(0), leafValue(1), leafValue(2)})
	if got := h(bundle); got != "0020af5570f5a1810b7af78caf4bc70a660f0df51e42baf91d4de5b2328de0e83dfc0020cd2662154e6d76b2b2b92e70c0cac3ccf534f9b74eb5b89819ec509083d00a500020cd04a4754498e06db5a13c5f371f1f04ff6d2470f24aa9bd886540e5dce77f70" {
		t.Errorf("tile/entries/000.p/3 = %s", got)
	}
	tile, err := NewLog(m).Resource(ctx, Ref{Level: 0, Index: 0, W: 3}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := h(tile); got != "aea833068048b82f42271c18e0076a5230cbc7d711c99de16a5917db14a3b044277dddee83152dcc8ba5f7ab96e552f178c2fee48d0b81982597f0d743f675f731080021493300afc0c17832dd7128ccdd46c9289582e6aa1483be1367a0e859" {
		t.Errorf("tile/0/000.p/3 = %s", got)
	}
	for _, v := range []struct {
		size uint64
		want string
	}{
		{3, "cc23a6e05f95099459e4b62703c223236972a78997b072a65500b30e26bb6ef3"},
		{256, "2a835365b03758760aaacb74bea6023b9a016cff8559d1661a239d434a5018b1"},
		{257, "2778f1b45729ca256ee7c7bd36405faa5f810d958b8c60a671a33812622f7638"},
	} {
		size, want := v.size, v.want
		m.grow(t, int(size-m.size()))
		r := m.root(t, size)
		if h(r[:]) != want {
			t.Errorf("root at %d = %x, want %s", size, r, want)
		}
	}
	var paths []string
	for _, r := range Refs(257, 0) {
		paths = append(paths, r.Path())
	}
	if got := paths; len(got) != 5 || got[0] != "tile/entries/000" || got[1] != "tile/entries/001.p/1" || got[2] != "tile/0/000" || got[3] != "tile/0/001.p/1" || got[4] != "tile/1/000.p/1" {
		t.Errorf("Refs(257) = %v", got)
	}
}
