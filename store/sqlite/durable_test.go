package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/storetest"
)

// setFdatasync replaces the store's WAL flush.
func setFdatasync(t *testing.T, s *Store, fn func(f *os.File) error) {
	t.Helper()
	if s.wal == nil {
		t.Fatal("the store does not pipeline its flushes (not in WAL mode?)")
	}
	s.wal.mu.Lock()
	s.wal.fdatasync = fn
	s.wal.mu.Unlock()
}

func realFdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }

// rawCount counts the records committed to path, as a reader outside the
// store (which does not wait for flushes) sees them.
func rawCount(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM records`).Scan(&n); err != nil {
		t.Error(err)
	}
	return n
}

func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// An append is answered only after a flush of the WAL that began once its
// commit was in the file: the flush hook counts the records committed when
// it begins, and every answered append must find its records counted by a
// flush that had finished before the answer. A writer that answered after
// a flush already under way when it committed (or before any flush) fails.
func TestAppend_AnsweredOnlyAfterAFlushThatBeganAfterItsCommit(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	s := open(t, path, Options{PipelineFlush: true})
	raw := rawDB(t, path)
	var mu sync.Mutex
	flushedCount := -1 // the most records any finished flush covered
	setFdatasync(t, s, func(f *os.File) error {
		n := rawCount(t, raw)
		err := realFdatasync(f)
		mu.Lock()
		flushedCount = max(flushedCount, n)
		mu.Unlock()
		return err
	})
	const workers, appends = 4, 25
	var wg sync.WaitGroup
	var total sync.Map
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run := store.NewRunID()
			l, err := s.Acquire(ctx, run, "w", time.Hour)
			if err != nil {
				t.Error(err)
				return
			}
			for i := range appends {
				recs, err := s.Append(ctx, l.Epoch, []store.Append{note(run, "x")})
				if err != nil {
					t.Error(err)
					return
				}
				// The records committed before this answer, at least: this
				// worker's so far (the others' are a lower bound too).
				total.Store(w, i+1)
				committed := 0
				total.Range(func(_, v any) bool { committed += v.(int); return true })
				mu.Lock()
				got := flushedCount
				mu.Unlock()
				if len(recs) != 1 || got < committed {
					t.Errorf("append %d of worker %d answered with %d records committed, but the flushes finished so far covered %d", i, w, committed, got)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// A failed flush of the WAL is never answered as success: the append gets
// an in-doubt error of class ErrNotDurable, and from then on the open file
// refuses writes and reads alike, rather than show or build on commits a
// power loss may take back.
func TestAppend_FailedWALFlushIsNotAcknowledged(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	s := open(t, path, Options{PipelineFlush: true})
	run := store.NewRunID()
	l, err := s.Acquire(ctx, run, "w", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, l.Epoch, []store.Append{note(run, "kept")}); err != nil {
		t.Fatal(err)
	}
	setFdatasync(t, s, func(*os.File) error { return syscall.EIO })
	_, err = s.Append(ctx, l.Epoch, []store.Append{note(run, "in doubt")})
	if !errors.Is(err, store.ErrCommitUnknown) || !errors.Is(err, ErrNotDurable) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("append whose flush failed: %v, want ErrCommitUnknown and ErrNotDurable wrapping EIO", err)
	}
	setFdatasync(t, s, realFdatasync) // a later flush that succeeds proves nothing
	if _, err := s.Append(ctx, l.Epoch, []store.Append{note(run, "after")}); !errors.Is(err, ErrNotDurable) {
		t.Fatalf("append after a failed flush: %v, want ErrNotDurable", err)
	}
	if _, err := s.Acquire(ctx, store.NewRunID(), "w", time.Hour); !errors.Is(err, ErrNotDurable) {
		t.Fatalf("acquire after a failed flush: %v, want ErrNotDurable", err)
	}
	if recs, err := s.Read(ctx, run, 1); !errors.Is(err, ErrNotDurable) {
		t.Fatalf("read after a failed flush: %d records, %v; want ErrNotDurable", len(recs), err)
	}
	s.Close()
	// Reopened, the file is whatever SQLite recovers; here the process did
	// not lose its page cache, so every commit is there.
	s2 := open(t, path, Options{})
	if recs, err := s2.Read(ctx, run, 1); err != nil || len(recs) < 1 {
		t.Fatalf("reopened: %d records, %v", len(recs), err)
	}
}

// A reader never sees a commit the WAL flush has not covered yet: with the
// flush held, a commit is in the file (a reader outside the store sees
// it), and the store's read waits for the flush, then returns it.
func TestRead_CommitNotYetFlushedIsNotShown(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	s := open(t, path, Options{PipelineFlush: true})
	raw := rawDB(t, path)
	run := store.NewRunID()
	l, err := s.Acquire(ctx, run, "w", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, l.Epoch, []store.Append{note(run, "first")}); err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var once, released sync.Once
	free := func() { released.Do(func() { close(release) }) }
	defer free() // a failing test must not leave the writer waiting
	setFdatasync(t, s, func(f *os.File) error {
		if rawCount(t, raw) == 2 {
			once.Do(func() { close(entered) })
			<-release
		}
		return realFdatasync(f)
	})
	waiting := make(chan struct{}, 1)
	s.wal.mu.Lock()
	s.wal.waiting = func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	}
	s.wal.mu.Unlock()
	appended := make(chan error, 1)
	go func() {
		_, err := s.Append(ctx, l.Epoch, []store.Append{note(run, "second")})
		appended <- err
	}()
	<-entered // committed, and its flush is held
	type result struct {
		n   int
		err error
	}
	read := make(chan result, 1)
	go func() {
		recs, err := s.Read(ctx, run, 1)
		read <- result{len(recs), err}
	}()
	select {
	case r := <-read:
		t.Fatalf("read returned %d records (%v) while the commit of the second was not flushed", r.n, r.err)
	case err := <-appended:
		t.Fatalf("append answered (%v) before its flush finished", err)
	case <-waiting:
	}
	free()
	if err := <-appended; err != nil {
		t.Fatal(err)
	}
	if r := <-read; r.err != nil || r.n != 2 {
		t.Fatalf("read after the flush: %d records, %v; want 2", r.n, r.err)
	}
}

// TestConformancePipelineFlush holds the pipelined flush to the whole
// contract: every answer and every read waits for a flush, so nothing a
// test can observe may differ from the plain group commit.
func TestConformancePipelineFlush(t *testing.T) {
	storetest.Run(t, storetest.Harness{Open: func(tb testing.TB) (store.Journal, storetest.Clock) {
		clk := storetest.NewFakeClock()
		s, err := Open(context.Background(), filepath.Join(tb.TempDir(), "j.db"), Options{Now: clk.Now, PipelineFlush: true})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { s.Close() })
		return s, clk
	}})
}
