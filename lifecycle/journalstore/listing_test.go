package journalstore_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/runseal/runseal/internal/pgtest"
	"github.com/runseal/runseal/keyring"
	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/journalstore"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/postgres"
	"github.com/runseal/runseal/store/sealed"
	"github.com/runseal/runseal/store/sqlite"
)

// countingJournal is a SQLite journal that counts what is read of it: the
// records (Read, ReadPage, CaseRuns, LogPositions calls) and the derived
// rows.
type countingJournal struct {
	*sqlite.Store
	reads, rows atomic.Int64
}

func (c *countingJournal) Read(ctx context.Context, run store.RunID, from store.Seq) ([]store.Record, error) {
	c.reads.Add(1)
	return c.Store.Read(ctx, run, from)
}

func (c *countingJournal) ReadPage(ctx context.Context, run store.RunID, from store.Seq, limit int) ([]store.Record, error) {
	c.reads.Add(1)
	return c.Store.ReadPage(ctx, run, from, limit)
}

func (c *countingJournal) CaseRuns(ctx context.Context, cs store.CaseID, after *store.RunID, limit int) ([]store.RunID, error) {
	c.reads.Add(1)
	return c.Store.CaseRuns(ctx, cs, after, limit)
}

func (c *countingJournal) LogPositions(ctx context.Context, runs []store.RunID) ([]*store.Position, error) {
	c.reads.Add(1)
	return c.Store.LogPositions(ctx, runs)
}

func (c *countingJournal) ReadDerived(ctx context.Context, scope string, after, upto int64, limit int, each func(pos, at int64, body []byte) error) error {
	return c.Store.ReadDerived(ctx, scope, after, upto, limit, func(pos, at int64, body []byte) error {
		c.rows.Add(1)
		return each(pos, at, body)
	})
}

func studyRun(t testing.TB, study lifecycle.StudyID) store.RunID {
	t.Helper()
	c, err := store.ParseCaseID(string(study))
	if err != nil {
		t.Fatal(err)
	}
	return store.RunID(c)
}

// checkRowsAtHead fails unless the study's derived rows reflect exactly
// its study run's head, read straight from the journal with no storage
// operation in between: a record without its rows, or rows without their
// record, shows here.
func checkRowsAtHead(t testing.TB, ctx context.Context, j journalstore.Journal, study lifecycle.StudyID) {
	t.Helper()
	at, ok, err := journalstore.ListingAt(ctx, j, study)
	if err != nil {
		t.Fatal(err)
	}
	h, err := j.Head(ctx, studyRun(t, study))
	if err != nil {
		t.Fatal(err)
	}
	if !ok || at != h.Seq {
		t.Fatalf("the study's rows reflect study run seq %d (present %t); the study run's head is seq %d", at, ok, h.Seq)
	}
}

// pageThrough reads a study's whole outbox a page of size records at a
// time, checking that every page of the traversal keeps the first page's
// horizon and continues where the last ended.
func pageThrough(t testing.TB, ctx context.Context, s lifecycle.Storage, study lifecycle.StudyID, size uint64) []lifecycle.OutboxRecord {
	t.Helper()
	req := lifecycle.OutboxPageRequest{Study: study, MaxRecords: size, MaxBytes: math.MaxInt}
	var out []lifecycle.OutboxRecord
	horizon := uint64(0)
	for {
		page, err := s.ListOutboxPage(ctx, req)
		if err != nil {
			t.Fatalf("page after %d records: %v", len(out), err)
		}
		for _, r := range page.Records {
			if r.TerminalSeq != uint64(len(out))+1 {
				t.Fatalf("record %v at terminal sequence %d after %d records", r.Key, r.TerminalSeq, len(out))
			}
			out = append(out, r)
		}
		if page.Next == nil {
			if horizon != 0 && uint64(len(out)) != horizon {
				t.Fatalf("the traversal ended after %d records; its horizon is %d", len(out), horizon)
			}
			return out
		}
		if horizon != 0 && page.Next.Horizon != horizon {
			t.Fatalf("the horizon moved from %d to %d during a traversal", horizon, page.Next.Horizon)
		}
		horizon = page.Next.Horizon
		req.Cursor = page.Next
	}
}

// checkListing fails unless the paged listing is exactly the study's
// outbox as the storage's view (the fold of the journal) holds it.
func checkListing(t testing.TB, ctx context.Context, s *journalstore.Storage, j store.Journal, study lifecycle.StudyID) {
	t.Helper()
	v, err := journalstore.ReadStudyView(ctx, j, study)
	if err != nil {
		t.Fatal(err)
	}
	got := pageThrough(t, ctx, s, study, 2)
	if len(got) != len(v.Outbox) {
		t.Fatalf("the listing has %d outbox records; the journal %d", len(got), len(v.Outbox))
	}
	for i, o := range v.Outbox {
		want, ok, err := s.GetOutbox(ctx, o.Key)
		if err != nil || !ok {
			t.Fatalf("get outbox %v: %t %v", o.Key, ok, err)
		}
		a, _ := json.Marshal(got[i])
		b, _ := json.Marshal(want)
		if !bytes.Equal(a, b) {
			t.Fatalf("listed record %d is\n%s\nthe fold holds\n%s", i+1, a, b)
		}
	}
}

// terminalWithIntent makes one trial and ends it with an outbox intent.
func terminalWithIntent(t testing.TB, ctx context.Context, s lifecycle.Storage, study lifecycle.StudyID) lifecycle.OutboxKey {
	t.Helper()
	out, err := s.ReserveAndCreateIfBudget(ctx, lifecycle.ReserveAndCreateRequest{Study: study, MaxTrials: 1 << 20})
	must(t, err)
	tok, err := s.Claim(ctx, lifecycle.ClaimRequest{Trial: out.Trial, Owner: "owner"})
	must(t, err)
	key, err := s.TerminalWithIntent(ctx, lifecycle.TerminalRequest{Owner: tok, State: lifecycle.TrialComplete, Values: []float64{1}}, mpIntent)
	must(t, err)
	return key
}

// TestListOutboxPage_DoesNotMaterializeTheStudy: in a process that has not
// loaded the study, a page of its outbox reads no journal record and only
// the rows of the page (the summary row, the cursor's row and one past
// the page), however many records the study has; loading the study, which
// the listing used to do, reads every run.
func TestListOutboxPage_DoesNotMaterializeTheStudy(t *testing.T) {
	ctx := context.Background()
	st := openJournal(t, filepath.Join(t.TempDir(), "journal.db"))
	t.Cleanup(func() { st.Close() })
	s := newJournalStorage(t, st)
	study, err := s.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1})
	must(t, err)
	const n = 60
	for range n {
		terminalWithIntent(t, ctx, s, study)
	}
	must(t, s.Close())

	cj := &countingJournal{Store: st}
	s2 := newJournalStorage(t, cj)
	defer s2.Close()
	req := lifecycle.OutboxPageRequest{Study: study, MaxRecords: 10, MaxBytes: math.MaxInt}
	for page := 1; page <= 3; page++ {
		cj.reads.Store(0)
		cj.rows.Store(0)
		p, err := s2.ListOutboxPage(ctx, req)
		must(t, err)
		if len(p.Records) != 10 || p.Records[0].TerminalSeq != uint64(10*(page-1)+1) || p.Next == nil || p.Next.Horizon != n {
			t.Fatalf("page %d: %d records from %d, next %+v", page, len(p.Records), p.Records[0].TerminalSeq, p.Next)
		}
		if r := cj.reads.Load(); r != 0 {
			t.Fatalf("page %d read the journal %d times", page, r)
		}
		if r := cj.rows.Load(); r > 12 {
			t.Fatalf("page %d of 10 records read %d rows", page, r)
		}
		req.Cursor = p.Next
	}
	cj.reads.Store(0)
	if _, err := s2.InspectStudy(ctx, study); err != nil {
		t.Fatal(err)
	}
	if r := cj.reads.Load(); r < n+1 {
		t.Fatalf("loading the study read the journal %d times; it has %d runs", r, n+1)
	}
}

// TestListOutboxPage_CursorStableWhileWriting pages through a study's
// outbox again and again while another storage ends trials with intents
// and advances records: every traversal keeps the horizon its first page
// fixed, sees each position from 1 to it exactly once and in order, and
// never sees a record past it; the last traversal is the whole outbox.
func TestListOutboxPage_CursorStableWhileWriting(t *testing.T) {
	ctx := context.Background()
	t.Run("sqlite", func(t *testing.T) {
		st := openJournal(t, filepath.Join(t.TempDir(), "journal.db"))
		t.Cleanup(func() { st.Close() })
		s := newJournalStorage(t, st)
		defer s.Close()
		cursorStableWhileWriting(t, ctx, s, s, st)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		tenant := "list-" + string(bytes.ToLower([]byte(store.NewRunID().String())))
		open := func() *journalstore.Storage {
			pg, err := postgres.Open(ctx, dsn, postgres.Options{Tenant: tenant})
			must(t, err)
			t.Cleanup(func() { pg.Close() })
			s := newJournalStorage(t, pg)
			t.Cleanup(func() { s.Close() })
			return s
		}
		w, r := open(), open()
		pg, err := postgres.Open(ctx, dsn, postgres.Options{Tenant: tenant})
		must(t, err)
		defer pg.Close()
		cursorStableWhileWriting(t, ctx, w, r, pg)
	})
}

func cursorStableWhileWriting(t *testing.T, ctx context.Context, w, r *journalstore.Storage, j store.Journal) {
	study, err := w.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1})
	must(t, err)
	var keys []lifecycle.OutboxKey
	for range 4 {
		keys = append(keys, terminalWithIntent(t, ctx, w, study))
	}
	const more = 12
	done := make(chan struct{})
	var werr error
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(done)
		for i := range more {
			terminalWithIntent(t, ctx, w, study)
			if _, err := w.AdvanceOutbox(ctx, lifecycle.OutboxAdvanceRequest{Key: keys[i%len(keys)], Phase: lifecycle.PhaseCallbacks}); err != nil {
				werr = err
				return
			}
		}
	})
	last := uint64(0)
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		recs := pageThrough(t, ctx, r, study, 3)
		if uint64(len(recs)) < last {
			t.Fatalf("a traversal saw %d records after one saw %d", len(recs), last)
		}
		last = uint64(len(recs))
		seen := map[lifecycle.OutboxKey]bool{}
		for _, rec := range recs {
			if seen[rec.Key] {
				t.Fatalf("record %v listed twice in one traversal", rec.Key)
			}
			seen[rec.Key] = true
		}
	}
	wg.Wait()
	must(t, werr)
	if got := pageThrough(t, ctx, r, study, 3); len(got) != len(keys)+more {
		t.Fatalf("the last traversal has %d records, want %d", len(got), len(keys)+more)
	}
	checkListing(t, ctx, w, j, study)
	checkRowsAtHead(t, ctx, j, study)
}

// TestListOutboxPage_BackfillsAStudyWrittenBeforeDerivedRows opens a
// journal file the code before derived rows wrote (schema 3: a study of 7
// trials, 5 outbox records in every phase, an effect completed, a
// replacement pending): the store migrates, the first listing rebuilds
// the study's rows from the fold, and they are then the fold exactly;
// a later storage reads them without touching the journal, and the
// study's next transition moves them.
func TestListOutboxPage_BackfillsAStudyWrittenBeforeDerivedRows(t *testing.T) {
	ctx := context.Background()
	raw, err := os.ReadFile(filepath.Join("testdata", "schema3-study.db"))
	must(t, err)
	path := filepath.Join(t.TempDir(), "journal.db")
	must(t, os.WriteFile(path, raw, 0o600))
	st := openJournal(t, path)
	t.Cleanup(func() { st.Close() })
	cj := &countingJournal{Store: st}
	s := newJournalStorage(t, cj)
	ids, err := s.Studies(ctx)
	must(t, err)
	if len(ids) != 1 {
		t.Fatalf("studies %v", ids)
	}
	study := ids[0]
	if _, ok, err := journalstore.ListingAt(ctx, cj, study); err != nil || ok {
		t.Fatalf("the old study has rows before its first listing: %t %v", ok, err)
	}
	recs := pageThrough(t, ctx, s, study, 2)
	var phases []lifecycle.OutboxPhase
	for _, r := range recs {
		phases = append(phases, r.Phase)
	}
	want := []lifecycle.OutboxPhase{lifecycle.PhaseDone, lifecycle.PhaseEffects, lifecycle.PhaseCallbacks, lifecycle.PhaseInitial, lifecycle.PhaseInitial}
	if len(phases) != len(want) {
		t.Fatalf("phases %v, want %v", phases, want)
	}
	for i := range want {
		if phases[i] != want[i] {
			t.Fatalf("phases %v, want %v", phases, want)
		}
	}
	if len(recs[1].Completed) != 1 || recs[1].Completed[0].Name != "notify" {
		t.Fatalf("record 2's completions: %+v", recs[1].Completed)
	}
	checkListing(t, ctx, s, cj, study)
	checkRowsAtHead(t, ctx, cj, study)
	must(t, s.Close())

	s2 := newJournalStorage(t, cj)
	defer s2.Close()
	cj.reads.Store(0)
	if got := pageThrough(t, ctx, s2, study, 2); len(got) != len(recs) {
		t.Fatalf("the second storage lists %d records", len(got))
	}
	if r := cj.reads.Load(); r != 0 {
		t.Fatalf("listing the backfilled study read the journal %d times", r)
	}
	out, err := s2.CreateReplacement(ctx, lifecycle.OutboxEffectKey{Outbox: recs[1].Key, Name: "retry"})
	must(t, err)
	if out.Status != lifecycle.ReplacementCreated {
		t.Fatalf("replacement %+v", out)
	}
	checkRowsAtHead(t, ctx, cj, study)
	checkListing(t, ctx, s2, cj, study)
	if got := pageThrough(t, ctx, s2, study, 5); len(got[1].Completed) != 2 {
		t.Fatalf("record 2's completions after the replacement: %+v", got[1].Completed)
	}
}

// TestJournalStorage_SealingStoreRebase: on a sealing journal (store/sealed)
// the store writes other bytes than the record the view folded before the
// write, so another hash; the view takes the written record's hash, the
// mirrors owed to it name that hash, and a storage that loads the study
// afresh folds it (a mirror naming the folded record's hash would not).
func TestJournalStorage_SealingStoreRebase(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st := openJournal(t, filepath.Join(dir, "journal.db"))
	t.Cleanup(func() { st.Close() })
	ring, err := keyring.OpenFile(filepath.Join(dir, "keys"))
	must(t, err)
	j := sealed.New(st, ring, sealed.Options{})
	s := newJournalStorage(t, j)
	study, err := s.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1})
	must(t, err)
	key := terminalWithIntent(t, ctx, s, study)
	_, err = s.AdvanceOutbox(ctx, lifecycle.OutboxAdvanceRequest{Key: key, Phase: lifecycle.PhaseCallbacks})
	must(t, err)
	terminalWithIntent(t, ctx, s, study)
	checkRowsAtHead(t, ctx, j, study)
	checkListing(t, ctx, s, j, study)
	v, err := journalstore.ReadStudyView(ctx, j, study)
	must(t, err)
	if len(v.Pending) > 0 || len(v.Trials) != 2 || !v.Trials[0].Sealed {
		t.Fatalf("the study after its writes: pending %v, trials %+v", v.Pending, v.Trials)
	}
	must(t, s.Close())
	s2 := newJournalStorage(t, j)
	defer s2.Close()
	if _, err := s2.InspectStudy(ctx, study); err != nil {
		t.Fatalf("a fresh storage loads the study: %v", err)
	}
	terminalWithIntent(t, ctx, s2, study)
	checkListing(t, ctx, s2, j, study)
}

// TestListOutboxPage_RowsBehindAreRebuilt: a study whose rows fell behind
// its journal while a storage had it loaded (a writer without derived
// rows; here the rows are deleted by hand) is listed from rows rebuilt
// from the fold, not from the stale rows.
func TestListOutboxPage_RowsBehindAreRebuilt(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	st := openJournal(t, path)
	t.Cleanup(func() { st.Close() })
	s := newJournalStorage(t, st)
	defer s.Close()
	study, err := s.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1})
	must(t, err)
	for range 3 {
		terminalWithIntent(t, ctx, s, study)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	must(t, err)
	defer db.Close()
	if _, err := db.ExecContext(ctx, `DELETE FROM derived_rows WHERE scope LIKE '%/'||? AND pos > 1`, string(study)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE derived_rows SET at = 3 WHERE pos = 0`); err != nil {
		t.Fatal(err)
	}
	if got := pageThrough(t, ctx, s, study, 2); len(got) != 3 {
		t.Fatalf("listed %d records after the rows fell behind", len(got))
	}
	checkRowsAtHead(t, ctx, st, study)
	checkListing(t, ctx, s, st, study)
}
