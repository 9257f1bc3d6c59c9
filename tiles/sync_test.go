package tiles

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/runseal/runseal/store"
)

func TestSync_FromEmptyThenIncremental(t *testing.T) {
	ctx := context.Background()
	m := newMemLog(t)
	m.grow(t, 300)
	m.witness()
	dir := t.TempDir()
	res, err := Sync(ctx, NewLog(m), dir, SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// 300: tile/0/000, tile/0/001.p/44, tile/1/000.p/1 and two bundles.
	if res.From != 0 || res.To != 300 || res.Tiles != 3 || res.Bundles != 2 || res.Witnessed != 300 {
		t.Fatalf("first sync: %+v", res)
	}
	m.grow(t, 1000) // 1300
	res, err = Sync(ctx, NewLog(m), dir, SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// From 300: level 0 tiles 1..5 (5 is partial, 20 wide), level 1's
	// partial of width 5, bundles 1..5.
	if res.From != 300 || res.To != 1300 || res.Tiles != 6 || res.Bundles != 5 || res.Witnessed != 300 {
		t.Fatalf("incremental sync: %+v", res)
	}
	for _, p := range []string{"tile/0/001.p/44", "tile/0/001", "tile/0/005.p/20", "tile/1/000.p/5", "tile/1/000.p/1", "tile/entries/005.p/20", CheckpointPath, WitnessedPath} {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p))); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if fr, err := Fsck(ctx, DirFetcher{dir}, 1300, m.root(t, 1300)); err != nil || fr.Tiles != 7 || fr.Bundles != 6 {
		t.Fatalf("Fsck: %+v, %v", fr, err)
	}
	// The witnessed checkpoint's tiles are there too: a client of it
	// verifies.
	if _, err := Fsck(ctx, DirFetcher{dir}, 300, m.root(t, 300)); err != nil {
		t.Fatalf("Fsck at the witnessed size: %v", err)
	}
	// Nothing new: nothing written but the checkpoints.
	res, err = Sync(ctx, NewLog(m), dir, SyncOptions{})
	if err != nil || res.Tiles != 2 || res.Bundles != 1 {
		// The rightmost partial tiles and bundle are rewritten (same bytes).
		t.Fatalf("idempotent sync: %+v, %v", res, err)
	}
}

func TestSync_RefusesAnotherLogsDirectory(t *testing.T) {
	ctx := context.Background()
	a, b := newMemLog(t), newMemLog(t)
	b.salt = 7
	a.grow(t, 10)
	b.grow(t, 20)
	dir := t.TempDir()
	if _, err := Sync(ctx, NewLog(a), dir, SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	before := readFile(t, dir, CheckpointPath)
	if _, err := Sync(ctx, NewLog(b), dir, SyncOptions{}); !errors.Is(err, ErrDiverged) {
		t.Fatalf("sync of another log into the directory: %v, want ErrDiverged", err)
	}
	// Rolled back store: the directory is ahead.
	c := newMemLog(t)
	c.signer, c.vkey, c.origin = a.signer, a.vkey, a.origin
	c.grow(t, 5)
	if _, err := Sync(ctx, NewLog(c), dir, SyncOptions{}); !errors.Is(err, ErrDiverged) {
		t.Fatalf("sync from a smaller log: %v, want ErrDiverged", err)
	}
	if !slices.Equal(before, readFile(t, dir, CheckpointPath)) {
		t.Fatal("the refused syncs changed the checkpoint")
	}
}

// corruptNode is a Source whose stored node disagrees with its signed
// root, as a damaged database would.
type corruptNode struct {
	*memLog
	level uint
	index uint64
}

func (c corruptNode) LogNodes(ctx context.Context, level uint, start, end uint64) ([]store.Digest, error) {
	out, err := c.memLog.LogNodes(ctx, level, start, end)
	if err == nil && level == c.level && c.index >= start && c.index < end {
		out[c.index-start][0] ^= 1
	}
	return out, err
}

// TestSync_StoreNodeAltered_PublishesNothing: tiles that would not lead
// to the signed root never get a checkpoint beside them.
func TestSync_StoreNodeAltered_PublishesNothing(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		level uint
		index uint64
		path  string
	}{
		{0, 5, "tile/0/000"},              // a full tile against its parent
		{0, 600, "tile/entries/002.p/89"}, // the edge against the root
		{8, 1, "tile/0/001"},              // a parent hash: its child no longer matches
	} {
		m := newMemLog(t)
		m.grow(t, 601)
		dir := t.TempDir()
		_, err := Sync(ctx, NewLog(corruptNode{m, tc.level, tc.index}), dir, SyncOptions{})
		if !errors.Is(err, ErrMismatch) {
			t.Fatalf("node (%d, %d): %v, want ErrMismatch", tc.level, tc.index, err)
		}
		var te *TileError
		if errors.As(err, &te) && !slices.Contains([]string{tc.path, "tile/0/002.p/89, tile/1/000.p/2"}, te.Path) {
			t.Errorf("node (%d, %d): error names %q, want %q", tc.level, tc.index, te.Path, tc.path)
		}
		if _, err := os.Stat(filepath.Join(dir, CheckpointPath)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("node (%d, %d): a checkpoint was published: %v", tc.level, tc.index, err)
		}
	}
}

// TestFsck_NamesTheFirstBadTile alters, deletes or truncates one file of
// a synced directory and checks fsck names it.
func TestFsck_NamesTheFirstBadTile(t *testing.T) {
	ctx := context.Background()
	m := newMemLog(t)
	m.grow(t, 70000)
	size, root := m.size(), m.root(t, m.size())
	synced := syncedDir(t, m)
	for _, tc := range []struct {
		path  string
		do    func(b []byte) []byte // nil: delete; the file is restored after
		class error
	}{
		{"tile/0/100", func(b []byte) []byte { b[7] ^= 1; return b }, ErrMismatch},
		{"tile/1/000", func(b []byte) []byte { b[8000] ^= 1; return b }, ErrMismatch},
		{"tile/entries/272", func(b []byte) []byte { b[100] ^= 1; return b }, ErrMismatch},
		{"tile/entries/273.p/112", func(b []byte) []byte { return b[:len(b)-1] }, ErrMalformed},
		{"tile/0/200", nil, ErrNotFound},
	} {
		dir := synced
		full := filepath.Join(dir, filepath.FromSlash(tc.path))
		orig := readFile(t, dir, tc.path)
		if tc.do == nil {
			os.Remove(full)
		} else if err := os.WriteFile(full, tc.do(readFile(t, dir, tc.path)), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Fsck(ctx, DirFetcher{dir}, size, root)
		wantTileErr(t, err, tc.class, tc.path)
		if err := os.WriteFile(full, orig, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
