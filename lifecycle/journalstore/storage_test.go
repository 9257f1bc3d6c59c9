package journalstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/journalstore"
	"github.com/runseal/runseal/lifecycle/lifecycletest"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sqlite"
)

// journalBackend is a JournalStorage on its own SQLite file. Closing it
// first checks that the view the storage kept is the view the journal
// holds, and reports a difference to check.
type journalBackend struct {
	*journalstore.Storage
	store *sqlite.Store
	check func(error)
}

func (b journalBackend) Close() error {
	if b.check != nil {
		b.check(checkRebuild(context.Background(), b.Storage, b.store))
	}
	return errors.Join(b.Storage.Close(), b.store.Close())
}

// snapshot is everything a JournalStorage shows of a journal's studies.
func snapshot(ctx context.Context, s *journalstore.Storage) ([]byte, error) {
	var snap struct {
		Views  []journalstore.StudyView
		Study  []lifecycle.Study
		Trials []lifecycle.Trial
		Outbox []lifecycle.OutboxRecord
	}
	ids, err := s.Studies(ctx)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		v, err := s.StudyView(ctx, id)
		if err != nil {
			return nil, err
		}
		st, err := s.InspectStudy(ctx, id)
		if err != nil {
			return nil, err
		}
		snap.Views, snap.Study = append(snap.Views, v), append(snap.Study, st)
		for _, tv := range v.Trials {
			tr, err := s.InspectTrial(ctx, tv.Trial)
			if err != nil {
				return nil, err
			}
			snap.Trials = append(snap.Trials, tr)
		}
	}
	if snap.Outbox, err = s.ListOutbox(ctx); err != nil {
		return nil, err
	}
	return json.Marshal(snap)
}

// checkRebuild checks that what s shows equals what the journal shows to a
// reader (ReadStudyView) and to a new JournalStorage that rebuilds every
// study from the records, that nothing is pending, and that every terminal
// managed trial is sealed. It closes s first, as a restart would: one
// JournalStorage at a time holds the journal.
func checkRebuild(ctx context.Context, s *journalstore.Storage, j store.Journal) error {
	live, err := snapshot(ctx, s)
	if err != nil {
		return fmt.Errorf("snapshot of the live storage: %w", err)
	}
	ids, err := s.Studies(ctx)
	if err != nil {
		return err
	}
	for _, id := range ids {
		want, err := s.StudyView(ctx, id)
		if err != nil {
			return err
		}
		got, err := journalstore.ReadStudyView(ctx, j, id)
		if err != nil {
			return fmt.Errorf("read study view %s: %w", id, err)
		}
		if len(got.Pending) > 0 {
			return fmt.Errorf("study %s: pending after the operations returned: %v", id, got.Pending)
		}
		a, _ := json.Marshal(want)
		b, _ := json.Marshal(got)
		if !bytes.Equal(a, b) {
			return fmt.Errorf("study %s: live view\n %s\nread from the journal\n %s", id, a, b)
		}
		for _, tv := range got.Trials {
			if tv.Managed && tv.State.Terminal() && !tv.Sealed {
				return fmt.Errorf("study %s: terminal trial %s is not sealed", id, tv.Trial)
			}
		}
	}
	if err := s.Close(); err != nil {
		return err
	}
	again, err := journalstore.New(j)
	if err != nil {
		return err
	}
	defer again.Close()
	rebuilt, err := snapshot(ctx, again)
	if err != nil {
		return fmt.Errorf("snapshot of a rebuilt storage: %w", err)
	}
	if !bytes.Equal(live, rebuilt) {
		return fmt.Errorf("live storage\n %s\nrebuilt from the journal\n %s", live, rebuilt)
	}
	return nil
}

// fataler is what the helpers below need of a *testing.T or *rapid.T.
type fataler interface {
	Fatalf(format string, args ...any)
}

// openJournal opens (creating) the SQLite journal at path.
func openJournal(tb fataler, path string) *sqlite.Store {
	st, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		tb.Fatalf("open journal: %v", err)
	}
	return st
}

func newJournalStorage(tb fataler, j store.Journal) *journalstore.Storage {
	s, err := journalstore.New(j)
	if err != nil {
		tb.Fatalf("new journal storage: %v", err)
	}
	return s
}

// journalFactory returns a factory of fresh journal backends, each on a new
// file under dir.
func journalFactory(dir string, check func(error)) lifecycletest.Factory {
	var n atomic.Int64
	return func() (lifecycletest.Backend, error) {
		path := filepath.Join(dir, fmt.Sprintf("journal-%d.db", n.Add(1)))
		st, err := sqlite.Open(context.Background(), path, sqlite.Options{})
		if err != nil {
			return nil, err
		}
		s, err := journalstore.New(st)
		if err != nil {
			st.Close()
			return nil, err
		}
		return journalBackend{Storage: s, store: st, check: check}, nil
	}
}

func TestJournalStorageConformance(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var rebuildErrs []error
	lifecycletest.Run(t, journalFactory(t.TempDir(), func(err error) {
		if err != nil {
			mu.Lock()
			rebuildErrs = append(rebuildErrs, err)
			mu.Unlock()
		}
	}))
	for _, err := range rebuildErrs {
		t.Errorf("after a conformance check: %v", err)
	}
}

// TestJournalStorageMatchesModel runs the model's random sequences against
// JournalStorage, restarting it (closing and reopening the file, and
// rebuilding every view) at random points.
func TestJournalStorageMatchesModel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var n atomic.Int64
	lifecycletest.RunModel(t, func(rt *rapid.T) (lifecycletest.Backend, func() lifecycletest.Backend) {
		path := filepath.Join(dir, fmt.Sprintf("model-%d.db", n.Add(1)))
		st := openJournal(rt, path)
		s := newJournalStorage(rt, st)
		rt.Cleanup(func() { s.Close(); st.Close() })
		restart := func() lifecycletest.Backend {
			if err := errors.Join(s.Close(), st.Close()); err != nil {
				rt.Fatalf("close: %v", err)
			}
			st = openJournal(rt, path)
			s = newJournalStorage(rt, st)
			return journalBackend{Storage: s, store: st}
		}
		return journalBackend{Storage: s, store: st}, restart
	})
}
