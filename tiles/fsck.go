package tiles

import (
	"context"

	"github.com/runseal/runseal/log"
)

// FsckResult counts what Fsck checked.
type FsckResult struct {
	Size    uint64 `json:"size"`
	Tiles   int    `json:"tiles"`   // hash tiles checked
	Bundles int    `json:"bundles"` // entry bundles checked
}

// Fsck re-derives the root of the tree of size from every tile and entry
// bundle that size implies, reading through f, and returns the first
// resource that disagrees as a *TileError (ErrMismatch, ErrMalformed or
// ErrNotFound). size and root come from the checkpoint, which the caller
// verified.
//
// It works top-down, as the signed root is the only thing trusted: the
// partial tiles of the right edge must give the root; every full tile
// must hash to the hash the tile above it records (so the tile named is
// the one below an authenticated hash); every entry must hash to its
// level-0 hash. Memory stays at one level's tiles above level 0.
func Fsck(ctx context.Context, f Fetcher, size uint64, root log.Hash) (FsckResult, error) {
	res := FsckResult{Size: size}
	t := NewTree(size, root, f, nil)
	if err := t.Verify(ctx); err != nil {
		return res, err
	}
	res.Tiles = len(edgeRefs(size))
	for level := Levels(size) - 1; level >= 0; level-- {
		full := levelWidth(size, level) / Width
		for n := uint64(0); n < full; n++ {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			if _, err := t.tile(ctx, level, n); err != nil {
				return res, err
			}
			res.Tiles++
			if level == 0 {
				if _, err := t.Leaf(ctx, n*Width); err != nil {
					return res, err
				}
				res.Bundles++
				// Done with this tile and its bundle.
				delete(t.tiles, Ref{Level: 0, Index: n, W: Width})
				delete(t.tiles, Ref{Level: EntriesLevel, Index: n, W: Width})
			}
		}
		// The level above is no longer needed (its edge tile stays).
		for r := range t.tiles {
			if r.Level == level+1 && r.Full() {
				delete(t.tiles, r)
			}
		}
	}
	if size%Width != 0 {
		if _, err := t.Leaf(ctx, size-1); err != nil {
			return res, err
		}
		res.Bundles++
	}
	return res, nil
}
