package keyring

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/runseal/runseal/internal/groupcommit"
)

// File is a key ring in a directory: one 32-byte key per scope in
// DIR/<scope>.key (mode 0600, directories 0700), and a tombstone
// DIR/<scope>.erased for each erased scope.
//
// Erasure is only as strong as the directory's isolation: a backup or a
// snapshot that holds this directory holds the keys, so the directory must
// be kept out of the journal's backups (and, on copy-on-write or flash
// storage, overwriting a file does not guarantee that its old blocks are
// gone; the tombstone and unlink are what this ring can promise).
//
// Durability: Wrap never hands out a key whose file name it has not seen
// made durable (the file fsynced before it is linked into place, then its
// directory fsynced), so no record is ever sealed under a key a crash could
// still lose, which would silently "erase" it. A key this process created
// or first loaded for Wrap waits for a directory fsync that began after the
// key's link; concurrent waits share one fsync per directory (package
// internal/groupcommit), so a burst of new scopes pays one directory fsync,
// not one each. A key loaded from disk only to Unwrap needs none.
type File struct {
	dir string

	mu    sync.Mutex
	cache map[string]cachedKey // scope keys read, revalidated after Revalidate
	now   func() time.Time

	syncOnce sync.Once
	syncs    *groupcommit.Queue[string] // directory fsyncs, shared by concurrent waiters
	waits    atomic.Int64               // callers in durable now (a gauge; tests order events by it)
	syncDir  func(dir string) error     // fsyncs a directory; tests observe it
	linked   func(path string)          // called once a key file is linked; tests observe it
	dirsMu   sync.Mutex
	dirs     map[string]bool // directories known to exist durably
}

// cachedKey is a scope key as read, with the identity of the file it was
// read from: a use checks (by one lstat each) that the file is still that
// file and that no tombstone exists, so an erasure by another process
// takes effect at this one's next use.
type cachedKey struct {
	key     []byte
	file    os.FileInfo
	checked time.Time // when the file and the absent tombstone were last seen
	durable bool      // its name was seen fsynced: Wrap may use it
}

// Revalidate is how long a cached scope key is used without looking at the
// directory again: an erasure by another process takes effect in this one
// within this long (at once in the process that erased).
const Revalidate = time.Second

const (
	fileWrapVersion = 1
	keySuffix       = ".key"
	tombSuffix      = ".erased"
)

// OpenFile opens (creating with mode 0700 if absent) a file key ring. A
// directory readable or writable by group or others is refused: the keys
// are the only thing between a backup and its plaintext.
func OpenFile(dir string) (*File, error) {
	if dir == "" {
		return nil, errors.New("key ring: empty directory name")
	}
	dir = filepath.Clean(dir) // the stop of mkdirs' walk up: "keys/" is "keys"
	_, serr := os.Stat(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("key ring: %w", err)
	}
	if errors.Is(serr, fs.ErrNotExist) {
		// A new ring: its own name must survive a crash with its keys.
		if err := fsyncDir(filepath.Dir(dir)); err != nil {
			return nil, fmt.Errorf("key ring: %w", err)
		}
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("key ring: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("key ring: %s is not a directory", dir)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("key ring: %s has mode %v; it must not be accessible to group or others (chmod 700)", dir, st.Mode().Perm())
	}
	return &File{dir: dir, cache: map[string]cachedKey{}, now: time.Now, syncDir: fsyncDir, linked: func(string) {}, dirs: map[string]bool{dir: true}}, nil
}

// Close stops the ring's directory-fsync committer once every wait already
// queued is answered. A ring is usable without Close; it only frees a
// goroutine.
func (f *File) Close() error {
	f.syncOnce.Do(func() {}) // a ring never used starts none
	if f.syncs != nil {
		f.syncs.Close()
	}
	return nil
}

// durable waits for an fsync of dir that begins after the call: whatever
// was linked into dir before it is then on disk. Concurrent calls share
// fsyncs (one per distinct directory of a group).
func (f *File) durable(ctx context.Context, dir string) error {
	f.syncOnce.Do(func() {
		f.syncs = groupcommit.New(groupcommit.Config[string]{Attempt: f.syncGroup})
	})
	if f.syncs == nil {
		return f.syncDir(dir) // closed before first use
	}
	f.waits.Add(1)
	defer f.waits.Add(-1)
	err := f.syncs.Submit(ctx, dir)
	if errors.Is(err, groupcommit.ErrClosed) {
		return f.syncDir(dir)
	}
	return err
}

// syncGroup fsyncs each distinct directory of a group once.
func (f *File) syncGroup(group []*groupcommit.Member[string]) ([]*groupcommit.Member[string], error) {
	done := map[string]error{}
	for _, m := range group {
		err, ok := done[m.Req]
		if !ok {
			err = f.syncDir(m.Req)
			done[m.Req] = err
		}
		m.Answer(err)
	}
	return nil, nil
}

// mkdirs creates dir and any missing parent under the ring's directory
// (mode 0700), fsyncing each new directory's parent so the path survives a
// crash with the key in it.
func (f *File) mkdirs(ctx context.Context, dir string) error {
	f.dirsMu.Lock()
	known := f.dirs[dir]
	f.dirsMu.Unlock()
	if known {
		return nil
	}
	if parent := filepath.Dir(dir); dir != f.dir && parent != dir {
		if err := f.mkdirs(ctx, parent); err != nil {
			return err
		}
	}
	err := os.Mkdir(dir, 0o700)
	switch {
	case err == nil:
		// A new name in the parent: durable before anything goes in it.
		if err := f.durable(ctx, filepath.Dir(dir)); err != nil {
			return err
		}
	case errors.Is(err, fs.ErrExist):
		// Made by another process or an earlier run; its creator synced
		// its parent, or it predates this ring's durability rule: sync
		// the parent once so this process can rely on it.
		if err := f.durable(ctx, filepath.Dir(dir)); err != nil {
			return err
		}
	default:
		return err
	}
	f.dirsMu.Lock()
	if len(f.dirs) >= 4096 {
		clear(f.dirs)
	}
	f.dirs[dir] = true
	f.dirsMu.Unlock()
	return nil
}

// Dir is the ring's directory.
func (f *File) Dir() string { return f.dir }

func (f *File) paths(scope string) (key, tomb string, err error) {
	if err := ValidateScope(scope); err != nil {
		return "", "", err
	}
	base := filepath.Join(f.dir, filepath.FromSlash(scope))
	return base + keySuffix, base + tombSuffix, nil
}

func exists(p string) (bool, error) {
	_, err := os.Lstat(p)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, err
}

// scopeKey reads scope's key; create (Wrap) makes it when absent and
// returns only a key whose name is durable.
func (f *File) scopeKey(ctx context.Context, scope string, create bool) ([]byte, error) {
	if k := f.fresh(scope, create); k != nil {
		return k, nil
	}
	kp, tp, err := f.paths(scope)
	if err != nil {
		return nil, err
	}
	erased, err := exists(tp)
	if err != nil {
		return nil, fmt.Errorf("key ring: %w", err)
	}
	if erased {
		f.drop(scope)
		return nil, &ScopeError{Scope: scope, Err: ErrErased}
	}
	if k := f.cached(scope, kp, create); k != nil {
		return k, nil
	}
	k, err := os.ReadFile(kp)
	if err == nil {
		if len(k) != DataKeySize {
			return nil, &ScopeError{Scope: scope, Err: fmt.Errorf("key file %s holds %d bytes, not %d", kp, len(k), DataKeySize)}
		}
		if create {
			// Another writer (goroutine or process) may have linked it
			// and not yet fsynced its directory: see it durable first.
			if err := f.durable(ctx, filepath.Dir(kp)); err != nil {
				return nil, fmt.Errorf("key ring: sync key of scope %s: %w", scope, err)
			}
		}
		f.remember(scope, kp, k, create)
		return k, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("key ring: %w", err)
	}
	if !create {
		return nil, &ScopeError{Scope: scope, Err: ErrUnknownScope}
	}
	k = make([]byte, DataKeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	// Link, not rename: the first creator wins and a racing one reads the
	// winner's key instead of replacing it (which would orphan data keys
	// already wrapped under the loser's).
	if err := f.writeDurable(ctx, kp, k, false); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return f.scopeKey(ctx, scope, true)
		}
		return nil, fmt.Errorf("key ring: create key for scope %s: %w", scope, err)
	}
	f.remember(scope, kp, k, true)
	return k, nil
}

// remember caches scope's key as read from kp; durable says its name was
// seen fsynced.
func (f *File) remember(scope, kp string, k []byte, durable bool) {
	st, err := os.Lstat(kp)
	if err != nil {
		return
	}
	f.mu.Lock()
	if len(f.cache) >= 4096 {
		clear(f.cache)
	}
	f.cache[scope] = cachedKey{key: bytes.Clone(k), file: st, checked: f.now(), durable: durable}
	f.mu.Unlock()
}

// fresh returns scope's cached key if it was validated within Revalidate
// (and, for Wrap, seen durable). Only valid scope names are cached, so a
// hit needs no validation.
func (f *File) fresh(scope string, wrap bool) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.cache[scope]
	if !ok || f.now().Sub(c.checked) >= Revalidate || wrap && !c.durable {
		return nil
	}
	return bytes.Clone(c.key)
}

// cached returns scope's cached key if the key file is still the one it
// was read from (and, for Wrap, was seen durable), and marks it validated.
func (f *File) cached(scope, kp string, wrap bool) []byte {
	f.mu.Lock()
	c, ok := f.cache[scope]
	f.mu.Unlock()
	if !ok || wrap && !c.durable {
		return nil
	}
	st, err := os.Lstat(kp)
	if err != nil || !os.SameFile(st, c.file) || st.Size() != DataKeySize {
		f.drop(scope)
		return nil
	}
	f.mu.Lock()
	if cur, ok := f.cache[scope]; ok {
		cur.checked = f.now()
		f.cache[scope] = cur
	}
	f.mu.Unlock()
	return bytes.Clone(c.key) // drop zeroes the cached slice
}

func (f *File) drop(scope string) {
	f.mu.Lock()
	if c, ok := f.cache[scope]; ok {
		clear(c.key)
		delete(f.cache, scope)
	}
	f.mu.Unlock()
}

// writeDurable writes data to path atomically: a temporary file is
// written and fsynced, then linked (or renamed, when replace is true) into
// place, and the directory is fsynced (shared with concurrent writers) so
// the name survives a crash. New directories on the way are made durable
// too.
func (f *File) writeDurable(ctx context.Context, path string, data []byte, replace bool) error {
	dir := filepath.Dir(path)
	if err := f.mkdirs(ctx, dir); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	defer os.Remove(name)
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if replace {
		err = os.Rename(name, path)
	} else {
		err = os.Link(name, path)
	}
	if err != nil {
		return err
	}
	f.linked(path)
	return f.durable(ctx, dir)
}

func fsyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func wrapAD(scope string) []byte { return []byte("runseal keyring file v1\x00" + scope) }

// Wrap returns a fresh data key and its wrapping under scope's key:
// version byte 1, a 24-byte nonce, then XChaCha20-Poly1305 of the key with
// the scope name as associated data.
func (f *File) Wrap(ctx context.Context, scope string) ([]byte, []byte, error) {
	sk, err := f.scopeKey(ctx, scope, true)
	if err != nil {
		return nil, nil, err
	}
	aead, err := chacha20poly1305.NewX(sk)
	if err != nil {
		return nil, nil, err
	}
	buf := make([]byte, DataKeySize+1+chacha20poly1305.NonceSizeX)
	if _, err := rand.Read(buf); err != nil {
		return nil, nil, err
	}
	// buf is this call's own: the key is returned in place (capped, so
	// the caller cannot reach the nonce behind it), with no copy.
	key := buf[:DataKeySize:DataKeySize]
	wrapped := make([]byte, 0, 1+chacha20poly1305.NonceSizeX+DataKeySize+aead.Overhead())
	wrapped = append(wrapped, fileWrapVersion)
	wrapped = append(wrapped, buf[DataKeySize+1:]...)
	wrapped = aead.Seal(wrapped, buf[DataKeySize+1:], key, wrapAD(scope))
	return key, wrapped, nil
}

// Unwrap opens a data key wrapped by Wrap for scope.
func (f *File) Unwrap(ctx context.Context, scope string, wrapped []byte) ([]byte, error) {
	sk, err := f.scopeKey(ctx, scope, false)
	if err != nil {
		return nil, err
	}
	if len(wrapped) != 1+chacha20poly1305.NonceSizeX+DataKeySize+chacha20poly1305.Overhead || wrapped[0] != fileWrapVersion {
		return nil, &ScopeError{Scope: scope, Err: fmt.Errorf("%w: %d bytes of version %d, not a file ring wrapping", ErrUnwrap, len(wrapped), firstByte(wrapped))}
	}
	aead, err := chacha20poly1305.NewX(sk)
	if err != nil {
		return nil, err
	}
	n := 1 + chacha20poly1305.NonceSizeX
	key, err := aead.Open(nil, wrapped[1:n], wrapped[n:], wrapAD(scope))
	if err != nil {
		return nil, &ScopeError{Scope: scope, Err: ErrUnwrap}
	}
	return key, nil
}

func firstByte(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0])
}

// Erase destroys scope's key: it writes the tombstone (with the time) first,
// so a crash part way still reads as erased, then overwrites the key file
// with zeros, fsyncs it, unlinks it and fsyncs the directory.
func (f *File) Erase(ctx context.Context, scope string) (bool, error) {
	kp, tp, err := f.paths(scope)
	if err != nil {
		return false, err
	}
	hasKey, err := exists(kp)
	if err != nil {
		return false, fmt.Errorf("key ring: %w", err)
	}
	erased, err := exists(tp)
	if err != nil {
		return false, fmt.Errorf("key ring: %w", err)
	}
	if !hasKey && !erased {
		return false, &ScopeError{Scope: scope, Err: ErrUnknownScope}
	}
	if !erased {
		stamp := []byte(time.Now().UTC().Format(time.RFC3339Nano) + "\n")
		if err := f.writeDurable(ctx, tp, stamp, true); err != nil {
			return false, fmt.Errorf("key ring: tombstone for scope %s: %w", scope, err)
		}
	}
	f.drop(scope)
	if hasKey {
		if err := f.destroy(ctx, kp); err != nil {
			return false, fmt.Errorf("key ring: destroy key of scope %s: %w", scope, err)
		}
	}
	return !erased, nil
}

// Erased reports whether scope has a tombstone, by its files' presence.
func (f *File) Erased(ctx context.Context, scope string) (bool, error) {
	kp, tp, err := f.paths(scope)
	if err != nil {
		return false, err
	}
	for _, c := range []struct {
		path   string
		erased bool
	}{{tp, true}, {kp, false}} { // the tombstone first: Erase writes it before it destroys the key
		ok, err := exists(c.path)
		if err != nil {
			return false, fmt.Errorf("key ring: %w", err)
		}
		if ok {
			return c.erased, nil
		}
	}
	return false, &ScopeError{Scope: scope, Err: ErrUnknownScope}
}

func (f *File) destroy(ctx context.Context, path string) error {
	fh, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	st, err := fh.Stat()
	if err == nil {
		_, err = fh.WriteAt(make([]byte, st.Size()), 0)
	}
	if err == nil {
		err = fh.Sync()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil {
		return err
	}
	return f.durable(ctx, filepath.Dir(path))
}

// Scopes lists every scope with a key or a tombstone.
func (f *File) Scopes(ctx context.Context) ([]Scope, error) {
	seen := map[string]bool{}
	err := filepath.WalkDir(f.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(f.dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case strings.HasSuffix(rel, keySuffix):
			name := strings.TrimSuffix(rel, keySuffix)
			if ValidateScope(name) == nil {
				seen[name] = seen[name] || false
			}
		case strings.HasSuffix(rel, tombSuffix):
			name := strings.TrimSuffix(rel, tombSuffix)
			if ValidateScope(name) == nil {
				seen[name] = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("key ring: %w", err)
	}
	out := make([]Scope, 0, len(seen))
	for n, e := range seen {
		out = append(out, Scope{Name: n, Erased: e})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
