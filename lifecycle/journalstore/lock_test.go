package journalstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runseal/runseal/internal/pgtest"
	"github.com/runseal/runseal/keyring"
	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/journalstore"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sealed"
	"github.com/runseal/runseal/store/sqlite"
)

// lockChildEnv makes the test binary a child process of
// TestJournalStorage_SecondProcessRefused: "hold PATH" or "try PATH".
const lockChildEnv = "RUNSEAL_LIFECYCLE_LOCK_CHILD"

func TestMain(m *testing.M) {
	if arg := os.Getenv(lockChildEnv); arg != "" {
		os.Exit(lockChild(arg))
	}
	if cfg := os.Getenv(workerEnv); cfg != "" {
		os.Exit(worker(cfg))
	}
	pgtest.Main(m)
}

// lockChild is the second process: it opens the journal and a
// JournalStorage on it. "hold" says "holding" and keeps it until stdin
// closes or it is killed; "try" prints "refused: ERR" or "acquired".
func lockChild(arg string) int {
	mode, path, _ := strings.Cut(arg, " ")
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		fmt.Println("open:", err)
		return 2
	}
	defer st.Close()
	s, err := journalstore.New(st)
	switch {
	case errors.Is(err, journalstore.ErrLocked):
		fmt.Println("refused:", err)
		return 0
	case err != nil:
		fmt.Println("error:", err)
		return 2
	}
	defer s.Close()
	if mode == "hold" {
		fmt.Println("holding")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		return 0
	}
	fmt.Println("acquired")
	return 0
}

func lockChildCmd(t *testing.T, mode, path string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lockChildEnv+"="+mode+" "+path)
	cmd.Stderr = os.Stderr
	return cmd
}

// TestJournalStorage_SecondWriterRefused is the attack of issue 11 item 5:
// two JournalStorages on one SQLite file, where the second's claim of a
// trial the first had claimed landed although it was told it failed, and
// every later load of the study refused it. The second is now refused
// before it reads or writes anything, with an error naming the lock; the
// study stays whole; a second tenant of the same file has its own lock;
// and once the first closes, a successor takes over.
func TestJournalStorage_SecondWriterRefused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	stA, stB := openJournal(t, path), openJournal(t, path)
	t.Cleanup(func() { stA.Close(); stB.Close() })
	a := &studyEnv{t: t, ctx: ctx, s: newJournalStorage(t, stA)}
	var err error
	a.study, err = a.s.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1})
	a.must(err, "create study")
	tr := a.reserve("")
	tok := a.claim(tr, "A")

	for _, j := range []*sqlite.Store{stA, stB} {
		b, err := journalstore.New(j)
		if err == nil {
			b.Close()
			t.Fatal("a second JournalStorage on the journal was accepted")
		}
		var le *journalstore.LockedError
		if !errors.Is(err, journalstore.ErrLocked) || !errors.Is(err, lifecycle.ErrConflict) || !errors.As(err, &le) {
			t.Fatalf("the refusal is not ErrLocked, ErrConflict and a *LockedError: %v", err)
		}
		if le.Lock != path+".lifecycle-default.lock" || le.Holder != fmt.Sprintf("pid %d", os.Getpid()) {
			t.Fatalf("the refusal names lock %q held by %q", le.Lock, le.Holder)
		}
		if !strings.Contains(err.Error(), le.Lock) {
			t.Fatalf("the message does not name the lock: %v", err)
		}
	}

	// Another tenant of the same file is another set of studies.
	other, err := sqlite.Open(ctx, path, sqlite.Options{Tenant: "other"})
	a.must(err, "open tenant other")
	t.Cleanup(func() { other.Close() })
	so, err := journalstore.New(other)
	a.must(err, "a JournalStorage for another tenant of the file")
	a.must(so.Close(), "close it")

	// The first writer carries on, and the study loads whole.
	a.must(a.s.Terminal(ctx, lifecycle.TerminalRequest{Owner: tok, State: lifecycle.TrialComplete, Values: []float64{1}}), "terminal")
	if _, err := journalstore.ReadStudyView(ctx, stB, a.study); err != nil {
		t.Fatalf("the study does not read back: %v", err)
	}

	// Closed, the first hands over; the closed one refuses work.
	a.must(a.s.Close(), "close")
	if _, err := a.s.InspectStudy(ctx, a.study); lifecycle.KindOf(err) != lifecycle.KindStorage || !errors.Is(err, journalstore.ErrClosed) {
		t.Fatalf("a closed JournalStorage answered %v", err)
	}
	if _, err := a.s.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1}); lifecycle.KindOf(err) != lifecycle.KindStorage {
		t.Fatalf("a closed JournalStorage created a study: %v", err)
	}
	b := &studyEnv{t: t, ctx: ctx, s: newJournalStorage(t, stB), study: a.study}
	defer b.s.Close()
	b.claim(b.reserve(""), "B")
	verifyStudy(t, ctx, b.s, stB, b.study)
}

// TestJournalStorage_SecondProcessRefused runs the second writer in
// another OS process: while this process holds the journal it is refused;
// when the holder is another process, this one is refused, and once that
// process is killed (SIGKILL: no Close) the kernel has dropped its lock
// and this process takes over the study.
func TestJournalStorage_SecondProcessRefused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	st := openJournal(t, path)
	t.Cleanup(func() { st.Close() })
	e := &studyEnv{t: t, ctx: ctx, s: newJournalStorage(t, st)}
	var err error
	e.study, err = e.s.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1})
	e.must(err, "create study")
	e.claim(e.reserve(""), "here")

	out, err := lockChildCmd(t, "try", path).Output()
	if err != nil || !strings.HasPrefix(string(out), "refused: ") || !strings.Contains(string(out), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("the second process was not refused: %q, %v", out, err)
	}
	e.must(e.s.Close(), "close")

	holder := lockChildCmd(t, "hold", path)
	stdin, err := holder.StdinPipe()
	e.must(err, "stdin")
	stdout, err := holder.StdoutPipe()
	e.must(err, "stdout")
	e.must(holder.Start(), "start the holder")
	t.Cleanup(func() { stdin.Close(); holder.Process.Kill(); holder.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "holding\n" {
		t.Fatalf("the holder says %q, %v", line, err)
	}
	_, err = journalstore.New(st)
	var le *journalstore.LockedError
	if !errors.As(err, &le) || le.Holder != fmt.Sprintf("pid %d", holder.Process.Pid) {
		t.Fatalf("a JournalStorage beside another process's: %v", err)
	}
	e.must(holder.Process.Kill(), "kill the holder")
	holder.Wait()

	e.s = newJournalStorage(t, st)
	defer e.s.Close()
	e.claim(e.reserve(""), "after")
	verifyStudy(t, ctx, e.s, st, e.study)
}

// TestJournalStorage_ForeignAppendIsInconsistent appends to a trial run
// behind the storage's back, at the owner's epoch so that the journal's
// fence lets it through, as a second writer would: the study then refuses
// every operation with a storage error that is ErrInconsistent and names
// the first record that does not fold, and a reader sees the same.
func TestJournalStorage_ForeignAppendIsInconsistent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	st := openJournal(t, path)
	t.Cleanup(func() { st.Close() })
	e := &studyEnv{t: t, ctx: ctx, s: newJournalStorage(t, st)}
	var err error
	e.study, err = e.s.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1})
	e.must(err, "create study")
	tok := e.claim(e.reserve(""), "owner")
	c, err := store.ParseCaseID(string(e.study))
	e.must(err, "case")
	run, err := store.ParseRunID(string(tok.Trial))
	e.must(err, "run")
	recs, err := st.Append(ctx, store.Epoch(tok.Epoch), []store.Append{{Run: run, Case: c, Kind: journalstore.RecordTrialHeartbeat, Fields: []byte(`{"heartbeat_seq":7}`)}})
	e.must(err, "the foreign append")

	check := func(what string, err error) {
		t.Helper()
		var ie *journalstore.InconsistentError
		if !errors.Is(err, lifecycle.ErrStorage) || !errors.Is(err, journalstore.ErrInconsistent) || !errors.As(err, &ie) {
			t.Fatalf("%s: %v", what, err)
		}
		if ie.Run != run || ie.Seq != recs[0].Seq {
			t.Fatalf("%s: names run %s seq %d, the foreign record is run %s seq %d", what, ie.Run, ie.Seq, run, recs[0].Seq)
		}
	}
	_, err = e.s.Renew(ctx, lifecycle.RenewRequest{Owner: tok})
	if !errors.Is(err, journalstore.ErrInconsistent) {
		t.Fatalf("a renew over a foreign record: %v", err)
	}
	_, err = e.s.InspectStudy(ctx, e.study)
	check("the study after the foreign append", err)
	_, err = journalstore.ReadStudyView(ctx, st, e.study)
	check("a reader of the study", err)

	// The repair voids the foreign record and everything after it (the
	// owner's renew above landed behind it before the fold refused); it
	// was written at the owner's epoch, so the owner is not fenced out and
	// carries on.
	rep, err := e.s.Repair(ctx, e.study, "a heartbeat appended by hand")
	if err != nil || len(rep.OwnerFailed) > 0 || rep.From != recs[0].Seq || rep.To != recs[0].Seq+1 {
		t.Fatalf("repair: %+v, %v", rep, err)
	}
	o, err := e.s.Renew(ctx, lifecycle.RenewRequest{Owner: tok})
	if err != nil || o.HeartbeatSeq != 1 {
		t.Fatalf("the owner renews after the repair: %+v, %v", o, err)
	}
	e.must(e.s.Terminal(ctx, lifecycle.TerminalRequest{Owner: tok, State: lifecycle.TrialComplete, Values: []float64{1}}), "terminal")
	verifyStudy(t, ctx, e.s, st, e.study)
}

// TestJournalStorage_LockFoundThroughWrapper: a decorated journal
// (store/sealed) takes the lock of the file it wraps, so a second storage
// on the bare file is refused; a journal that is not a file and wraps none
// is refused, since the rule could not be enforced.
func TestJournalStorage_LockFoundThroughWrapper(t *testing.T) {
	dir := t.TempDir()
	st := openJournal(t, filepath.Join(dir, "journal.db"))
	t.Cleanup(func() { st.Close() })
	ring, err := keyring.OpenFile(filepath.Join(dir, "keys"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := journalstore.New(sealed.New(st, ring, sealed.Options{}))
	if err != nil {
		t.Fatalf("a storage on a sealed journal: %v", err)
	}
	defer s.Close()
	if _, err := journalstore.New(st); !errors.Is(err, journalstore.ErrLocked) {
		t.Fatalf("a second storage on the file under the sealed journal: %v", err)
	}
	if _, err := journalstore.New(opaqueJournal{st}); lifecycle.KindOf(err) != lifecycle.KindUnsupported {
		t.Fatalf("a journal whose file cannot be found: %v", err)
	}
}

// opaqueJournal hides the journal it embeds: no File, no Unwrap.
type opaqueJournal struct{ store.Journal }
