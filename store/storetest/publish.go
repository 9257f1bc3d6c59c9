package storetest

// Publication: the checkpoint outbox and the cosignatures it earns survive restarts.

import (
	"time"

	"github.com/runseal/runseal/store"
)

// checkPublications exercises store.PublicationStore, for backends that
// offer it: the outbox survives as rows, a witness only ever needs its
// newest pending size, and a cosignature settles everything at or below it.
func checkPublications(t *T) {
	j, _ := t.Open()
	ps, ok := j.(store.PublicationStore)
	cs, ok2 := j.(store.CheckpointStore)
	if !ok || !ok2 {
		return // optional interface
	}
	_, cps := t.sealRuns(j, 3)
	for _, cp := range cps[1:] {
		if _, err := cs.SaveCheckpoint(t.ctx, store.SignedCheckpoint{Size: cp.Size, Root: cp.Root, Note: []byte("note\n")}); err != nil {
			t.Fatalf("SaveCheckpoint(%d): %v", cp.Size, err)
		}
	}
	err := ps.EnqueuePublication(t.ctx, cps[3].Size+1, []string{"w1"})
	expect[*store.InvalidArgumentError](t, err, "enqueueing a size never signed")
	for _, cp := range cps[1:3] {
		if err := ps.EnqueuePublication(t.ctx, cp.Size, []string{"w1", "w2"}); err != nil {
			t.Fatalf("EnqueuePublication(%d): %v", cp.Size, err)
		}
	}
	if err := ps.EnqueuePublication(t.ctx, cps[2].Size, []string{"w1", "w2"}); err != nil {
		t.Fatalf("EnqueuePublication twice: %v", err)
	}
	p, err := ps.NextPublication(t.ctx, "w1")
	if err != nil || p == nil || p.Size != cps[2].Size || p.Attempts != 0 {
		t.Fatalf("NextPublication(w1) = %+v, %v; want the newest size %d", p, err, cps[2].Size)
	}
	next := time.Unix(2000000000, 0).UTC()
	if err := ps.DeferPublication(t.ctx, "w1", p.Size, next, "down"); err != nil {
		t.Fatalf("DeferPublication: %v", err)
	}
	p, err = ps.NextPublication(t.ctx, "w1")
	if err != nil || p == nil || p.Attempts != 1 || !p.NextAttempt.Equal(next) || p.LastError != "down" {
		t.Errorf("after DeferPublication, NextPublication = %+v, %v", p, err)
	}
	if n, ok, err := ps.LastCosigned(t.ctx, "w1"); err != nil || ok || n != 0 {
		t.Errorf("LastCosigned before any cosignature = %d, %v, %v", n, ok, err)
	}
	if err := ps.RecordCosignature(t.ctx, "w1", cps[2].Size, []byte("— w1 sig\n")); err != nil {
		t.Fatalf("RecordCosignature: %v", err)
	}
	if p, err := ps.NextPublication(t.ctx, "w1"); err != nil || p != nil {
		t.Errorf("a cosignature at %d left %+v, %v pending; every size at or below it is settled", cps[2].Size, p, err)
	}
	if p, err := ps.NextPublication(t.ctx, "w2"); err != nil || p == nil || p.Size != cps[2].Size {
		t.Errorf("another witness's publication: %+v, %v", p, err)
	}
	if n, ok, err := ps.LastCosigned(t.ctx, "w1"); err != nil || !ok || n != cps[2].Size {
		t.Errorf("LastCosigned = %d, %v, %v; want %d", n, ok, err, cps[2].Size)
	}
	if err := ps.EnqueuePublication(t.ctx, cps[1].Size, []string{"w1"}); err != nil {
		t.Fatalf("EnqueuePublication of an older size: %v", err)
	}
	if p, err := ps.NextPublication(t.ctx, "w1"); err != nil || p != nil {
		t.Errorf("a size below what the witness cosigned was queued: %+v, %v", p, err)
	}
	cos, err := ps.Cosignatures(t.ctx, cps[2].Size)
	if err != nil || len(cos) != 1 || string(cos["w1"]) != "— w1 sig\n" {
		t.Errorf("Cosignatures = %q, %v", cos, err)
	}
	if w, err := ps.LatestWitnessed(t.ctx); err != nil || w != nil {
		t.Errorf("LatestWitnessed before any = %+v, %v", w, err)
	}
	for _, cp := range []store.Checkpoint{cps[1], cps[2]} {
		if err := ps.MarkWitnessed(t.ctx, cp.Size, []byte("witnessed\n")); err != nil {
			t.Fatalf("MarkWitnessed(%d): %v", cp.Size, err)
		}
	}
	if err := ps.MarkWitnessed(t.ctx, cps[2].Size, []byte("second\n")); err != nil {
		t.Fatalf("MarkWitnessed twice: %v", err)
	}
	w, err := ps.LatestWitnessed(t.ctx)
	if err != nil || w == nil || w.Size != cps[2].Size || w.Root != cps[2].Root || string(w.Note) != "witnessed\n" {
		t.Errorf("LatestWitnessed = %+v, %v; want size %d with its first note", w, err, cps[2].Size)
	}
}
