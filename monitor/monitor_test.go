package monitor

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/disclosure"
	"github.com/runseal/runseal/internal/journaltest"
	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

const origin = "example.com/monitor-test"

// tree is one RFC 6962 tree of a test log.
type tree struct {
	nodes log.MemStore
	size  uint64
}

func (tr *tree) grow(t testing.TB, n int, salt string) {
	t.Helper()
	for range n {
		leaf := log.Hash(sha256.Sum256(fmt.Appendf(nil, "%s-%d", salt, tr.size)))
		if _, err := log.Append(context.Background(), &tr.nodes, tr.size, leaf); err != nil {
			t.Fatal(err)
		}
		tr.size++
	}
}

// fakeLog serves signed checkpoints of its current tree, and proofs from
// it; badProof makes it send a wrong proof for honest checkpoints.
type fakeLog struct {
	t      testing.TB
	signer note.Signer

	mu       sync.Mutex
	cur      *tree
	signed   map[uint64][]byte // what the log signed at each size, per the current tree
	badProof bool
	fetchErr error
}

func newFakeLog(t testing.TB) (*fakeLog, disclosure.Options) {
	t.Helper()
	l := journaltest.NewLog(t, origin)
	return &fakeLog{t: t, signer: l.Signer, cur: &tree{}, signed: map[uint64][]byte{}}, disclosure.Options{Policy: journaltest.Policy(t, l)}
}

// use makes tr the log's tree and signs its checkpoint.
func (l *fakeLog) use(tr *tree) {
	l.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur != tr {
		l.signed = map[uint64][]byte{}
	}
	l.cur = tr
	root, err := log.Root(context.Background(), &tr.nodes, tr.size)
	if err != nil {
		l.t.Fatal(err)
	}
	n, err := checkpoint.Sign(checkpoint.Checkpoint{Origin: origin, Size: tr.size, Root: root}, l.signer)
	if err != nil {
		l.t.Fatal(err)
	}
	l.signed[tr.size] = n
}

func (l *fakeLog) Witnessed(ctx context.Context) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fetchErr != nil {
		return nil, l.fetchErr
	}
	return l.signed[l.cur.size], nil
}

func (l *fakeLog) Consistency(ctx context.Context, oldSize, newSize uint64) ([]store.Digest, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	hs, err := log.ConsistencyProof(ctx, &l.cur.nodes, oldSize, newSize)
	if err != nil {
		return nil, err
	}
	out := make([]store.Digest, len(hs))
	for i, h := range hs {
		out[i] = store.Digest(h)
	}
	if l.badProof && len(out) > 0 {
		out[0][0] ^= 1
	}
	return out, nil
}

func (l *fakeLog) CheckpointAt(ctx context.Context, size uint64) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n, ok := l.signed[size]; ok {
		return n, nil
	}
	return nil, fmt.Errorf("no checkpoint at %d", size)
}

func (l *fakeLog) Base() string { return "fake://log" }

func openFollower(t *testing.T, l *fakeLog, opts disclosure.Options, dir string) *Follower {
	t.Helper()
	m, err := Open(Config{Source: l, Trust: opts, LogKeys: []string{"k"}, Policy: "quorum none\n", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func wantOutcome(t *testing.T, res Result, o Outcome, size uint64) {
	t.Helper()
	if res.Outcome != o || res.Size != size {
		t.Fatalf("got %s at size %d (%s), want %s at size %d", res.Outcome, res.Size, res.Message, o, size)
	}
}

// TestFollower_GrowsAndRefusesRollback follows a log that grows, then
// serves an older checkpoint it genuinely signed: refused, state kept.
func TestFollower_GrowsAndRefusesRollback(t *testing.T) {
	ctx := context.Background()
	l, opts := newFakeLog(t)
	tr := &tree{}
	tr.grow(t, 3, "a")
	l.use(tr)
	m := openFollower(t, l, opts, t.TempDir())
	wantOutcome(t, m.Check(ctx), Started, 3)
	wantOutcome(t, m.Check(ctx), Unchanged, 3)
	tr.grow(t, 5, "a")
	l.use(tr)
	wantOutcome(t, m.Check(ctx), Advanced, 8)

	old := &tree{}
	old.grow(t, 3, "a")
	l.use(old)
	wantOutcome(t, m.Check(ctx), Rollback, 8)
	l.use(tr)
	wantOutcome(t, m.Check(ctx), Unchanged, 8)
}

// TestFollower_ForkSameSize: two signed checkpoints of one size with
// different roots are a fork, with evidence anyone can check.
func TestFollower_ForkSameSize(t *testing.T) {
	ctx := context.Background()
	l, opts := newFakeLog(t)
	a := &tree{}
	a.grow(t, 4, "a")
	l.use(a)
	dir := t.TempDir()
	m := openFollower(t, l, opts, dir)
	wantOutcome(t, m.Check(ctx), Started, 4)
	b := &tree{}
	b.grow(t, 4, "b")
	l.use(b)
	res := m.Check(ctx)
	wantOutcome(t, res, Fork, 4)
	if res.Outcome.Class() != Forked || res.Evidence == "" {
		t.Fatalf("fork without evidence: %+v", res)
	}
	raw, err := os.ReadFile(res.Evidence)
	if err != nil {
		t.Fatal(err)
	}
	var ev Evidence
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Kind != EvidenceKind || ev.Saved.Root == ev.Served.Root || ev.Saved.Size != 4 || ev.Served.Size != 4 || ev.Proof != nil || ev.URL != "fake://log" {
		t.Fatalf("evidence: %+v", ev)
	}
	// Both notes in the evidence verify with the log's key alone.
	for _, n := range []string{ev.Saved.Note, ev.Served.Note} {
		if nc := disclosure.CheckNote([]byte(n), opts); nc.Verdict() != disclosure.Sound {
			t.Fatalf("evidence note does not verify: %v %v", nc.Findings, nc.Unverifiable)
		}
	}
	// The state still holds the first checkpoint.
	st, err := m.loadState()
	if err != nil {
		t.Fatal(err)
	}
	if root, _ := log.Root(ctx, &a.nodes, 4); st.check.Checkpoint.Root != root {
		t.Fatal("the fork replaced the saved checkpoint")
	}
}

// TestFollower_ForkByProof: a larger checkpoint whose tree does not extend
// the saved one is a fork, shown by the proof alone; Run stops with a
// *ForkError.
func TestFollower_ForkByProof(t *testing.T) {
	ctx := context.Background()
	l, opts := newFakeLog(t)
	a := &tree{}
	a.grow(t, 5, "a")
	l.use(a)
	m := openFollower(t, l, opts, t.TempDir())
	wantOutcome(t, m.Check(ctx), Started, 5)
	b := &tree{}
	b.grow(t, 9, "b")
	l.use(b)
	var seen []Outcome
	err := m.Run(ctx, 1, func(r Result) { seen = append(seen, r.Outcome) })
	var fe *ForkError
	if !errors.As(err, &fe) || !errors.Is(err, ErrFork) || fe.Result.Evidence == "" {
		t.Fatalf("Run: %v", err)
	}
	if len(seen) != 1 || seen[0] != Fork {
		t.Fatalf("reported %v", seen)
	}
}

// TestFollower_BadProofIsNotAFork: a server that sends a wrong proof while
// the log still signs the saved checkpoint gets no verdict, and the state
// is kept for the next check.
func TestFollower_BadProofIsNotAFork(t *testing.T) {
	ctx := context.Background()
	l, opts := newFakeLog(t)
	a := &tree{}
	a.grow(t, 5, "a")
	l.use(a)
	m := openFollower(t, l, opts, t.TempDir())
	wantOutcome(t, m.Check(ctx), Started, 5)
	a.grow(t, 6, "a")
	l.use(a)
	l.badProof = true
	res := m.Check(ctx)
	wantOutcome(t, res, BadProof, 5)
	if res.Outcome.Class() != NoVerdict {
		t.Fatalf("class %v", res.Outcome.Class())
	}
	l.badProof = false
	wantOutcome(t, m.Check(ctx), Advanced, 11)
}

// TestFollower_TamperedState: a state file that no longer verifies stops
// the monitor with a *StateError instead of misleading it.
func TestFollower_TamperedState(t *testing.T) {
	ctx := context.Background()
	l, opts := newFakeLog(t)
	a := &tree{}
	a.grow(t, 2, "a")
	l.use(a)
	dir := t.TempDir()
	m := openFollower(t, l, opts, dir)
	wantOutcome(t, m.Check(ctx), Started, 2)
	path := filepath.Join(dir, StateFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(origin)+1] = '9' // the size line
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	res := m.Check(ctx)
	var se *StateError
	if res.Outcome != Unverifiable || !errors.Is(res.Err, ErrBadState) || !errors.As(res.Err, &se) || se.Path != path {
		t.Fatalf("tampered state: %+v", res)
	}
}

// TestFollower_NetworkErrorIsNoVerdict: a source that cannot be read gives
// no verdict and carries the cause.
func TestFollower_NetworkErrorIsNoVerdict(t *testing.T) {
	l, opts := newFakeLog(t)
	l.fetchErr = errors.New("connection refused")
	m := openFollower(t, l, opts, t.TempDir())
	res := m.Check(context.Background())
	if res.Outcome != Unverifiable || !errors.Is(res.Err, l.fetchErr) {
		t.Fatalf("%+v", res)
	}
}

// TestOpen_Locked: two followers never share a state directory.
func TestOpen_Locked(t *testing.T) {
	l, opts := newFakeLog(t)
	dir := t.TempDir()
	openFollower(t, l, opts, dir)
	if _, err := Open(Config{Source: l, Trust: opts, Dir: dir}); !errors.Is(err, ErrLocked) {
		if err == nil || lockDirIsNoop {
			t.Skip("no flock on this platform")
		}
		t.Fatalf("second Open: %v", err)
	}
}

// TestTilesSource_OnlyNewest: a tiles layout serves no older checkpoint
// and no proof for a size it did not serve.
func TestTilesSource_OnlyNewest(t *testing.T) {
	s := NewTilesSource("https://user:pw@tiles.example/log/", nil)
	if _, err := s.CheckpointAt(context.Background(), 3); !errors.Is(err, ErrNoOlderCheckpoint) {
		t.Fatalf("CheckpointAt: %v", err)
	}
	if _, err := s.Consistency(context.Background(), 1, 3); !errors.Is(err, ErrNotServed) {
		t.Fatalf("Consistency: %v", err)
	}
	if b := s.Base(); b == "" || strings.Contains(b, "pw") {
		t.Fatalf("Base %q", b)
	}
}
