package storetest

// Fencing: while a run has a lease, a write under any other epoch, stale or future, is refused.

import (
	"time"

	"github.com/runseal/runseal/store"
)

func checkStaleEpoch(t *T) {
	j, clk := t.Open()
	run := store.NewRunID()
	l1 := t.acquire(j, run, "a", 2*time.Second)
	t.append(j, l1.Epoch, note(run, "a"))
	clk.Advance(3 * time.Second)
	l2 := t.acquire(j, run, "b", 30*time.Second)
	_, err := j.Append(t.ctx, l1.Epoch, []store.Append{note(run, "stale")})
	f := expect[*store.FencedError](t, err, "append under the superseded epoch")
	if f.Held != l1.Epoch || f.Current != l2.Epoch {
		t.Errorf("Fenced = %+v, want held %d current %d", f, l1.Epoch, l2.Epoch)
	}
	if h := t.head(j, run); h.Seq != 1 {
		t.Errorf("a fenced append wrote: head seq %d", h.Seq)
	}
}

func checkFutureEpoch(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	l := t.acquire(j, run, "a", 30*time.Second)
	_, err := j.Append(t.ctx, l.Epoch+1, []store.Append{note(run, "future")})
	f := expect[*store.FencedError](t, err, "append under a fabricated future epoch")
	if f.Current != l.Epoch {
		t.Errorf("Fenced.Current = %d, want %d", f.Current, l.Epoch)
	}
	_, err = j.Append(t.ctx, l.Epoch+1000, []store.Append{note(run, "future")})
	expect[*store.FencedError](t, err, "append under a far-future epoch")
	if h := t.head(j, run); h.Seq != 0 {
		t.Errorf("fenced appends wrote: head seq %d", h.Seq)
	}
}

func checkNoLeaseAnyEpoch(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	t.append(j, 7, note(run, "a"))
	t.append(j, 3, note(run, "b")) // restore replays epochs as they were
	recs, _ := j.Read(t.ctx, run, 1)
	if len(recs) != 2 || recs[0].Epoch != 7 || recs[1].Epoch != 3 {
		t.Fatalf("records = %+v, want epochs 7 then 3", recs)
	}
}

func checkStaleCannotSeal(t *T) {
	j, clk := t.Open()
	run := store.NewRunID()
	l1 := t.acquire(j, run, "a", 2*time.Second)
	t.append(j, l1.Epoch, conclude(run, "succeeded"))
	clk.Advance(3 * time.Second)
	l2 := t.acquire(j, run, "b", 30*time.Second)
	_, err := j.Seal(t.ctx, run, l1.Epoch, "succeeded")
	expect[*store.FencedError](t, err, "seal under the superseded epoch")
	_, err = j.Seal(t.ctx, run, l2.Epoch+1, "succeeded")
	expect[*store.FencedError](t, err, "seal under a future epoch")
	if p, err := j.LogPositions(t.ctx, []store.RunID{run}); err == nil && len(p) == 1 && p[0] != nil {
		t.Errorf("a fenced seal placed the run in the log at %d", p[0].Index)
	}
	if _, err := j.Append(t.ctx, l2.Epoch, []store.Append{note(run, "still open")}); err != nil {
		t.Errorf("run sealed by a fenced caller: %v", err)
	}
}

func checkEpochZero(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	_, err := j.Append(t.ctx, 0, []store.Append{note(run, "a")})
	expect[*store.InvalidArgumentError](t, err, "append under epoch 0")
}
