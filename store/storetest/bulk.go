package storetest

// Bulk: a store.BulkWriter (optional) commits many appends or seals in one
// transaction with every check of Append and Seal, all or nothing, and
// seals take log indexes in the order given.

import (
	"errors"
	"time"

	"github.com/runseal/runseal/store"
)

func checkBulkAppendAndSeal(t *T) {
	j, _ := t.Open()
	bw, ok := j.(store.BulkWriter)
	if !ok {
		return // optional interface
	}
	a, b, c := store.NewRunID(), store.NewRunID(), store.NewRunID()
	recs, err := bw.AppendBulk(t.ctx, []store.BulkAppend{
		{Epoch: 1, Batch: []store.Append{admit(a, "bulk-a", "src"), conclude(a, "succeeded")}},
		{Epoch: 2, Batch: []store.Append{note(b, "open")}},
		{Epoch: 1, Batch: []store.Append{conclude(c, "quarantined")}},
	})
	if err != nil {
		t.Fatalf("AppendBulk: %v", err)
	}
	if len(recs) != 3 || len(recs[0]) != 2 || len(recs[1]) != 1 || len(recs[2]) != 1 {
		t.Fatalf("AppendBulk answered %d members", len(recs))
	}
	for i, run := range []store.RunID{a, b, c} {
		last := recs[i][len(recs[i])-1]
		if h := t.head(j, run); h.Seq != last.Seq || h.Hash != last.Hash {
			t.Errorf("run %d: head %+v, AppendBulk returned seq %d hash %s", i, h, last.Seq, last.Hash)
		}
	}
	if holder, ok, err := j.AdmittedAs(t.ctx, "bulk-a"); err != nil || !ok || holder != a {
		t.Errorf("admission key of a bulk append: %v %v %v", holder, ok, err)
	}
	// Sealed in the order given, not in run order.
	leaves, err := bw.SealBulk(t.ctx, []store.BulkSeal{{Run: c, Epoch: 1, Outcome: "quarantined"}, {Run: a, Epoch: 1, Outcome: "succeeded"}})
	if err != nil {
		t.Fatalf("SealBulk: %v", err)
	}
	if len(leaves) != 2 || leaves[0] != recs[2][0].Hash || leaves[1] != recs[0][1].Hash {
		t.Fatalf("SealBulk leaves %v", leaves)
	}
	ps, err := j.LogPositions(t.ctx, []store.RunID{c, a, b})
	if err != nil {
		t.Fatalf("LogPositions: %v", err)
	}
	if ps[0] == nil || ps[0].Index != 0 || ps[1] == nil || ps[1].Index != 1 || ps[2] != nil {
		t.Errorf("log positions after SealBulk(c, a): %+v %+v %+v", ps[0], ps[1], ps[2])
	}
	// A re-seal in a bulk returns the leaf and takes no index.
	if leaves, err := bw.SealBulk(t.ctx, []store.BulkSeal{{Run: a, Epoch: 1, Outcome: "succeeded"}}); err != nil || leaves[0] != recs[0][1].Hash {
		t.Errorf("bulk re-seal: %v %v", leaves, err)
	}
	if cp, err := j.Checkpoint(t.ctx); err != nil || cp.Size != 2 {
		t.Errorf("checkpoint after a bulk re-seal: %+v %v", cp, err)
	}
	// A sealed run refuses a bulk append.
	_, err = bw.AppendBulk(t.ctx, []store.BulkAppend{{Epoch: 1, Batch: []store.Append{note(a, "after")}}})
	expect[*store.RunSealedError](t, err, "bulk append to a sealed run")
}

func checkBulkRefusalWritesNothing(t *T) {
	j, _ := t.Open()
	bw, ok := j.(store.BulkWriter)
	if !ok {
		return // optional interface
	}
	held := store.NewRunID()
	l := t.acquire(j, held, "owner", 30*time.Second)
	fresh := store.NewRunID()
	_, err := bw.AppendBulk(t.ctx, []store.BulkAppend{
		{Epoch: 1, Batch: []store.Append{note(fresh, "would be written")}},
		{Epoch: l.Epoch + 1, Batch: []store.Append{note(held, "future epoch")}},
	})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("bulk append with a fenced member: %v, want ErrFenced", err)
	}
	if h := t.head(j, fresh); h.Seq != 0 {
		t.Errorf("a refused bulk append wrote the other member (head %+v)", h)
	}
	// A key already claimed refuses the bulk.
	t.append(j, 1, admit(store.NewRunID(), "taken", ""))
	_, err = bw.AppendBulk(t.ctx, []store.BulkAppend{
		{Epoch: 1, Batch: []store.Append{note(fresh, "would be written")}},
		{Epoch: 1, Batch: []store.Append{admit(store.NewRunID(), "taken", "")}},
	})
	if err == nil || !store.IsDomain(err) {
		t.Fatalf("bulk append claiming a held admission key: %v, want a refusal", err)
	}
	if h := t.head(j, fresh); h.Seq != 0 {
		t.Errorf("a bulk append refused for its key wrote the other member (head %+v)", h)
	}
	// A run named twice is refused.
	_, err = bw.AppendBulk(t.ctx, []store.BulkAppend{
		{Epoch: 1, Batch: []store.Append{note(fresh, "one")}},
		{Epoch: 1, Batch: []store.Append{note(fresh, "two")}},
	})
	expect[*store.InvalidArgumentError](t, err, "bulk append naming a run twice")

	// A seal whose run's latest conclusion differs refuses the bulk, and
	// no index is taken.
	ok1, bad := store.NewRunID(), store.NewRunID()
	t.append(j, 1, conclude(ok1, "succeeded"))
	t.append(j, 1, conclude(bad, "succeeded"))
	_, err = bw.SealBulk(t.ctx, []store.BulkSeal{{Run: ok1, Epoch: 1, Outcome: "succeeded"}, {Run: bad, Epoch: 1, Outcome: "cancelled"}})
	expect[*store.InvalidArgumentError](t, err, "bulk seal with a wrong outcome")
	_, err = bw.SealBulk(t.ctx, []store.BulkSeal{{Run: ok1, Epoch: 1, Outcome: "succeeded"}, {Run: store.NewRunID(), Epoch: 1, Outcome: "succeeded"}})
	expect[*store.NotFoundError](t, err, "bulk seal of an unknown run")
	leasedRun := store.NewRunID()
	ll := t.acquire(j, leasedRun, "owner", 30*time.Second)
	t.append(j, ll.Epoch, conclude(leasedRun, "succeeded"))
	_, err = bw.SealBulk(t.ctx, []store.BulkSeal{{Run: ok1, Epoch: 1, Outcome: "succeeded"}, {Run: leasedRun, Epoch: ll.Epoch + 1, Outcome: "succeeded"}})
	if !errors.Is(err, store.ErrFenced) {
		t.Errorf("bulk seal with a fenced member: %v, want ErrFenced", err)
	}
	// A seal expecting another leaf than its run's head (a restore whose
	// replayed run is not the one the export's log holds) refuses the bulk.
	_, err = bw.SealBulk(t.ctx, []store.BulkSeal{{Run: ok1, Epoch: 1, Outcome: "succeeded"}, {Run: leasedRun, Epoch: ll.Epoch, Outcome: "succeeded", Leaf: store.Sum([]byte("another leaf"))}})
	expect[*store.InvalidArgumentError](t, err, "bulk seal expecting another leaf")
	if cp, err := j.Checkpoint(t.ctx); err != nil || cp.Size != 0 {
		t.Errorf("refused bulk seals grew the log: %+v %v", cp, err)
	}
	if ps, err := j.LogPositions(t.ctx, []store.RunID{ok1}); err != nil || ps[0] != nil {
		t.Errorf("a refused bulk seal sealed its other run: %+v %v", ps, err)
	}
	if leaves, err := bw.SealBulk(t.ctx, []store.BulkSeal{{Run: leasedRun, Epoch: ll.Epoch, Outcome: "succeeded"}, {Run: ok1, Epoch: 1, Outcome: "succeeded", Leaf: t.head(j, ok1).Hash}}); err != nil || len(leaves) != 2 {
		t.Errorf("bulk seal under the lease's epoch: %v %v", leaves, err)
	}
}
