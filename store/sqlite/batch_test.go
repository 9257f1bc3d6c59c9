package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/runseal/runseal/store"
)

// groupStep is one append queued into a single group.
type groupStep struct {
	name  string
	run   int // index into the runs
	epoch int // 0: the run's lease epoch; else this epoch
	batch func(run store.RunID) []store.Append
}

func steps() []groupStep {
	plain := func(n int) func(store.RunID) []store.Append {
		return func(run store.RunID) []store.Append {
			b := make([]store.Append, n)
			for i := range b {
				b[i] = store.Append{Run: run, Kind: "Step", Fields: fmt.Appendf(nil, `{"i":%d}`, i)}
			}
			return b
		}
	}
	effect := func(run store.RunID) []store.Append {
		k := store.Digest{7}
		return []store.Append{{Run: run, Kind: store.KindEffectStarted, EffectKey: &k}}
	}
	admit := func(run store.RunID) []store.Append {
		return []store.Append{{Run: run, Kind: store.KindRunAdmitted, Fields: []byte(`{"admission_key":"order-1","source":"web"}`)}}
	}
	conclude := func(run store.RunID) []store.Append {
		return []store.Append{{Run: run, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)}}
	}
	return []groupStep{
		{"A: 20 records (a 16-row statement and 4 single rows)", 0, 0, plain(20)},
		{"B: admitted as order-1", 1, 0, admit},
		{"C: admitted as order-1 too, in the same group", 2, 0, admit},
		{"A: effect started", 0, 0, effect},
		{"A: the same effect again, in the same group", 0, 0, effect},
		{"B: under a stale epoch", 1, 99, plain(1)},
		{"A: concluded", 0, 0, conclude},
		{"C: a plain record after its refusal", 2, 0, plain(2)},
	}
}

// runGroup queues every step behind a write that holds the writer, so all
// of them are decided in one group, and returns each step's error class.
func runGroup(t *testing.T, s *Store, runs []store.RunID, epochs []store.Epoch) []string {
	t.Helper()
	ctx := context.Background()
	release := holdWriter(t, s)
	st := steps()
	errs := make([]chan error, len(st))
	for i, step := range st {
		errs[i] = make(chan error, 1)
		epoch := epochs[step.run]
		if step.epoch != 0 {
			epoch = store.Epoch(step.epoch)
		}
		go func() {
			_, err := s.Append(ctx, epoch, step.batch(runs[step.run]))
			errs[i] <- err
		}()
		awaitQueued(s, i+1)
	}
	release()
	out := make([]string, len(st))
	for i, ch := range errs {
		err := <-ch
		var (
			fe *store.FencedError
			de *store.DuplicateEffectError
			da *store.DuplicateAdmissionError
		)
		switch {
		case err == nil:
			out[i] = "ok"
		case errors.As(err, &fe):
			out[i] = "fenced"
		case errors.As(err, &de):
			out[i] = "duplicate effect"
		case errors.As(err, &da):
			out[i] = "duplicate admission held by " + map[store.RunID]string{runs[0]: "A", runs[1]: "B", runs[2]: "C"}[da.Holder]
		default:
			out[i] = "error: " + err.Error()
		}
	}
	return out
}

// TestBatchedGroup_DecidesEachAppendAsOneByOne queues appends that refuse
// each other (a second claim of an admission key, a second start of an
// effect, a stale epoch) into one group, and holds the batched path to the
// answers and the resulting chains of the one-by-one path.
func TestBatchedGroup_DecidesEachAppendAsOneByOne(t *testing.T) {
	ctx := context.Background()
	runs := []store.RunID{store.NewRunID(), store.NewRunID(), store.NewRunID()}
	type result struct {
		answers []string
		heads   []store.Head
		concl   []store.RunID
		holder  store.RunID
	}
	do := func(oneByOne bool) result {
		s, err := Open(ctx, filepath.Join(t.TempDir(), "j.db"), Options{oneByOne: oneByOne})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var epochs []store.Epoch
		for _, r := range runs {
			l, err := s.Acquire(ctx, r, "test", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			epochs = append(epochs, l.Epoch)
		}
		var res result
		res.answers = runGroup(t, s, runs, epochs)
		for _, r := range runs {
			h, err := s.Head(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Verify(ctx, r); err != nil {
				t.Fatalf("verify %s: %v", r, err)
			}
			res.heads = append(res.heads, h)
		}
		if res.concl, err = s.RunsByOutcome(ctx, "succeeded", 10); err != nil {
			t.Fatal(err)
		}
		var ok bool
		if res.holder, ok, err = s.AdmittedAs(ctx, "order-1"); err != nil || !ok {
			t.Fatalf("AdmittedAs: %v %v", ok, err)
		}
		return res
	}
	batched, alone := do(false), do(true)
	want := []string{"ok", "ok", "duplicate admission held by B", "ok", "duplicate effect", "fenced", "ok", "ok"}
	if fmt.Sprint(batched.answers) != fmt.Sprint(want) {
		t.Errorf("batched answers:\n%q\nwant\n%q", batched.answers, want)
	}
	if fmt.Sprint(alone.answers) != fmt.Sprint(want) {
		t.Errorf("one-by-one answers:\n%q\nwant\n%q", alone.answers, want)
	}
	if fmt.Sprint(batched.heads) != fmt.Sprint(alone.heads) {
		t.Errorf("heads differ: batched %v, one by one %v", batched.heads, alone.heads)
	}
	if batched.heads[0].Seq != 22 || batched.heads[1].Seq != 1 || batched.heads[2].Seq != 2 {
		t.Errorf("heads %v, want seqs 22, 1, 2", batched.heads)
	}
	if fmt.Sprint(batched.concl) != fmt.Sprint([]store.RunID{runs[0]}) || batched.holder != runs[1] {
		t.Errorf("batched: concluded %v, order-1 held by %s; want [A] and B", batched.concl, batched.holder)
	}
}

// TestBatchedGroup_TenantsOfOneFile queues appends of two tenants to runs
// of the same id into one group: each must land in its own tenant's run.
func TestBatchedGroup_TenantsOfOneFile(t *testing.T) {
	ctx := context.Background()
	a, err := Open(ctx, filepath.Join(t.TempDir(), "j.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := a.ForTenant("other")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	run := store.NewRunID()
	la, err := a.Acquire(ctx, run, "t", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.Acquire(ctx, run, "t", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	release := holdWriter(t, a)
	type call struct {
		s *Store
		e store.Epoch
	}
	calls := []call{{a, la.Epoch}, {b, lb.Epoch}, {a, la.Epoch}}
	errs := make(chan error, len(calls))
	for i, c := range calls {
		go func() {
			_, err := c.s.Append(ctx, c.e, []store.Append{{Run: run, Kind: "Step", Fields: fmt.Appendf(nil, `{"i":%d}`, i)}})
			errs <- err
		}()
		awaitQueued(a, i+1)
	}
	release()
	for range calls {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		s    *Store
		want store.Seq
	}{{a, 2}, {b, 1}} {
		h, err := c.s.Head(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if h.Seq != c.want {
			t.Errorf("tenant %s: head seq %d, want %d", c.s.Tenant(), h.Seq, c.want)
		}
		if _, err := c.s.Verify(ctx, run); err != nil {
			t.Errorf("tenant %s: %v", c.s.Tenant(), err)
		}
	}
}
