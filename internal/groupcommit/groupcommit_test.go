package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// waitQueued waits until n members wait untaken in q.
func waitQueued[T any](t *testing.T, q *Queue[T], n int) {
	t.Helper()
	for {
		q.mu.Lock()
		k := len(q.waiting)
		q.mu.Unlock()
		if k == n {
			return
		}
		if k > n {
			t.Fatalf("%d members waiting, want %d", k, n)
		}
		runtime.Gosched()
	}
}

// recorder is an Attempt that answers every member nil and records the
// groups it saw; while gate is open (non-nil) the first attempt blocks on
// it, so the test can queue members behind it.
type recorder struct {
	mu      sync.Mutex
	groups  [][]string
	started chan struct{}
	gate    chan struct{}
}

func newRecorder() *recorder {
	return &recorder{started: make(chan struct{}, 1), gate: make(chan struct{})}
}

func (r *recorder) attempt(ms []*Member[string]) ([]*Member[string], error) {
	var g []string
	for _, m := range ms {
		g = append(g, m.Req)
	}
	r.mu.Lock()
	r.groups = append(r.groups, g)
	first := len(r.groups) == 1
	r.mu.Unlock()
	if first {
		r.started <- struct{}{}
		<-r.gate
	}
	for _, m := range ms {
		m.Answer(nil)
	}
	return nil, nil
}

func (r *recorder) seen() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.groups)
}

// submitFirst submits req and waits until its attempt holds the gate.
func submitFirst(q *Queue[string], r *recorder, req string) []chan error {
	ch := make(chan error, 1)
	go func() { ch <- q.Submit(context.Background(), req) }()
	<-r.started
	return []chan error{ch}
}

// submitAll submits reqs one after another, each queued before the next,
// and returns a channel of their answers in order.
func submitAll(t *testing.T, q *Queue[string], already int, reqs ...string) []chan error {
	t.Helper()
	var out []chan error
	for i, r := range reqs {
		ch := make(chan error, 1)
		go func() { ch <- q.Submit(context.Background(), r) }()
		waitQueued(t, q, already+i+1)
		out = append(out, ch)
	}
	return out
}

func TestQueue_GroupsInSubmissionOrder(t *testing.T) {
	r := newRecorder()
	q := New(Config[string]{Attempt: r.attempt, MaxGroup: 3})
	defer q.Close()
	first := submitFirst(q, r, "a")
	rest := submitAll(t, q, 0, "b", "c", "d", "e", "f")
	close(r.gate)
	for _, ch := range append(first, rest...) {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	want := [][]string{{"a"}, {"b", "c", "d"}, {"e", "f"}}
	if got := r.seen(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("groups %v, want %v (submission order, MaxGroup 3)", got, want)
	}
}

func TestQueue_KeyedMembersNeverShareAGroup(t *testing.T) {
	r := newRecorder()
	keys := map[string][]string{"a1": {"a"}, "a2": {"a"}, "b1": {"b"}, "ab": {"a", "b"}, "c1": {"c"}}
	q := New(Config[string]{Attempt: r.attempt, Keys: func(s string) []string { return keys[s] }})
	defer q.Close()
	first := submitFirst(q, r, "a1")
	rest := submitAll(t, q, 0, "a2", "b1", "ab", "c1")
	close(r.gate)
	for _, ch := range append(first, rest...) {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	// ab claims keys a2 and b1 already claim in the group: it waits for
	// the next one, and c1 behind it does not.
	want := "[[a1] [a2 b1 c1] [ab]]"
	if got := fmt.Sprint(r.seen()); got != want {
		t.Fatalf("groups %v, want %v", got, want)
	}
}

// TestQueue_KeysRace hammers a keyed queue from many goroutines and checks,
// under -race, that no two members of one key are ever in flight together
// and that each key's members commit in the order they were submitted.
func TestQueue_KeysRace(t *testing.T) {
	type req struct {
		key string // shared by several submitters
		id  int    // the submitter
		n   int    // its submission number
	}
	var mu sync.Mutex
	inFlight := map[string]bool{}
	last := map[int]int{}
	var bad []string
	attempt := func(ms []*Member[req]) ([]*Member[req], error) {
		mu.Lock()
		for _, m := range ms {
			if inFlight[m.Req.key] {
				bad = append(bad, "two of "+m.Req.key+" in flight")
			}
			inFlight[m.Req.key] = true
			if m.Req.n != last[m.Req.id]+1 {
				bad = append(bad, fmt.Sprintf("submitter %d: #%d after #%d", m.Req.id, m.Req.n, last[m.Req.id]))
			}
			last[m.Req.id] = m.Req.n
		}
		mu.Unlock()
		runtime.Gosched()
		mu.Lock()
		for _, m := range ms {
			delete(inFlight, m.Req.key)
		}
		mu.Unlock()
		for _, m := range ms {
			m.Answer(nil)
		}
		return nil, nil
	}
	q := New(Config[req]{Attempt: attempt, Keys: func(r req) []string { return []string{r.key} }, Committers: 4, MaxGroup: 8})
	var wg sync.WaitGroup
	for w := range 16 {
		key := fmt.Sprintf("k%d", w%5)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 1; n <= 50; n++ {
				if err := q.Submit(context.Background(), req{key: key, id: w, n: n}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	q.Close()
	if len(bad) > 0 {
		t.Fatal(bad[:min(5, len(bad))])
	}
}

func TestQueue_CloseDrainsQueuedMembers(t *testing.T) {
	r := newRecorder()
	q := New(Config[string]{Attempt: r.attempt})
	first := submitFirst(q, r, "a")
	rest := submitAll(t, q, 0, "b", "c")
	closed := make(chan struct{})
	go func() { q.Close(); close(closed) }()
	// Close must not return while members are unanswered; the only way to
	// observe that without a sleep is that it is still waiting now, with
	// the first attempt held at the gate.
	select {
	case <-closed:
		t.Fatal("Close returned while a group was in flight")
	default:
	}
	close(r.gate)
	for _, ch := range append(first, rest...) {
		if err := <-ch; err != nil {
			t.Fatalf("a member queued before Close got %v, want its write", err)
		}
	}
	<-closed
	if err := q.Submit(context.Background(), "late"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Submit after Close: %v, want ErrClosed", err)
	}
	if got := fmt.Sprint(r.seen()); got != "[[a] [b c]]" {
		t.Fatalf("groups %v", got)
	}
}

func TestQueue_CancelledBeforeTakenIsWithdrawn(t *testing.T) {
	r := newRecorder()
	q := New(Config[string]{Attempt: r.attempt})
	defer q.Close()
	first := submitFirst(q, r, "a")
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan error, 1)
	go func() { ch <- q.Submit(ctx, "gone") }()
	waitQueued(t, q, 1)
	cancel()
	if err := <-ch; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiting member: %v, want context.Canceled", err)
	}
	waitQueued(t, q, 0)
	close(r.gate)
	<-first[0]
	if got := fmt.Sprint(r.seen()); got != "[[a]]" {
		t.Fatalf("groups %v: a withdrawn member was attempted", got)
	}
	if err := q.Submit(ctx, "x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Submit with a done context: %v", err)
	}
}

func TestQueue_CancelledAfterTakenWaitsForAnswer(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	attempt := func(ms []*Member[string]) ([]*Member[string], error) {
		close(entered)
		<-release
		for _, m := range ms {
			m.Answer(errors.New("the write's own answer"))
		}
		return nil, nil
	}
	q := New(Config[string]{Attempt: attempt})
	defer q.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan error, 1)
	go func() { ch <- q.Submit(ctx, "a") }()
	<-entered
	cancel()
	close(release)
	if err := <-ch; err == nil || err.Error() != "the write's own answer" {
		t.Fatalf("Submit returned %v; a taken member must wait for its answer", err)
	}
}

func TestQueue_MaxAttemptsAnswersWithLastError(t *testing.T) {
	var attempts, backoffs int
	fail := errors.New("server down")
	attempt := func(ms []*Member[string]) ([]*Member[string], error) {
		attempts++
		if attempts == 1 {
			return ms, nil // the one free send-back
		}
		return ms, fmt.Errorf("attempt %d: %w", attempts, fail)
	}
	q := New(Config[string]{Attempt: attempt, MaxAttempts: 3, Backoff: func(int) time.Duration { backoffs++; return 0 }})
	defer q.Close()
	err := q.Submit(context.Background(), "a")
	if !errors.Is(err, fail) || attempts != 4 || backoffs != 2 {
		t.Fatalf("err %v after %d attempts and %d backoffs; want the 4th attempt's error after 1 free + 3 failed attempts, 2 backoffs", err, attempts, backoffs)
	}
}

func TestQueue_CancelledBeforeRetryIsNotAttemptedAgain(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var attempts int
	attempt := func(ms []*Member[string]) ([]*Member[string], error) {
		attempts++
		cancel() // the caller gives up while its failed write waits to retry
		return ms, errors.New("transient")
	}
	q := New(Config[string]{Attempt: attempt})
	defer q.Close()
	if err := q.Submit(ctx, "a"); !errors.Is(err, context.Canceled) || attempts != 1 {
		t.Fatalf("err %v after %d attempts; want context.Canceled after 1", err, attempts)
	}
}

// TestQueue_GatherWaitsForNoAbsentMember: the committer's gathering between
// groups ends as soon as no member arrives, however many it hoped for, and
// at once when enough already wait; it never withholds a waiting group.
func TestQueue_GatherWaitsForNoAbsentMember(t *testing.T) {
	r := newRecorder()
	q := New(Config[string]{Attempt: r.attempt})
	defer q.Close()
	q.gather(1 << 20) // nobody is coming: returns after two idle yields
	first := submitFirst(q, r, "a")
	rest := submitAll(t, q, 0, "b", "c")
	q.gather(2) // two wait already
	close(r.gate)
	for _, ch := range append(first, rest...) {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	// "a"'s caller never comes back: the group after it goes without it.
	if got, want := fmt.Sprint(r.seen()), fmt.Sprint([][]string{{"a"}, {"b", "c"}}); got != want {
		t.Fatalf("groups %v, want %v", got, want)
	}
}
