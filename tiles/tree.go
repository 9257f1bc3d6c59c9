package tiles

import (
	"context"
	"fmt"
	"slices"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"

	"github.com/runseal/runseal/log"
)

// Tree builds proofs for one checkpoint of a log from its tiles. It trusts
// only Size and Root, which the caller must take from a checkpoint whose
// signature it verified. Every tile it reads is checked for the exact
// width the size implies and authenticated against Root before use: the
// partial tiles of the right edge by recomputing the root from them, a
// full tile by hashing it to the hash its parent tile records. Not safe
// for concurrent use.
type Tree struct {
	Size uint64
	Root log.Hash

	f     Fetcher
	cache *Cache
	tiles map[Ref][]log.Hash   // authenticated
	inner map[Ref][][]log.Hash // innerLevels of authenticated hash tiles
	edge  bool                 // the right edge is authenticated
	// Fetches counts resources read through the Fetcher (cache misses).
	Fetches int
}

// NewTree returns a proof builder for the tree of size with root, reading
// through f and sharing cache (which may be nil).
func NewTree(size uint64, root log.Hash, f Fetcher, cache *Cache) *Tree {
	return &Tree{Size: size, Root: root, f: f, cache: cache, tiles: make(map[Ref][]log.Hash), inner: make(map[Ref][][]log.Hash)}
}

// fetch reads r, from the cache unless fresh; with a partial r that no
// longer exists it falls back to the full tile and keeps its first r.W
// hashes, as C2SP tlog-tiles lets clients do.
func (t *Tree) fetch(ctx context.Context, r Ref, fresh bool) ([]log.Hash, error) {
	parse := func(r Ref, b []byte) ([]log.Hash, error) {
		if r.Entries() {
			return ParseEntryBundle(r, b)
		}
		return ParseHashTile(r, b)
	}
	p := r.Path()
	if !fresh {
		if b, ok := t.cache.get(p); ok {
			if hs, err := parse(r, b); err == nil {
				return hs, nil
			}
			t.cache.drop(p)
		}
	}
	t.Fetches++
	b, err := t.f.Fetch(ctx, p)
	if err != nil && isNotExist(err) && !r.Full() {
		full := Ref{Level: r.Level, Index: r.Index, W: Width}
		t.Fetches++
		fb, ferr := t.f.Fetch(ctx, full.Path())
		if ferr == nil {
			hs, perr := parse(full, fb)
			if perr != nil {
				return nil, perr
			}
			return hs[:r.W], nil
		}
	}
	if err != nil {
		if isNotExist(err) {
			return nil, tileErr(ErrNotFound, p, "the log does not serve it, though the checkpoint of size %d implies it", t.Size)
		}
		return nil, err
	}
	hs, err := parse(r, b)
	if err != nil {
		return nil, err
	}
	t.cache.put(p, b)
	return hs, nil
}

// authenticate fetches r and checks it against the root, retrying once
// past the cache when a cached copy fails (it may be from another log's
// view); the second failure is the tile's.
func (t *Tree) authenticate(ctx context.Context, r Ref, check func([]log.Hash) error) ([]log.Hash, error) {
	hs, err := t.fetch(ctx, r, false)
	if err == nil {
		if err = check(hs); err == nil {
			return hs, nil
		}
	}
	t.cache.drop(r.Path())
	hs, err2 := t.fetch(ctx, r, true)
	if err2 != nil {
		return nil, err2
	}
	if err := check(hs); err != nil {
		return nil, err
	}
	return hs, nil
}

// Verify authenticates the right edge of the tree: its partial tiles must
// give Root. It is done once per Tree, before any tile is used.
func (t *Tree) Verify(ctx context.Context) error {
	if t.edge {
		return nil
	}
	refs := edgeRefs(t.Size)
	edge := make(map[int][]log.Hash, len(refs))
	for _, r := range refs {
		hs, err := t.fetch(ctx, r, false)
		if err != nil {
			return err
		}
		edge[r.Level] = hs
	}
	if len(refs) == 0 {
		return t.verifyTop(ctx)
	}
	root, err := rootFromEdge(t.Size, edge)
	if err != nil {
		return tileErr(ErrMalformed, refList(refs), "%v", err)
	}
	if root != t.Root {
		// Refetch past the cache once before blaming the log.
		for _, r := range refs {
			hs, err := t.fetch(ctx, r, true)
			if err != nil {
				return err
			}
			edge[r.Level] = hs
		}
		if root, err = rootFromEdge(t.Size, edge); err != nil || root != t.Root {
			return tileErr(ErrMismatch, refList(refs), "the partial tiles of size %d give root %x, the checkpoint says %x", t.Size, root[:8], t.Root[:8])
		}
	}
	for _, r := range refs {
		t.tiles[r] = edge[r.Level]
	}
	t.edge = true
	return nil
}

// verifyTop handles the one size with no partial tile, 0: every other
// size has a top tile level of 1 to 255 hashes.
func (t *Tree) verifyTop(context.Context) error {
	if t.Size != 0 || t.Root != log.EmptyRoot() {
		return tileErr(ErrMismatch, CheckpointPath, "size %d with no partial tile, or size 0 with a root that is not the empty root", t.Size)
	}
	t.edge = true
	return nil
}

// tile returns the authenticated hashes of the hash tile at level and
// index, with the width the tree's size implies.
func (t *Tree) tile(ctx context.Context, level int, index uint64) ([]log.Hash, error) {
	w := Edge(level, index, t.Size)
	r := Ref{Level: level, Index: index, W: w}
	if w == 0 {
		return nil, tileErr(ErrNotFound, r.Path(), "beyond the tree of size %d", t.Size)
	}
	if err := t.Verify(ctx); err != nil {
		return nil, err
	}
	if hs, ok := t.tiles[r]; ok {
		return hs, nil
	}
	// A full tile not yet seen: its subtree hash is a node one tile level
	// up, which is authenticated first (recursively, up to the edge).
	want, err := t.node(ctx, compact.NewNodeID(uint(8*(level+1)), index))
	if err != nil {
		return nil, err
	}
	var lv [][]log.Hash
	hs, err := t.authenticate(ctx, r, func(hs []log.Hash) error {
		lv = t.cache.levels(r.Path())
		if len(lv) != 9 || !slices.Equal(lv[0], hs) {
			lv = innerLevels(hs)
		}
		if got := lv[8][0]; got != want {
			return tileErr(ErrMismatch, r.Path(), "hashes to %x, but the tile above records %x", got[:8], want[:8])
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	t.cache.putLevels(r.Path(), lv)
	t.tiles[r], t.inner[r] = hs, lv
	return hs, nil
}

// node returns the hash of the complete subtree id, from its tile.
func (t *Tree) node(ctx context.Context, id compact.NodeID) (log.Hash, error) {
	level := int(id.Level / 8)
	index := (id.Index << (id.Level % 8)) / Width
	hs, err := t.tile(ctx, level, index)
	if err != nil {
		return log.Hash{}, err
	}
	r := Ref{Level: level, Index: index, W: len(hs)}
	lv, ok := t.inner[r]
	if !ok {
		lv = innerLevels(hs)
		t.inner[r] = lv
	}
	return nodeInLevels(id, lv)
}

func (t *Tree) nodes(ctx context.Context, p proof.Nodes) ([]log.Hash, error) {
	hs := make([][]byte, len(p.IDs))
	for i, id := range p.IDs {
		h, err := t.node(ctx, id)
		if err != nil {
			return nil, err
		}
		hs[i] = h[:]
	}
	hs, err := p.Rehash(hs, hashChildren)
	if err != nil {
		return nil, err
	}
	out := make([]log.Hash, len(hs))
	for i, h := range hs {
		out[i] = log.Hash(h)
	}
	return out, nil
}

// InclusionProof builds the RFC 6962 audit path of leaf index in the tree.
func (t *Tree) InclusionProof(ctx context.Context, index uint64) ([]log.Hash, error) {
	if index >= t.Size {
		return nil, fmt.Errorf("tiles: inclusion proof: index %d is not below the tree size %d: %w", index, t.Size, ErrNotFound)
	}
	p, err := proof.Inclusion(index, t.Size)
	if err != nil {
		return nil, fmt.Errorf("tiles: inclusion proof: %w", err)
	}
	return t.nodes(ctx, p)
}

// ConsistencyProof builds the RFC 6962 proof that the tree of oldSize is a
// prefix of this one. Sizes 0 and Size give an empty proof.
func (t *Tree) ConsistencyProof(ctx context.Context, oldSize uint64) ([]log.Hash, error) {
	if oldSize > t.Size {
		return nil, fmt.Errorf("tiles: consistency proof: old size %d is above the tree size %d: %w", oldSize, t.Size, ErrNotFound)
	}
	if err := t.Verify(ctx); err != nil {
		return nil, err
	}
	if oldSize == 0 || oldSize == t.Size {
		return []log.Hash{}, nil
	}
	p, err := proof.Consistency(oldSize, t.Size)
	if err != nil {
		return nil, fmt.Errorf("tiles: consistency proof: %w", err)
	}
	return t.nodes(ctx, p)
}

// Leaf returns the entry at index (the sealed run's terminal hash), from
// its entry bundle, authenticated against the level-0 tile.
func (t *Tree) Leaf(ctx context.Context, index uint64) (log.Hash, error) {
	if index >= t.Size {
		return log.Hash{}, fmt.Errorf("tiles: leaf %d is not below the tree size %d: %w", index, t.Size, ErrNotFound)
	}
	hashes, err := t.tile(ctx, 0, index/Width)
	if err != nil {
		return log.Hash{}, err
	}
	r := Ref{Level: EntriesLevel, Index: index / Width, W: Edge(EntriesLevel, index/Width, t.Size)}
	if es, ok := t.tiles[r]; ok {
		return es[index%Width], nil
	}
	es, err := t.authenticate(ctx, r, func(es []log.Hash) error {
		for i, e := range es {
			if log.LeafHash(e) != hashes[i] {
				return tileErr(ErrMismatch, r.Path(), "entry %d does not hash to its level-0 tile hash", i)
			}
		}
		return nil
	})
	if err != nil {
		return log.Hash{}, err
	}
	t.tiles[r] = es
	return es[index%Width], nil
}
