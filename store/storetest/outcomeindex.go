package storetest

// Outcome index: the last conclusion wins, newest first, and the count is not a page.

import (
	"github.com/runseal/runseal/store"
)

func checkOutcomeFindable(t *T) {
	j, _ := t.Open()
	q, s := store.NewRunID(), store.NewRunID()
	t.append(j, 1, note(q, "x"))
	t.concludeAndSeal(j, q, 1, "quarantined")
	t.concludeAndSeal(j, s, 1, "succeeded")
	got, err := j.RunsByOutcome(t.ctx, "quarantined", 10)
	if err != nil {
		t.Fatalf("RunsByOutcome: %v", err)
	}
	t.runs(got, q)
	if n, err := j.CountByOutcome(t.ctx, "quarantined"); err != nil || n != 1 {
		t.Errorf("CountByOutcome = %d, %v, want 1", n, err)
	}
	if got, _ := j.RunsByOutcome(t.ctx, "cancelled", 10); len(got) != 0 {
		t.Errorf("RunsByOutcome(cancelled) = %v, want none", got)
	}
}

func checkLastConclusionWins(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	t.append(j, 1, conclude(run, "failed"))
	if got, _ := j.RunsByOutcome(t.ctx, "failed", 10); !contains(got, run) {
		t.Fatalf("failed run not listed as failed")
	}
	t.append(j, 1, note(run, "resume"), conclude(run, "succeeded"))
	if got, _ := j.RunsByOutcome(t.ctx, "failed", 10); contains(got, run) {
		t.Errorf("resumed run still listed as failed")
	}
	if n, _ := j.CountByOutcome(t.ctx, "failed"); n != 0 {
		t.Errorf("resumed run still counted as failed: %d", n)
	}
	if got, _ := j.RunsByOutcome(t.ctx, "succeeded", 10); !contains(got, run) {
		t.Errorf("resumed run not listed under its last conclusion")
	}
	if n, _ := j.CountByOutcome(t.ctx, "succeeded"); n != 1 {
		t.Errorf("CountByOutcome(succeeded) = %d, want 1", n)
	}
}

func checkOutcomeNewestFirst(t *T) {
	j, _ := t.Open()
	var order []store.RunID
	for i := 0; i < 5; i++ {
		r := store.NewRunID()
		t.append(j, 1, note(r, "x"))
		order = append(order, r)
	}
	// Conclude in an order unrelated to creation or id order.
	concl := []int{3, 0, 4, 1, 2}
	for _, i := range concl {
		t.append(j, 1, conclude(order[i], "quarantined"))
	}
	got, err := j.RunsByOutcome(t.ctx, "quarantined", 10)
	if err != nil {
		t.Fatalf("RunsByOutcome: %v", err)
	}
	want := []store.RunID{order[2], order[1], order[4], order[0], order[3]}
	t.runs(got, want...)
	page, _ := j.RunsByOutcome(t.ctx, "quarantined", 2)
	t.runs(page, want[:2]...)
}

func checkCountNotPage(t *T) {
	j, _ := t.Open()
	for i := 0; i < 7; i++ {
		r := store.NewRunID()
		t.append(j, 1, conclude(r, "quarantined"))
	}
	page, _ := j.RunsByOutcome(t.ctx, "quarantined", 3)
	if len(page) != 3 {
		t.Errorf("page of 3 returned %d", len(page))
	}
	if n, err := j.CountByOutcome(t.ctx, "quarantined"); err != nil || n != 7 {
		t.Errorf("CountByOutcome = %d, %v, want 7", n, err)
	}
}
