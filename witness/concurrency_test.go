package witness

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/internal/journaltest"
)

// TestConcurrentForksNeverCosignedTwice has a misbehaving log sign many
// forks and submit them all at once, round after round. Whatever the
// interleaving, one size must never get two roots cosigned, and each round
// exactly one fork may win.
func TestConcurrentForksNeverCosignedTwice(t *testing.T) {
	e := newEnv(t)
	l := journaltest.NewLog(t, "log.example/forky")
	e.addLog(l)
	logV, _ := checkpoint.NewVerifier(l.VKey)
	verifiers := note.VerifierList(logV, e.cosign.Verifier())

	var (
		mu       sync.Mutex
		cosigned = map[uint64][32]byte{} // size → root, from verified 200 answers
	)
	record := func(n, lines []byte) {
		s, err := checkpoint.Open(append(append([]byte(nil), n...), lines...), verifiers)
		if err != nil || len(s.Cosignatures()) != 1 {
			t.Errorf("200 answer does not verify: %v", err)
			return
		}
		cp := s.Checkpoint()
		mu.Lock()
		defer mu.Unlock()
		if r, ok := cosigned[cp.Size]; ok && r != cp.Root {
			t.Errorf("size %d cosigned with two roots %x and %x", cp.Size, r, cp.Root)
		}
		cosigned[cp.Size] = cp.Root
	}

	const rounds, forks = 12, 10
	size := uint64(0)
	for r := range rounds {
		trees := make([]*journaltest.Tree, forks)
		for i := range trees {
			trees[i] = l.Tree.Fork(fmt.Sprintf("r%d-f%d", r, i))
			trees[i].Grow(1 + i%3) // several forks share each size
		}
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			wins  = make([]bool, forks)
			codes = make([]int, 2*forks)
		)
		for i := range 2 * forks { // each fork twice
			tr := trees[i%forks]
			newSize := tr.Size()
			n := l.Note(t, newSize, tr)
			body := request(size, tr.Proof(size, newSize), n)
			wg.Go(func() {
				<-start
				req, _ := ParseAddCheckpointRequest(body)
				lines, err := e.w.AddCheckpoint(context.Background(), req)
				codes[i] = StatusCode(err)
				if err == nil {
					wins[i%forks] = true
					record(n, lines)
				}
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, w := range wins {
			if w {
				if winner >= 0 {
					t.Fatalf("round %d: forks %d and %d both cosigned", r, winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no fork cosigned: %v", r, codes)
		}
		for i, c := range codes {
			if c != 200 && c != 409 {
				t.Errorf("round %d request %d: status %d, want 200 or 409", r, i, c)
			}
		}
		l.Tree = trees[winner]
		size = l.Tree.Size()
	}

	// At a held size: resubmissions of the held root race with another
	// root of that size. The other root must never be cosigned.
	fork := (&journaltest.Tree{}).Fork("same-size") // another root at each size
	fork.Grow(int(size))
	var wg sync.WaitGroup
	for i := range 20 {
		tr := l.Tree
		if i%2 == 1 {
			tr = fork
		}
		n := l.Note(t, size, tr)
		wg.Go(func() {
			req, _ := ParseAddCheckpointRequest(request(size, nil, n))
			lines, err := e.w.AddCheckpoint(context.Background(), req)
			switch {
			case tr == fork && !errors.Is(err, ErrSplitView):
				t.Errorf("other root of the held size: %v, want a split view (422)", err)
			case tr != fork && err != nil:
				t.Errorf("resubmission: %v", err)
			case err == nil:
				record(n, lines)
			}
		})
	}
	wg.Wait()
	li, err := e.store.Log(context.Background(), l.Origin)
	if err != nil || li.Size != size || li.Root != l.Tree.Root(size) {
		t.Fatalf("final state %d %x, want %d %x (%v)", li.Size, li.Root, size, l.Tree.Root(size), err)
	}
}

// TestStoreCompareAndSwapIsExact races compare-and-swaps on one log
// directly on the store, without the witness's per-log serialization, as
// two processes sharing the file would: exactly one may win.
func TestStoreCompareAndSwapIsExact(t *testing.T) {
	e := newEnv(t)
	l := journaltest.NewLog(t, "log.example/a")
	e.addLog(l)
	empty := checkpoint.EmptyRoot()
	const n = 32
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			root := [32]byte{byte(i + 1)}
			errs[i] = e.store.commitCheckpoint(context.Background(), &casUpdate{
				origin: l.Origin, oldRoot: empty, newSize: 7, newRoot: root,
				note: []byte("note"), keys: []string{l.VKey},
			})
		})
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("two compare-and-swaps from one state won: %d and %d", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, errStateChanged):
			t.Errorf("loser %d: %v, want errStateChanged", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no compare-and-swap won")
	}
	li, _ := e.store.Log(context.Background(), l.Origin)
	if li.Size != 7 || li.Root != [32]byte{byte(winner + 1)} {
		t.Fatalf("stored %d %x, want the winner's", li.Size, li.Root)
	}
}

// TestSchemaRefusesRollbackAndFork bypasses all code and writes SQL: the
// schema itself refuses to lose or fork a log's state.
func TestSchemaRefusesRollbackAndFork(t *testing.T) {
	e := newEnv(t)
	l := journaltest.NewLog(t, "log.example/a")
	e.addLog(l)
	l.Tree.Grow(4)
	e.mustCosign(l, 0, 4)
	for _, q := range []string{
		"UPDATE logs SET size = 3",
		"UPDATE logs SET root = zeroblob(32)",
		"UPDATE logs SET size = 4, root = zeroblob(32)",
		"UPDATE logs SET origin = 'log.example/b'",
		"DELETE FROM logs",
	} {
		if _, err := e.store.wdb.Exec(q); err == nil {
			t.Errorf("%s: accepted", q)
		}
	}
	if _, err := e.store.wdb.Exec("UPDATE logs SET size = 5, root = zeroblob(32)"); err != nil {
		t.Errorf("moving forward refused: %v", err)
	}
}

// TestOneLogSerializedOthersNot stalls a request in the middle of its
// critical section: a second request for the same log must wait for it and
// then see its result, while a request for another log goes through.
func TestOneLogSerializedOthersNot(t *testing.T) {
	e := newEnv(t)
	a, b := journaltest.NewLog(t, "log.example/a"), journaltest.NewLog(t, "log.example/b")
	e.addLog(a)
	e.addLog(b)
	a.Tree.Grow(3)
	b.Tree.Grow(3)
	stalled, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e.w.beforeCommit = func(origin string) {
		if origin == a.Origin {
			once.Do(func() {
				close(stalled)
				<-release
			})
		}
	}
	first := make(chan error, 1)
	go func() {
		_, err := e.client.AddCheckpoint(context.Background(), 0, nil, a.Note(t, 3, nil))
		first <- err
	}()
	<-stalled
	second := make(chan error, 1)
	go func() {
		_, err := e.client.AddCheckpoint(context.Background(), 0, nil, a.Note(t, 3, nil))
		second <- err
	}()
	// The other log is not held up.
	e.mustCosign(b, 0, 3)
	select {
	case err := <-second:
		t.Fatalf("second request for the stalled log answered before the first committed: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("first: %v", err)
	}
	var ce *ConflictError
	if err := <-second; !errors.As(err, &ce) || ce.Size != 3 {
		t.Fatalf("second: %v, want 409 at size 3", err)
	}
}

// TestGroupCommit sends concurrent requests for many logs and checks that
// they shared transactions.
func TestGroupCommit(t *testing.T) {
	e := newEnv(t)
	const nlogs = 32
	logs := make([]*journaltest.Log, nlogs)
	for i := range logs {
		logs[i] = journaltest.NewLog(t, fmt.Sprintf("log.example/%d", i))
		e.addLog(logs[i])
	}
	var (
		mu      sync.Mutex
		maxSeen int
	)
	e.store.groupHook = func(n int, _ time.Duration) {
		mu.Lock()
		maxSeen = max(maxSeen, n)
		mu.Unlock()
	}
	cosigned := make([]uint64, nlogs)
	for range 3 {
		var wg sync.WaitGroup
		for i, l := range logs {
			old, size := cosigned[i], l.Tree.Grow(1)
			wg.Go(func() {
				if _, err := e.client.AddCheckpoint(context.Background(), old, l.Tree.Proof(old, size), l.Note(t, size, nil)); err != nil {
					t.Error(err)
				}
				cosigned[i] = size
			})
		}
		wg.Wait()
	}
	if maxSeen < 2 {
		t.Fatalf("largest group committed %d writes; concurrent requests did not share a transaction", maxSeen)
	}
	t.Logf("largest group: %d", maxSeen)
}
