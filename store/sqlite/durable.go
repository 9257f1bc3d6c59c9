package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// ErrNotDurable is the class of failures to flush the journal's write-ahead
// log to disk. After one, the open file answers every write and every read
// with it: what it had committed since the last good flush may not survive
// a power loss, and no later flush can promise otherwise (Linux may drop
// the dirty pages a failed fsync reported). Close the store and open the
// file again: SQLite then recovers the log as it finds it on disk.
var ErrNotDurable = errors.New("sqlite: the journal's write-ahead log could not be flushed to disk")

// walSync makes the writer's commits durable after the fact, so that the
// flush of one group overlaps the execution of the next (pipelined group
// commit). The writer connection runs with synchronous=NORMAL: SQLite then
// writes each commit into the WAL without an fsync, but still syncs the WAL
// before a checkpoint copies it into the database file, the database file
// after the checkpoint and before the WAL may be reset, and a reset WAL's
// new header before frames follow it. What NORMAL gives up, that a commit
// survives a power loss, walSync restores with its own fdatasync of the
// -wal file (an fd on the same inode: the flush covers every write to the
// file, whoever made it).
//
// The rules, which together make an answered write exactly as durable as
// under synchronous=FULL:
//
//   - A write's answer (success, refusal or failure) is sent only after an
//     fdatasync of the WAL that began after the transaction that decided it
//     ended (groupcommit.SQL.Durable). Every frame of that transaction was
//     written to the file before COMMIT returned, so the flush covers it,
//     and the frames of earlier transactions too. SQLite's recovery replays
//     the WAL's valid prefix of committed frames (checksummed from the
//     header on), so a commit whose frames are on disk survives.
//   - A read sees only durable commits: the read pool's connections wait,
//     before handing out the first row of a statement, until every
//     transaction the writer had begun when the statement's snapshot was
//     taken is covered by a finished flush (awaitDurable). Without it a
//     reader could show, and a client keep, a record or a signed checkpoint
//     that a power loss then takes back.
//   - A failed flush is final for the open file (ErrNotDurable).
//
// Checked against SQLite (pragma.html#pragma_synchronous: in WAL mode
// NORMAL is "always consistent" and only a commit's durability is lost to
// a power failure; wal.c): with NORMAL, sqlite3WalFrames syncs a restarted
// WAL's header with the checkpoint sync flags before any frame follows it
// (ticket ff5be73dee), and a checkpoint syncs the WAL before it copies
// frames into the database file and the database file before the WAL may
// be restarted. So the only writes left unsynced are a commit's frames,
// which our flush covers; a restart overwrites the WAL in place (same
// inode), and the stale frames after the new ones carry the old salt and
// end recovery. journal_size_limit and TRUNCATE checkpoints shrink the
// same inode. Were database/sql to replace the writer's connection, the
// new one would run with the DSN's synchronous=FULL. Transactions are
// counted when they begin (before any can be visible) and when they end
// (committed or rolled back), and a flush covers every transaction ended
// when it began.
//
// The -wal file is checked after every transaction: if SQLite replaced it
// (a new inode, after its last connection closed and the file was
// removed), walSync flushes the old one once and moves to the new one.
type walSync struct {
	path string // the -wal file

	mu      sync.Mutex
	wake    *sync.Cond // the flusher waits on it for work
	f       *os.File   // open on the current -wal file
	dev     uint64
	ino     uint64
	retired []*os.File    // earlier -wal files still to flush once
	queue   []func(error) // answers waiting for the next flush
	begun   uint64        // writer transactions begun
	ended   uint64        // writer transactions ended (committed or rolled back)
	durable uint64        // ended, as it was when the last good flush began
	tried   uint64        // ended, as it was when the last flush began
	flushes uint64        // flushes begun
	flushed chan struct{} // closed and replaced when a flush finishes
	failed  error         // sticky: the first failed flush
	closed  bool
	done    chan struct{}

	// fdatasync flushes f; tests replace it (under mu) to fail or to
	// observe. waiting, if set, is called when a read starts to wait.
	fdatasync func(f *os.File) error
	waiting   func()
}

// newWALSync starts flushing the WAL of the database file at path.
func newWALSync(path string) (*walSync, error) {
	w := &walSync{
		path: path + "-wal", flushed: make(chan struct{}), done: make(chan struct{}),
		fdatasync: func(f *os.File) error { return ignoreEINTR(func() error { return syscall.Fdatasync(int(f.Fd())) }) },
	}
	w.wake = sync.NewCond(&w.mu)
	if err := w.follow(); err != nil {
		return nil, err
	}
	go w.flusher()
	return w, nil
}

func ignoreEINTR(fn func() error) error {
	for {
		if err := fn(); !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// follow opens the current -wal file if it is not the one held. Called
// with mu held, or before the flusher starts.
func (w *walSync) follow() error {
	fi, err := os.Stat(w.path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotDurable, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%w: cannot identify %s", ErrNotDurable, w.path)
	}
	if w.f != nil && uint64(st.Dev) == w.dev && st.Ino == w.ino {
		return nil
	}
	f, err := os.Open(w.path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotDurable, err)
	}
	if w.f != nil {
		w.retired = append(w.retired, w.f)
	}
	w.f, w.dev, w.ino = f, uint64(st.Dev), st.Ino
	return nil
}

// begin is told that the writer begins a transaction.
func (w *walSync) begin() {
	w.mu.Lock()
	w.begun++
	w.mu.Unlock()
}

// end is told that the writer's transaction has ended: whatever it
// committed is in the WAL, which the next flush must cover.
func (w *walSync) end() {
	w.mu.Lock()
	w.ended++
	if w.failed == nil {
		if err := w.follow(); err != nil {
			w.failed = err
		}
	}
	w.mu.Unlock()
	w.wake.Signal()
}

// answerAfterFlush implements groupcommit.SQL.Durable: answer is called
// after a flush that begins after this call (so after the transaction that
// decided the answers ended).
func (w *walSync) answerAfterFlush(answer func(error)) {
	w.mu.Lock()
	if w.failed != nil {
		err := w.failed
		w.mu.Unlock()
		answer(err)
		return
	}
	w.queue = append(w.queue, answer)
	w.mu.Unlock()
	w.wake.Signal()
}

// flusher runs the flushes: each takes every answer queued before it began.
func (w *walSync) flusher() {
	defer close(w.done)
	w.mu.Lock()
	for {
		for len(w.queue) == 0 && w.ended == w.tried && !w.closed {
			w.wake.Wait()
		}
		if len(w.queue) == 0 && w.ended == w.tried && w.closed {
			w.mu.Unlock()
			return
		}
		queue, upTo, err := w.queue, w.ended, w.failed
		w.queue, w.tried = nil, upTo
		w.flushes++
		files, fdatasync := append(w.retired, w.f), w.fdatasync
		w.retired = nil
		w.mu.Unlock()

		if err == nil {
			for _, f := range files {
				if e := fdatasync(f); e != nil && err == nil {
					err = fmt.Errorf("%w: fdatasync %s: %w", ErrNotDurable, w.path, e)
				}
			}
		}
		for _, f := range files[:len(files)-1] {
			f.Close()
		}

		w.mu.Lock()
		if err != nil && w.failed == nil {
			w.failed = err
		}
		if err == nil {
			w.durable = upTo
		}
		close(w.flushed)
		w.flushed = make(chan struct{})
		w.mu.Unlock()
		for _, answer := range queue {
			answer(err)
		}
		w.mu.Lock()
	}
}

// awaitDurable returns once every writer transaction begun by now is
// covered by a finished flush, or with the failure that stops it.
func (w *walSync) awaitDurable(ctx context.Context) error {
	w.mu.Lock()
	want := w.begun
	for {
		if w.failed != nil {
			err := w.failed
			w.mu.Unlock()
			return err
		}
		if w.durable >= want {
			w.mu.Unlock()
			return nil
		}
		ch, waiting := w.flushed, w.waiting
		w.mu.Unlock()
		if waiting != nil {
			waiting()
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		w.mu.Lock()
	}
}

// close finishes the flushes of everything ended so far and releases the
// files; the writer must have stopped.
func (w *walSync) close() error {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.wake.Signal()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
	return nil
}

// pipelineDurability hands the durability of the writer's commits to a
// walSync (see there) when the file is in WAL mode, and switches the
// writer connection to synchronous=NORMAL. It returns nil, leaving
// synchronous=FULL, for a file that is not in WAL mode. Were database/sql
// ever to replace the writer's connection, the new one would come with the
// DSN's synchronous=FULL: slower, and as durable.
func pipelineDurability(ctx context.Context, wdb *sql.DB, path string) (*walSync, error) {
	var mode string
	if err := wdb.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		return nil, fmt.Errorf("read journal mode: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return nil, nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	ws, err := newWALSync(abs)
	if err != nil {
		return nil, err
	}
	if _, err := wdb.ExecContext(ctx, `PRAGMA synchronous=NORMAL`); err != nil {
		ws.close()
		return nil, fmt.Errorf("set synchronous=NORMAL: %w", err)
	}
	return ws, nil
}
