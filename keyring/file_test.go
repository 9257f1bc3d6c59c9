package keyring_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/runseal/runseal/keyring"
	"github.com/runseal/runseal/keyring/ringtest"
)

func openTestFile(t *testing.T) *keyring.File {
	t.Helper()
	f, err := keyring.OpenFile(filepath.Join(t.TempDir(), "ring"))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestFileContract(t *testing.T) { ringtest.Run(t, openTestFile(t)) }

func TestFileModesAndErasureOnDisk(t *testing.T) {
	ctx := context.Background()
	f := openTestFile(t)
	const s = "default/case/01M8SNY25MTQ9VP1YG42CGNP5K"
	if _, _, err := f.Wrap(ctx, s); err != nil {
		t.Fatal(err)
	}
	kp := filepath.Join(f.Dir(), "default", "case", "01M8SNY25MTQ9VP1YG42CGNP5K.key")
	st, err := os.Stat(kp)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", st.Mode().Perm())
	}
	for _, d := range []string{f.Dir(), filepath.Dir(kp)} {
		if st, _ := os.Stat(d); st.Mode().Perm() != 0o700 {
			t.Errorf("%s mode %v, want 0700", d, st.Mode().Perm())
		}
	}
	// Keep a hard link to the key file's inode: after erasure the inode
	// must hold zeros, not the key.
	peek := filepath.Join(t.TempDir(), "peek")
	if err := os.Link(kp, peek); err != nil {
		t.Skipf("cannot link across directories here: %v", err)
	}
	if _, err := f.Erase(ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(kp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("key file still present after erasure: %v", err)
	}
	b, _ := os.ReadFile(peek)
	if !bytes.Equal(b, make([]byte, keyring.DataKeySize)) {
		t.Errorf("erased key's blocks were not overwritten: %x", b)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(kp), "01M8SNY25MTQ9VP1YG42CGNP5K.erased")); err != nil {
		t.Errorf("no tombstone: %v", err)
	}
}

func TestOpenFile_RefusesGroupReadableDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ring")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o750)
	if _, err := keyring.OpenFile(dir); err == nil {
		t.Fatal("a key ring directory readable by its group was accepted")
	}
}

// TestFileWrap_RacingCreatorsShareOneKey: two first uses of a scope at
// once must not each create a key, orphaning the loser's wrappings.
func TestFileWrap_RacingCreatorsShareOneKey(t *testing.T) {
	ctx := context.Background()
	f := openTestFile(t)
	const s = "default/case/01M8SNY25MTQ9VP1YG42CGNP5K"
	var wg sync.WaitGroup
	wrapped := make([][]byte, 16)
	for i := range wrapped {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, w, err := f.Wrap(ctx, s)
			if err != nil {
				t.Error(err)
			}
			wrapped[i] = w
		}()
	}
	wg.Wait()
	for i, w := range wrapped {
		if _, err := f.Unwrap(ctx, s, w); err != nil {
			t.Errorf("wrapping %d made by a racing first use no longer unwraps: %v", i, err)
		}
	}
}

// TestFile_ErasureByAnotherProcessTakesEffect: a ring that cached a scope
// key must not keep opening it after another handle (another process, as
// `journal erase` is) erased the scope.
func TestFile_ErasureByAnotherProcessTakesEffect(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ring")
	a, _ := keyring.OpenFile(dir)
	b, _ := keyring.OpenFile(dir)
	const s = "default/case/01M8SNY25MTQ9VP1YG42CGNP5K"
	_, w, err := a.Wrap(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Unwrap(ctx, s, w); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Erase(ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Unwrap(ctx, s, w); !errors.Is(err, keyring.ErrErased) {
		t.Fatalf("the caching handle still unwraps after another erased the scope: %v", err)
	}
	if _, _, err := a.Wrap(ctx, s); !errors.Is(err, keyring.ErrErased) {
		t.Fatalf("the caching handle still wraps under an erased scope: %v", err)
	}
}
