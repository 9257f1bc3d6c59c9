package keyring_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/runseal/runseal/keyring"
)

// syncLog records, in order, the key links and directory fsyncs a ring
// makes and the returns of the test's Wraps.
type syncLog struct {
	mu     sync.Mutex
	events []string
}

func (l *syncLog) add(format string, args ...any) {
	l.mu.Lock()
	l.events = append(l.events, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *syncLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events...)
}

// durableBefore checks that between "link <key>" and "return <who>" a
// whole fsync of dir ran: it started after the link and ended before the
// return. That is what makes a key safe to seal under: a crash after the
// Wrap returned cannot lose its file name.
func durableBefore(t *testing.T, events []string, key, dir, who string) {
	t.Helper()
	linked, started := -1, -1
	for i, e := range events {
		switch {
		case e == "link "+key:
			linked = i
		case linked >= 0 && e == "sync-start "+dir:
			started = i
		case started > linked && linked >= 0 && e == "sync-end "+dir:
			started = len(events) // a whole fsync after the link
		case e == "return "+who:
			if linked < 0 {
				t.Fatalf("%s returned before any link of %s: %v", who, key, events)
			}
			if started != len(events) {
				t.Fatalf("%s returned before an fsync of %s that began after %s was linked: %v", who, dir, key, events)
			}
			return
		}
	}
	t.Fatalf("no return of %s in %v", who, events)
}

func hookedRing(t *testing.T, log *syncLog, block func(dir string)) *keyring.File {
	t.Helper()
	f := openTestFile(t)
	t.Cleanup(func() { f.Close() })
	keyring.SetSyncHooks(f, func(dir string) error {
		log.add("sync-start %s", dir)
		if block != nil {
			block(dir)
		}
		log.add("sync-end %s", dir)
		return nil
	}, func(path string) { log.add("link %s", path) })
	return f
}

func releaseOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}

// waitFor polls cond until it holds: the events it waits on happen in
// other goroutines that signal nothing else.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestFile_NewScopeKeysShareDirectoryFsync: concurrent Wraps of new
// scopes each return only after their key's name is durable, and they
// share directory fsyncs: while one fsync runs, every other new key queues
// for the next one, so N new scopes cost at most two fsyncs of their
// directory, not N.
func TestFile_NewScopeKeysShareDirectoryFsync(t *testing.T) {
	ctx := context.Background()
	var log syncLog
	const n = 16
	release := make(chan struct{})
	f := hookedRing(t, &log, nil)
	// The scopes' directories exist (and are durable) before the burst.
	if _, _, err := f.Wrap(ctx, "t/case/00000000000000000000000000"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { releaseOnce(release) }) // before f.Close, should the test fail
	var once sync.Once
	keyring.SetSyncHooks(f, func(dir string) error {
		log.add("sync-start %s", dir)
		once.Do(func() { <-release })
		log.add("sync-end %s", dir)
		return nil
	}, func(path string) { log.add("link %s", path) })
	caseDir := filepath.Join(f.Dir(), "t", "case")
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, errs[i] = f.Wrap(ctx, fmt.Sprintf("t/case/%026d", i+1))
			log.add("return %d", i)
		}()
	}
	waitFor(t, "every new key to wait for an fsync", func() bool { return keyring.SyncWaits(f) == n })
	releaseOnce(release)
	wg.Wait()
	events := log.snapshot()
	syncs := 0
	for _, e := range events {
		if e == "sync-start "+caseDir {
			syncs++
		}
	}
	// One for the first Wrap (before the burst), then at most two for the
	// burst: the group whose fsync was held, and one for every key that
	// queued meanwhile.
	if syncs > 3 {
		t.Errorf("%d fsyncs of the scopes' directory for 1+%d new keys, want at most 3 (shared): %v", syncs, n, events)
	}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Wrap %d: %v", i, errs[i])
		}
		durableBefore(t, events, filepath.Join(caseDir, fmt.Sprintf("%026d.key", i+1)), caseDir, fmt.Sprint(i))
	}
}

// TestFile_WrapWaitsForAnotherWritersKeyToBeDurable: a key another writer
// has linked but whose directory is not yet fsynced must not be used to
// seal: a crash could still lose it, and every record sealed under it
// would read as erased. A second Wrap of the same new scope waits for an
// fsync of its own.
func TestFile_WrapWaitsForAnotherWritersKeyToBeDurable(t *testing.T) {
	ctx := context.Background()
	var log syncLog
	release := make(chan struct{})
	var f *keyring.File
	const scope = "t/case/01M8SNY25MTQ9VP1YG42CGNP5K"
	f = hookedRing(t, &log, nil)
	if _, _, err := f.Wrap(ctx, "t/case/00000000000000000000000000"); err != nil {
		t.Fatal(err)
	}
	log = syncLog{} // from here on: A's and B's events only
	keyring.SetSyncHooks(f, func(dir string) error {
		log.add("sync-start %s", dir)
		<-release
		log.add("sync-end %s", dir)
		return nil
	}, func(path string) { log.add("link %s", path) })
	t.Cleanup(func() { releaseOnce(release) })
	caseDir := filepath.Join(f.Dir(), "t", "case")
	key := filepath.Join(caseDir, "01M8SNY25MTQ9VP1YG42CGNP5K.key")

	aDone := make(chan error, 1)
	go func() {
		_, _, err := f.Wrap(ctx, scope)
		log.add("return A")
		aDone <- err
	}()
	waitFor(t, "A's fsync to start", func() bool {
		for _, e := range log.snapshot() {
			if e == "sync-start "+caseDir {
				return true
			}
		}
		return false
	})
	// A's key is linked, its directory fsync has not finished.
	bDone := make(chan error, 1)
	var bWrapped []byte
	go func() {
		var err error
		_, bWrapped, err = f.Wrap(ctx, scope)
		log.add("return B")
		bDone <- err
	}()
	waitFor(t, "B to wait for an fsync", func() bool {
		select {
		case err := <-bDone:
			t.Fatalf("Wrap returned (err %v) with a key whose name was not yet durable: %v", err, log.snapshot())
		default:
		}
		return keyring.SyncWaits(f) == 2
	})
	releaseOnce(release)
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	if err := <-bDone; err != nil {
		t.Fatal(err)
	}
	events := log.snapshot()
	durableBefore(t, events, key, caseDir, "A")
	durableBefore(t, events, key, caseDir, "B")
	if _, err := f.Unwrap(ctx, scope, bWrapped); err != nil {
		t.Fatalf("B's data key does not unwrap under the one scope key: %v", err)
	}
}

// TestFile_NewScopeDirectoriesAreDurable: the first key of a tenant
// creates the tenant's and the kind's directories; each new directory's
// name is fsynced into its parent before the key is used, or a crash
// could lose the directory and the key in it.
func TestFile_NewScopeDirectoriesAreDurable(t *testing.T) {
	ctx := context.Background()
	var log syncLog
	f := hookedRing(t, &log, nil)
	if _, _, err := f.Wrap(ctx, "acme/run/01M8SNY25MTQ9VP1YG42CGNP5K"); err != nil {
		t.Fatal(err)
	}
	log.add("return wrap")
	events := log.snapshot()
	for _, dir := range []string{f.Dir(), filepath.Join(f.Dir(), "acme"), filepath.Join(f.Dir(), "acme", "run")} {
		found := false
		for _, e := range events {
			if e == "sync-start "+dir {
				found = true
			}
		}
		if !found {
			t.Errorf("no fsync of %s before the new scope's key was used: %v", dir, events)
		}
	}
	durableBefore(t, events, filepath.Join(f.Dir(), "acme", "run", "01M8SNY25MTQ9VP1YG42CGNP5K.key"), filepath.Join(f.Dir(), "acme", "run"), "wrap")
}

// TestOpenFile_TrailingSlashDirWraps: a ring opened as "DIR/" (as a shell
// completes it) creates and uses keys as "DIR" does; the walk that makes
// new directories durable stops at the ring's directory however it was
// spelled.
func TestOpenFile_TrailingSlashDirWraps(t *testing.T) {
	ctx := context.Background()
	f, err := keyring.OpenFile(filepath.Join(t.TempDir(), "ring") + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const s = "t/case/01M8SNY25MTQ9VP1YG42CGNP5K"
	_, w, err := f.Wrap(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Unwrap(ctx, s, w); err != nil {
		t.Fatal(err)
	}
}
