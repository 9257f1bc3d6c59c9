//go:build unix

package tiles

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"testing"
)

// TestSync_SymlinkedTileDirOutsideIsRefused: a symbolic link inside the
// directory Sync publishes into (a subdirectory such as tile or tile/0,
// the staging directory, the lock file, the checkpoint) that leads out of
// it must not be written through: Sync refuses with an *OutsideError
// naming the link, and the place it points to holds what it held before.
// Before, Sync followed such a link and wrote tiles (or its lock and
// temporary files) wherever it led.
func TestSync_SymlinkedTileDirOutsideIsRefused(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		link string // the link, relative to the directory
		file bool   // it points to a file outside, not a directory
		pre  bool   // the directory holds a first sync before the link is made
	}{
		{name: "tile", link: "tile"},
		{name: "tile/0", link: "tile/0", pre: true},
		{name: "tile/entries", link: "tile/entries", pre: true},
		{name: "staging", link: stagingName},
		{name: "lock file", link: lockName, file: true},
		{name: "checkpoint", link: CheckpointPath, file: true, pre: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMemLog(t)
			m.grow(t, 300)
			dir, outside := t.TempDir(), t.TempDir()
			if tc.pre {
				if _, err := Sync(ctx, NewLog(m), dir, SyncOptions{}); err != nil {
					t.Fatal(err)
				}
				m.grow(t, 700) // the next sync has tiles to write
			}
			target := outside
			if tc.file {
				target = filepath.Join(outside, "victim")
				if err := os.WriteFile(target, []byte("not the tiles'\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			link := filepath.Join(dir, filepath.FromSlash(tc.link))
			if err := os.RemoveAll(link); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			before := tree(t, outside)
			_, err := Sync(ctx, NewLog(m), dir, SyncOptions{})
			var oe *OutsideError
			if !errors.Is(err, ErrOutside) || !errors.As(err, &oe) || oe.Link != filepath.FromSlash(tc.link) || oe.Target != target {
				t.Fatalf("sync through a link %s -> %s: %v, want an OutsideError naming the link", tc.link, target, err)
			}
			if after := tree(t, outside); !maps.Equal(before, after) {
				t.Fatalf("sync wrote outside its directory through %s: before %v, after %v", tc.link, before, after)
			}
		})
	}
}

// TestSync_SymlinkInsideTheDirectoryIsFollowed: a link that stays inside
// the directory is not an escape; Sync writes through it and the layout
// verifies.
func TestSync_SymlinkInsideTheDirectoryIsFollowed(t *testing.T) {
	ctx := context.Background()
	m := newMemLog(t)
	m.grow(t, 300)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "real-tiles"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real-tiles", filepath.Join(dir, "tile")); err != nil {
		t.Fatal(err)
	}
	if _, err := Sync(ctx, NewLog(m), dir, SyncOptions{}); err != nil {
		t.Fatalf("sync through a link inside the directory: %v", err)
	}
	if _, err := Fsck(ctx, DirFetcher{dir}, 300, m.root(t, 300)); err != nil {
		t.Fatalf("Fsck: %v", err)
	}
}

// tree maps every path under dir to its contents ("" for a directory).
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			out[p] = ""
			return nil
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSync_SymlinkedTenantDirOutsideWithinIsRefused: serve --tiles-dir
// syncs each tenant into a directory of its own beneath the one named
// (SyncOptions.Within); a tenant's directory that is a link leading out
// of it is refused like a link inside the synced directory, and a tenant's
// directory that is new is created beneath it.
func TestSync_SymlinkedTenantDirOutsideWithinIsRefused(t *testing.T) {
	ctx := context.Background()
	m := newMemLog(t)
	m.grow(t, 300)
	within, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(within, "acme")); err != nil {
		t.Fatal(err)
	}
	_, err := Sync(ctx, NewLog(m), filepath.Join(within, "acme"), SyncOptions{Within: within})
	var oe *OutsideError
	if !errors.As(err, &oe) || !errors.Is(err, ErrOutside) || oe.Link != "acme" || oe.Target != outside {
		t.Fatalf("sync into a tenant directory linked out: %v, want an OutsideError naming acme", err)
	}
	if ents, err := os.ReadDir(outside); err != nil || len(ents) != 0 {
		t.Fatalf("sync wrote outside through the tenant's link: %v %v", ents, err)
	}
	if _, err := Sync(ctx, NewLog(m), filepath.Join(within, "beta"), SyncOptions{Within: within}); err != nil {
		t.Fatalf("sync into a new tenant directory: %v", err)
	}
	if _, err := Fsck(ctx, DirFetcher{filepath.Join(within, "beta")}, 300, m.root(t, 300)); err != nil {
		t.Fatalf("Fsck: %v", err)
	}
	if _, err := Sync(ctx, NewLog(m), outside, SyncOptions{Within: within}); err == nil {
		t.Fatal("a directory not beneath Within was synced")
	}
}
