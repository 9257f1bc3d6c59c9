package keyring

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func openTestFile(t *testing.T) *File {
	t.Helper()
	f, err := OpenFile(filepath.Join(t.TempDir(), "ring"))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// RingContract is what every Ring must do; the PKCS#11 ring runs it too.
func ringContract(t *testing.T, r Ring) {
	ctx := context.Background()
	const a, b = "default/case/01M8SNY25MTQ9VP1YG42CGNP5K", "default/run/01M8SNY25MTQ9VP1YG42CGNP5M"
	k1, w1, err := r.Wrap(ctx, a)
	if err != nil {
		t.Fatalf("Wrap: %v", err)
	}
	k2, w2, err := r.Wrap(ctx, a)
	if err != nil {
		t.Fatalf("Wrap: %v", err)
	}
	if len(k1) != DataKeySize || bytes.Equal(k1, k2) || bytes.Equal(w1, w2) {
		t.Fatalf("two wraps gave keys %x, %x: want fresh 32-byte keys", k1, k2)
	}
	got, err := r.Unwrap(ctx, a, w1)
	if err != nil || !bytes.Equal(got, k1) {
		t.Fatalf("Unwrap = %x, %v; want %x", got, err, k1)
	}
	if _, _, err := r.Wrap(ctx, b); err != nil {
		t.Fatal(err)
	}
	// A wrapping moved to another scope does not unwrap there.
	if _, err := r.Unwrap(ctx, b, w1); !errors.Is(err, ErrUnwrap) {
		t.Errorf("Unwrap of scope a's wrapping under scope b = %v, want ErrUnwrap", err)
	}
	damaged := bytes.Clone(w1)
	damaged[len(damaged)-1] ^= 1
	if _, err := r.Unwrap(ctx, a, damaged); !errors.Is(err, ErrUnwrap) {
		t.Errorf("Unwrap of damaged bytes = %v, want ErrUnwrap", err)
	}
	if _, err := r.Unwrap(ctx, "default/case/01M8SNY25MTQ9VP1YG42CGNP5Z", w1); !errors.Is(err, ErrUnknownScope) {
		t.Errorf("Unwrap under a scope never created = %v, want ErrUnknownScope", err)
	}
	var se *ScopeError
	if _, err := r.Unwrap(ctx, "default/case/01M8SNY25MTQ9VP1YG42CGNP5Z", w1); !errors.As(err, &se) || se.Scope == "" {
		t.Errorf("an unwrap failure does not name its scope: %v", err)
	}
	if _, err := r.Erase(ctx, "default/case/01M8SNY25MTQ9VP1YG42CGNP5Z"); !errors.Is(err, ErrUnknownScope) {
		t.Errorf("Erase of an unknown scope = %v, want ErrUnknownScope", err)
	}
	done, err := r.Erase(ctx, a)
	if err != nil || !done {
		t.Fatalf("Erase = %v, %v; want true", done, err)
	}
	again, err := r.Erase(ctx, a)
	if err != nil || again {
		t.Errorf("second Erase = %v, %v; want false (already erased), no error", again, err)
	}
	if _, err := r.Unwrap(ctx, a, w1); !errors.Is(err, ErrErased) {
		t.Errorf("Unwrap after erasure = %v, want ErrErased", err)
	}
	if _, _, err := r.Wrap(ctx, a); !errors.Is(err, ErrErased) {
		t.Errorf("Wrap under an erased scope = %v, want ErrErased (an erased case never gets a key again)", err)
	}
	if _, err := r.Unwrap(ctx, b, w2); errors.Is(err, ErrErased) {
		t.Errorf("erasing scope a erased scope b")
	}
	scopes, err := r.Scopes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []Scope{{Name: a, Erased: true}, {Name: b}}
	if len(scopes) != 2 || scopes[0] != want[0] || scopes[1] != want[1] {
		t.Errorf("Scopes = %+v, want %+v", scopes, want)
	}
	for _, bad := range []string{"", "../x", "a//b", "a/./b", "a b", "a/b/c/d/e"} {
		if _, _, err := r.Wrap(ctx, bad); !errors.Is(err, ErrInvalidScope) {
			t.Errorf("Wrap(%q) = %v, want ErrInvalidScope", bad, err)
		}
	}
}

func TestFileContract(t *testing.T) { ringContract(t, openTestFile(t)) }

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
	if !bytes.Equal(b, make([]byte, DataKeySize)) {
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
	if _, err := OpenFile(dir); err == nil {
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
