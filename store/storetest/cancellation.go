package storetest

// Cancellation: stop requests need no lease and keep the first asker.

import (
	"time"

	"github.com/runseal/runseal/store"
)

func checkCancelNoLease(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	l := t.acquire(j, run, "busy", time.Hour)
	t.append(j, l.Epoch, note(run, "working"))
	op := store.Operator{Actor: "alice@example.com", Basis: store.Authenticated}
	ok, err := j.RequestCancel(t.ctx, run, op, "runaway spend")
	if err != nil || !ok {
		t.Fatalf("RequestCancel while another holds the lease = %v, %v", ok, err)
	}
	c, err := j.Cancellation(t.ctx, run)
	if err != nil || c == nil || c.Actor != op || c.Reason != "runaway spend" {
		t.Fatalf("Cancellation = %+v, %v", c, err)
	}
	if h := t.head(j, run); h.Seq != 1 {
		t.Errorf("a stop request wrote into the chain: head seq %d", h.Seq)
	}
	if none, err := j.Cancellation(t.ctx, store.NewRunID()); err != nil || none != nil {
		t.Errorf("Cancellation of a run never asked = %+v, %v", none, err)
	}
}

func checkCancelFirst(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	t.append(j, 1, note(run, "x"))
	first := store.Operator{Actor: "alice", Basis: store.Authenticated}
	if ok, err := j.RequestCancel(t.ctx, run, first, "first"); err != nil || !ok {
		t.Fatalf("first request = %v, %v", ok, err)
	}
	ok, err := j.RequestCancel(t.ctx, run, store.Operator{Actor: "mallory", Basis: store.Asserted}, "second")
	if err != nil || ok {
		t.Errorf("second request = %v, %v, want false", ok, err)
	}
	c, _ := j.Cancellation(t.ctx, run)
	if c == nil || c.Actor != first || c.Reason != "first" {
		t.Errorf("the first asker was overwritten: %+v", c)
	}
	_, err = j.RequestCancel(t.ctx, run, store.Operator{Actor: "", Basis: store.Asserted}, "x")
	expect[*store.InvalidArgumentError](t, err, "a blank actor")
	_, err = j.RequestCancel(t.ctx, run, store.Operator{Actor: "bob", Basis: "trusted-me"}, "x")
	expect[*store.InvalidArgumentError](t, err, "an unknown basis")
}

func checkCancelUnknown(t *T) {
	j, _ := t.Open()
	_, err := j.RequestCancel(t.ctx, store.NewRunID(), store.Operator{Actor: "a", Basis: store.Asserted}, "x")
	expect[*store.NotFoundError](t, err, "cancelling an unknown run")
}
