package storetest

// Recovery: the runs an instance died holding, and the runs waiting on an
// event or time.

import (
	"time"

	"github.com/runseal/runseal/store"
)

func checkAbandoned(t *T) {
	j, clk := t.Open()
	dead, finished, live, sealed := store.NewRunID(), store.NewRunID(), store.NewRunID(), store.NewRunID()
	ld := t.acquire(j, dead, "crashed", 2*time.Second)
	t.append(j, ld.Epoch, note(dead, "mid-step"))
	lf := t.acquire(j, finished, "clean", 2*time.Second)
	t.append(j, lf.Epoch, conclude(finished, "failed"))
	if err := j.ReleaseLease(t.ctx, finished, lf.Epoch); err != nil {
		t.Fatalf("release: %v", err)
	}
	ls := t.acquire(j, sealed, "sealer", 2*time.Second)
	t.concludeAndSeal(j, sealed, ls.Epoch, "succeeded")
	clk.Advance(3 * time.Second)
	t.acquire(j, live, "alive", time.Hour)
	got, err := j.AbandonedRuns(t.ctx, 10)
	if err != nil {
		t.Fatalf("AbandonedRuns: %v", err)
	}
	t.runs(got, dead)
}

func checkAbandonedOrder(t *T) {
	j, clk := t.Open()
	a, b, c := store.NewRunID(), store.NewRunID(), store.NewRunID()
	t.acquire(j, b, "x", 3*time.Second)
	t.acquire(j, a, "x", 5*time.Second)
	t.acquire(j, c, "x", 4*time.Second)
	clk.Advance(6 * time.Second)
	got, err := j.AbandonedRuns(t.ctx, 10)
	if err != nil {
		t.Fatalf("AbandonedRuns: %v", err)
	}
	t.runs(got, b, c, a)
	page, _ := j.AbandonedRuns(t.ctx, 1)
	t.runs(page, b)
}

func checkWaiting(t *T) {
	j, _ := t.Open()
	w, progressed := store.NewRunID(), store.NewRunID()
	until := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
	t.append(j, 1, note(w, "x"), suspendUntil(w, until))
	t.append(j, 1, suspendEvent(progressed, "approval"))
	t.append(j, 1, note(progressed, "resumed"))
	got, err := j.WaitingRuns(t.ctx, 10)
	if err != nil {
		t.Fatalf("WaitingRuns: %v", err)
	}
	if len(got) != 1 || got[0].Run != w {
		t.Fatalf("WaitingRuns = %+v, want only %s", got, w)
	}
	if got[0].Reason.Awaiting != store.AwaitingTime || !got[0].Reason.Until.Equal(until) {
		t.Errorf("waiting reason = %+v, want awaiting time until %v", got[0].Reason, until)
	}
	// Suspension in a batch that ends with progress is not a wait.
	b := store.NewRunID()
	t.append(j, 1, suspendEvent(b, "e"), note(b, "resumed at once"))
	if got, _ := j.WaitingRuns(t.ctx, 10); len(got) != 1 {
		t.Errorf("a batch ending in progress left its run waiting: %+v", got)
	}
}

func checkWaitingOrder(t *T) {
	j, _ := t.Open()
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	late, soon, ev, mid := store.NewRunID(), store.NewRunID(), store.NewRunID(), store.NewRunID()
	t.append(j, 1, suspendEvent(ev, "approval"))
	t.append(j, 1, suspendUntil(late, base.Add(72*time.Hour)))
	t.append(j, 1, suspendUntil(soon, base.Add(time.Hour)))
	t.append(j, 1, suspendUntil(mid, base.Add(24*time.Hour)))
	got, err := j.WaitingRuns(t.ctx, 10)
	if err != nil {
		t.Fatalf("WaitingRuns: %v", err)
	}
	var ids []store.RunID
	for _, w := range got {
		ids = append(ids, w.Run)
	}
	t.runs(ids, soon, mid, late, ev)
}
