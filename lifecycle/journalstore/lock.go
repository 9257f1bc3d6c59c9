package journalstore

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/store"
)

// ErrLocked is the class of the error New returns when
// another JournalStorage, in this process or another, already writes the
// journal tenant's lifecycle records. The error is also of KindConflict.
var ErrLocked = errors.New("the journal's lifecycle writer lock is held by another storage")

// LockedError is the refusal of a second JournalStorage: it names the lock
// file and, when the holder wrote it, the holder's process id. It unwraps to
// [ErrLocked].
type LockedError struct {
	// Lock is the lock file beside the journal's database file.
	Lock string
	// Holder is what the holder wrote into the lock file ("pid 1234"), or
	// empty if it could not be read.
	Holder string
}

func (e *LockedError) Error() string {
	h := ""
	if e.Holder != "" {
		h = " (" + e.Holder + ")"
	}
	return fmt.Sprintf("another JournalStorage%s is the writer of this journal's lifecycle records: %s is locked; a journal tenant has exactly one", h, e.Lock)
}

// Unwrap returns ErrLocked.
func (e *LockedError) Unwrap() error { return ErrLocked }

// fileJournal is a journal kept in one local file (store/sqlite.Store):
// the one-writer lock is taken beside it.
type fileJournal interface {
	File(ctx context.Context) (string, error)
}

// journalWrapper is a journal that decorates another (fault injection,
// metrics); the lock is found on the journal it wraps. store/sealed's
// Journal names the method Inner.
type journalWrapper interface {
	Unwrap() store.Journal
}

type innerJournal interface {
	Inner() store.Journal
}

// inner returns the journal j decorates, or nil.
func inner(j Journal) Journal {
	switch w := j.(type) {
	case journalWrapper:
		return w.Unwrap()
	case innerJournal:
		return w.Inner()
	}
	return nil
}

// lockPath returns the one-writer lock file of j's tenant: beside the
// database file, named for the tenant, since a tenant's studies are its
// own. ok is false when j neither is nor wraps a file journal.
func lockPath(ctx context.Context, j Journal) (path string, ok bool, err error) {
	for range 16 {
		if f, isFile := j.(fileJournal); isFile {
			file, err := f.File(ctx)
			if err != nil || file == "" {
				return "", err == nil, err
			}
			return file + ".lifecycle-" + j.Tenant() + ".lock", true, nil
		}
		if j = inner(j); j == nil {
			return "", false, nil
		}
	}
	return "", false, nil
}

// takeWriterLock takes the one-writer lock of j's tenant (section 14.2 of
// spec/lifecycle.md). The lock is an OS file lock, so the kernel drops it
// when the holder dies and a restarted process takes it at once. It
// returns a nil closer for a journal with no file (an in-memory database).
func takeWriterLock(ctx context.Context, op string, j Journal) (io.Closer, error) {
	path, ok, err := lockPath(ctx, j)
	if err != nil {
		return nil, lifecycle.StorageError(op, err)
	}
	if !ok {
		return nil, lifecycle.NewError(lifecycle.KindUnsupported, op, "JournalStorage cannot take the one-writer lock of this journal: it is not a local file journal (a File(ctx) method) nor does it wrap one (an Unwrap() or Inner() store.Journal method)")
	}
	if path == "" {
		return nil, nil
	}
	l, err := lockFile(path)
	var le *LockedError
	if errors.As(err, &le) {
		return nil, &lifecycle.Error{Kind: lifecycle.KindConflict, Op: op, Err: le}
	}
	if err != nil {
		return nil, lifecycle.StorageError(op, fmt.Errorf("lock %s: %w", path, err))
	}
	return l, nil
}
