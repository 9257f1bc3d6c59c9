package tiles

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// tamper is a Fetcher that answers some paths with other bytes.
type tamper struct {
	f     Fetcher
	swap  map[string][]byte
	calls int
}

func (t *tamper) Fetch(ctx context.Context, p string) ([]byte, error) {
	t.calls++
	if b, ok := t.swap[p]; ok {
		return b, nil
	}
	return t.f.Fetch(ctx, p)
}

func syncedDir(t *testing.T, m *memLog) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := Sync(context.Background(), NewLog(m), dir, SyncOptions{}); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	return dir
}

func readFile(t *testing.T, dir, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTree_ProofsEqualTheLogs(t *testing.T) {
	ctx := context.Background()
	m := newMemLog(t)
	var sizes []uint64
	for _, n := range []int{1, 255, 1, 299, 65000, 1} {
		m.grow(t, n)
		sizes = append(sizes, m.size())
	}
	dir := syncedDir(t, m)
	cache := NewCache(1000)
	size := m.size()
	tr := NewTree(size, m.root(t, size), DirFetcher{dir}, cache)
	for _, i := range []uint64{0, 1, 255, 256, 300, 40000, size - 2, size - 1} {
		got, err := tr.InclusionProof(ctx, i)
		if err != nil {
			t.Fatalf("InclusionProof(%d): %v", i, err)
		}
		want, _ := log.InclusionProof(ctx, m.nodes, i, size)
		if !slices.Equal(got, want) {
			t.Fatalf("InclusionProof(%d) differs from the log's", i)
		}
		leaf, err := tr.Leaf(ctx, i)
		if err != nil || leaf != leafValue(i) {
			t.Fatalf("Leaf(%d) = %x, %v", i, leaf, err)
		}
		if err := log.VerifyInclusion(leaf, i, size, got, tr.Root); err != nil {
			t.Fatalf("inclusion %d does not verify: %v", i, err)
		}
	}
	for _, old := range sizes {
		got, err := tr.ConsistencyProof(ctx, old)
		if err != nil {
			t.Fatalf("ConsistencyProof(%d): %v", old, err)
		}
		want, _ := log.ConsistencyProof(ctx, m.nodes, old, size)
		if !slices.Equal(got, want) {
			t.Fatalf("ConsistencyProof(%d) differs from the log's", old)
		}
	}
	// A second tree of the same size reads everything from the cache.
	tr2 := NewTree(size, m.root(t, size), DirFetcher{dir}, cache)
	if _, err := tr2.InclusionProof(ctx, 40000); err != nil || tr2.Fetches != 0 {
		t.Fatalf("cached tree: %d fetches, %v", tr2.Fetches, err)
	}
}

func wantTileErr(t *testing.T, err error, class error, path string) {
	t.Helper()
	var te *TileError
	if !errors.As(err, &te) || !errors.Is(err, class) {
		t.Fatalf("error %v: want a *TileError of class %v", err, class)
	}
	if te.Path != path {
		t.Fatalf("error names %q, want %q (%v)", te.Path, path, err)
	}
}

// TestTree_BadTiles feeds the client tiles of the wrong size, a partial
// tile wider than the checkpoint implies, and tiles whose hashes do not
// lead to the signed root: each is refused naming the tile.
func TestTree_BadTiles(t *testing.T) {
	ctx := context.Background()
	m := newMemLog(t)
	m.grow(t, 70000) // edges: tile/0/273.p/112, tile/1/001.p/17, tile/2/000.p/1
	dir := syncedDir(t, m)
	size, root := m.size(), m.root(t, m.size())
	flip := func(p string, at int) []byte {
		b := slices.Clone(readFile(t, dir, p))
		b[at] ^= 1
		return b
	}
	full0 := readFile(t, dir, "tile/0/000")
	for _, tc := range []struct {
		name  string
		swap  map[string][]byte
		index uint64
		class error
		path  string
	}{
		{"full tile short", map[string][]byte{"tile/0/000": full0[:FullTileSize-1]}, 5, ErrMalformed, "tile/0/000"},
		{"full tile long", map[string][]byte{"tile/0/000": append(slices.Clone(full0), 0)}, 5, ErrMalformed, "tile/0/000"},
		{"partial wider than the checkpoint implies", map[string][]byte{"tile/0/273.p/112": append(readFile(t, dir, "tile/0/273.p/112"), make([]byte, 32)...)}, 5, ErrMalformed, "tile/0/273.p/112"},
		{"full tile altered", map[string][]byte{"tile/0/000": flip("tile/0/000", 100)}, 5, ErrMismatch, "tile/0/000"},
		{"level-1 tile altered", map[string][]byte{"tile/1/000": flip("tile/1/000", 0)}, 5, ErrMismatch, "tile/1/000"},
		{"edge altered", map[string][]byte{"tile/1/001.p/17": flip("tile/1/001.p/17", 3)}, 5, ErrMismatch, "tile/0/273.p/112, tile/1/001.p/17, tile/2/000.p/1"},
		{"entry altered", map[string][]byte{"tile/entries/000": flip("tile/entries/000", 40)}, 1, ErrMismatch, "tile/entries/000"},
		{"entry of the wrong length", map[string][]byte{"tile/entries/000": append([]byte{0, 31}, readFile(t, dir, "tile/entries/000")[2:]...)}, 1, ErrMalformed, "tile/entries/000"},
		{"tile missing", map[string][]byte{}, 5, ErrNotFound, "tile/0/000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f Fetcher = &tamper{f: DirFetcher{dir}, swap: tc.swap}
			if tc.class == ErrNotFound {
				f = &tamper{f: missing{DirFetcher{dir}, "tile/0/000"}}
			}
			tr := NewTree(size, root, f, NewCache(100))
			_, err := tr.InclusionProof(ctx, tc.index)
			if err == nil {
				_, err = tr.Leaf(ctx, tc.index)
			}
			wantTileErr(t, err, tc.class, tc.path)
		})
	}
}

type missing struct {
	f    Fetcher
	path string
}

func (m missing) Fetch(ctx context.Context, p string) ([]byte, error) {
	if p == m.path {
		return nil, os.ErrNotExist
	}
	return m.f.Fetch(ctx, p)
}

// TestTree_CachedBadTileIsRefetched: a bad tile in the shared cache (from
// another view of the log) is dropped and fetched again, not trusted.
func TestTree_CachedBadTileIsRefetched(t *testing.T) {
	ctx := context.Background()
	m := newMemLog(t)
	m.grow(t, 1000)
	dir := syncedDir(t, m)
	cache := NewCache(100)
	bad := slices.Clone(readFile(t, dir, "tile/0/000"))
	bad[0] ^= 1
	cache.put("tile/0/000", bad)
	tr := NewTree(m.size(), m.root(t, m.size()), DirFetcher{dir}, cache)
	if _, err := tr.InclusionProof(ctx, 3); err != nil {
		t.Fatalf("InclusionProof with a bad cached tile: %v", err)
	}
	if b, _ := cache.get("tile/0/000"); !slices.Equal(b, readFile(t, dir, "tile/0/000")) {
		t.Fatal("the cache still holds the bad tile")
	}
}

// TestTree_PartialGoneFallsBackToFull: C2SP lets a log delete a partial
// tile once the full one exists; the client then uses the full tile's
// prefix.
func TestTree_PartialGoneFallsBackToFull(t *testing.T) {
	ctx := context.Background()
	m := newMemLog(t)
	m.grow(t, 100)
	old := m.size()
	oldRoot := m.root(t, old)
	m.grow(t, 200)
	dir := syncedDir(t, m) // holds tile/0/000 full, never .p/100
	tr := NewTree(old, oldRoot, DirFetcher{dir}, nil)
	p, err := tr.InclusionProof(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	if err := log.VerifyInclusion(leafValue(7), 7, old, p, oldRoot); err != nil {
		t.Fatal(err)
	}
}

var _ = store.Digest{}
