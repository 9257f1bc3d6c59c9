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

// checkPublicationBackoff: a newer checkpoint queued for a witness whose
// publication keeps failing takes over its attempts, next attempt and last
// error, so that a log signing often neither resets the backoff (retrying
// a down witness at every checkpoint) nor hides the failure from status;
// once the witness cosigns, a newer checkpoint is due at once.
func checkPublicationBackoff(t *T) {
	j, _ := t.Open()
	ps, ok := j.(store.PublicationStore)
	cs, ok2 := j.(store.CheckpointStore)
	if !ok || !ok2 {
		return // optional interface
	}
	_, cps := t.sealRuns(j, 4)
	for _, cp := range cps[1:] {
		if _, err := cs.SaveCheckpoint(t.ctx, store.SignedCheckpoint{Size: cp.Size, Root: cp.Root, Note: []byte("note\n")}); err != nil {
			t.Fatalf("SaveCheckpoint(%d): %v", cp.Size, err)
		}
	}
	if err := ps.EnqueuePublication(t.ctx, cps[1].Size, []string{"w1"}); err != nil {
		t.Fatalf("EnqueuePublication(%d): %v", cps[1].Size, err)
	}
	next := time.Unix(2000000000, 0).UTC()
	for range 3 {
		if err := ps.DeferPublication(t.ctx, "w1", cps[1].Size, next, "connection refused"); err != nil {
			t.Fatalf("DeferPublication: %v", err)
		}
	}
	if err := ps.EnqueuePublication(t.ctx, cps[2].Size, []string{"w1"}); err != nil {
		t.Fatalf("EnqueuePublication(%d): %v", cps[2].Size, err)
	}
	p, err := ps.NextPublication(t.ctx, "w1")
	if err != nil || p == nil || p.Size != cps[2].Size || p.Attempts != 3 || !p.NextAttempt.Equal(next) || p.LastError != "connection refused" {
		t.Fatalf("a newer checkpoint queued for a failing witness: NextPublication = %+v, %v; want size %d with 3 attempts, next %v, the last error", p, err, cps[2].Size, next)
	}
	// A newer size queued while an attempt at the older one runs shares
	// that attempt's failure.
	if err := ps.EnqueuePublication(t.ctx, cps[3].Size, []string{"w1"}); err != nil {
		t.Fatalf("EnqueuePublication(%d): %v", cps[3].Size, err)
	}
	later := next.Add(time.Minute)
	if err := ps.DeferPublication(t.ctx, "w1", cps[2].Size, later, "timeout"); err != nil {
		t.Fatalf("DeferPublication: %v", err)
	}
	p, err = ps.NextPublication(t.ctx, "w1")
	if err != nil || p == nil || p.Size != cps[3].Size || p.Attempts != 4 || !p.NextAttempt.Equal(later) || p.LastError != "timeout" {
		t.Fatalf("a checkpoint queued while an attempt failed: NextPublication = %+v, %v; want size %d with 4 attempts, next %v, the attempt's error", p, err, cps[3].Size, later)
	}
	if err := ps.RecordCosignature(t.ctx, "w1", cps[3].Size, []byte("— w1 sig\n")); err != nil {
		t.Fatalf("RecordCosignature: %v", err)
	}
	if err := ps.EnqueuePublication(t.ctx, cps[4].Size, []string{"w1"}); err != nil {
		t.Fatalf("EnqueuePublication(%d): %v", cps[4].Size, err)
	}
	p, err = ps.NextPublication(t.ctx, "w1")
	if err != nil || p == nil || p.Size != cps[4].Size || p.Attempts != 0 || p.LastError != "" || p.NextAttempt.After(time.Now().Add(time.Hour)) {
		t.Errorf("after a cosignature, a newer checkpoint: NextPublication = %+v, %v; want it due at once with no attempts", p, err)
	}
}
