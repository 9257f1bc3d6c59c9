package storetest

import (
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/runseal/runseal/store"
)

// The integrity checks edit the database behind the store's back, one
// attack each, and require that Verify (the run's chain, seal and outcome
// index) or VerifyLog (the Merkle log and signed checkpoints) refuses the
// result as corrupt. A check that vouches for what it did not look at is
// the failure they exist to catch.

// sealedLog is the fixture the integrity checks attack: five sealed runs
// (log indexes 0..4), one open run, signed checkpoints at sizes 2 and 5, and
// the one at 5 witnessed.
type sealedLog struct {
	j      store.Journal
	lv     store.LogVerifier
	cs     store.CheckpointStore
	sealed []store.RunID
	open   store.RunID
	origin string
}

func (t *T) sealedLog() sealedLog {
	j, _ := t.Open()
	lv, ok := j.(store.LogVerifier)
	if !ok {
		t.Fatalf("%T is not a store.LogVerifier", j)
	}
	cs, ok := j.(store.CheckpointStore)
	if !ok {
		t.Fatalf("%T is not a store.CheckpointStore", j)
	}
	f := sealedLog{j: j, lv: lv, cs: cs}
	f.sealed, _ = t.sealRuns(j, 5)
	f.open = store.NewRunID()
	t.append(j, 1, note(f.open, "open"), conclude(f.open, "failed"))
	f.origin = t.checkpoint(j).Origin
	for _, size := range []uint64{2, 5} {
		cp, err := cs.CheckpointAt(t.ctx, size)
		if err != nil {
			t.Fatalf("CheckpointAt(%d): %v", size, err)
		}
		if _, err := cs.SaveCheckpoint(t.ctx, store.SignedCheckpoint{Size: size, Root: cp.Root, Note: fakeNote(f.origin, size, cp.Root)}); err != nil {
			t.Fatalf("SaveCheckpoint(%d): %v", size, err)
		}
	}
	ps, ok := j.(store.PublicationStore)
	if !ok {
		t.Fatalf("%T is not a store.PublicationStore", j)
	}
	cp, err := cs.CheckpointAt(t.ctx, 5)
	if err != nil {
		t.Fatalf("CheckpointAt(5): %v", err)
	}
	if err := ps.MarkWitnessed(t.ctx, 5, fakeNote(f.origin, 5, cp.Root)); err != nil {
		t.Fatalf("MarkWitnessed(5): %v", err)
	}
	return f
}

// fakeNote is a signed note whose body is the checkpoint and whose
// signature line is well formed but signed by nobody: the store keeps no
// key and checks the body only.
func fakeNote(origin string, size uint64, root store.Digest) []byte {
	sig := base64.StdEncoding.EncodeToString(make([]byte, 68))
	return fmt.Appendf(nil, "%s\n%d\n%s\n\n\u2014 %s %s\n", origin, size, base64.StdEncoding.EncodeToString(root[:]), origin, sig)
}

func (t *T) tamper(j store.Journal, query string, args ...any) {
	t.h.Tamper(t.tb, j, query, args...)
}

// wantLogCorrupt requires VerifyLog to refuse the log as corrupt.
func (t *T) wantLogCorrupt(f sealedLog, attack string) {
	rep, err := f.lv.VerifyLog(t.ctx)
	if err == nil {
		t.Fatalf("after %s, VerifyLog passed: %+v", attack, rep)
	}
	var ce *store.CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("after %s, VerifyLog = %v (%T), want a *store.CorruptError", attack, err, err)
	}
}

// wantRunCorrupt requires Verify of run to refuse it as corrupt.
func (t *T) wantRunCorrupt(f sealedLog, run store.RunID, attack string) {
	_, err := f.j.Verify(t.ctx, run)
	var ce *store.CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("after %s, Verify(%s) = %v, want a *store.CorruptError", attack, run, err)
	}
}

func checkSoundStoreVerifies(t *T) {
	f := t.sealedLog()
	rep, err := f.lv.VerifyLog(t.ctx)
	if err != nil {
		t.Fatalf("VerifyLog of a sound store: %v", err)
	}
	want := store.LogReport{Size: 5, Sealed: 5, Nodes: 2*5 - 2, Checkpoints: 2, Witnessed: 1}
	if rep != want {
		t.Errorf("VerifyLog report = %+v, want %+v", rep, want)
	}
	for _, r := range append(f.sealed, f.open) {
		if _, err := f.j.Verify(t.ctx, r); err != nil {
			t.Errorf("Verify(%s) of a sound run: %v", r, err)
		}
	}
	empty, _ := t.Open()
	if lv, ok := empty.(store.LogVerifier); ok {
		if rep, err := lv.VerifyLog(t.ctx); err != nil || rep != (store.LogReport{}) {
			t.Errorf("VerifyLog of an empty store = %+v, %v", rep, err)
		}
	}
}

func checkZeroedLogNode(t *T) {
	f := t.sealedLog()
	t.tamper(f.j, `UPDATE log_nodes SET hash = ? WHERE tenant = ? AND level = 1 AND idx = 0`, make([]byte, 32), f.j.Tenant())
	t.wantLogCorrupt(f, "zeroing the stored node (1, 0)")
}

func checkZeroedLeafHash(t *T) {
	f := t.sealedLog()
	t.tamper(f.j, `UPDATE log_nodes SET hash = ? WHERE tenant = ? AND level = 0 AND idx = 4`, make([]byte, 32), f.j.Tenant())
	t.wantLogCorrupt(f, "zeroing the stored leaf hash (0, 4)")
	// The run sealed at 4 is no leaf of the log any more.
	t.wantRunCorrupt(f, f.sealed[4], "zeroing the stored leaf hash (0, 4)")
}

func checkDeletedLogNode(t *T) {
	f := t.sealedLog()
	t.tamper(f.j, `DELETE FROM log_nodes WHERE tenant = ? AND level = 2 AND idx = 0`, f.j.Tenant())
	t.wantLogCorrupt(f, "deleting the stored node (2, 0)")
}

func checkExtraLogNode(t *T) {
	f := t.sealedLog()
	t.tamper(f.j, `INSERT INTO log_nodes(tenant, level, idx, hash) VALUES(?, 0, 9, ?)`, f.j.Tenant(), make([]byte, 32))
	t.wantLogCorrupt(f, "storing a node (0, 9) beyond the log")
}

func checkChangedSealedOutcome(t *T) {
	f := t.sealedLog()
	run := f.sealed[0] // sealed as succeeded
	t.tamper(f.j, `UPDATE runs SET sealed_outcome = 'quarantined' WHERE tenant = ? AND run = ?`, f.j.Tenant(), run.String())
	t.wantRunCorrupt(f, run, "changing the sealed outcome")
}

func checkChangedOutcomeIndex(t *T) {
	f := t.sealedLog()
	run := f.sealed[1] // quarantined
	t.tamper(f.j, `UPDATE runs SET outcome = 'succeeded' WHERE tenant = ? AND run = ?`, f.j.Tenant(), run.String())
	t.wantRunCorrupt(f, run, "changing the outcome index")
	t.tamper(f.j, `UPDATE runs SET outcome = NULL WHERE tenant = ? AND run = ?`, f.j.Tenant(), f.open.String())
	t.wantRunCorrupt(f, f.open, "clearing the outcome index of a concluded run")
}

func checkDeletedSeal(t *T) {
	f := t.sealedLog()
	t.tamper(f.j, `UPDATE runs SET sealed_outcome = NULL, sealed_at = NULL, log_index = NULL, leaf = NULL WHERE tenant = ? AND run = ?`,
		f.j.Tenant(), f.sealed[2].String())
	t.wantLogCorrupt(f, "deleting the seal of the run at index 2")
}

// checkDeletedRunRow deletes the open run's row: its records remain, but a
// walk over the listed runs would never check their chain.
func checkDeletedRunRow(t *T) {
	f := t.sealedLog()
	t.tamper(f.j, `DELETE FROM runs WHERE tenant = ? AND run = ?`, f.j.Tenant(), f.open.String())
	t.wantLogCorrupt(f, "deleting the runs row of a run that has records")
}

func checkSealWithoutIndex(t *T) {
	f := t.sealedLog()
	t.tamper(f.j, `UPDATE runs SET log_index = NULL WHERE tenant = ? AND run = ?`, f.j.Tenant(), f.sealed[4].String())
	t.wantLogCorrupt(f, "removing the log index of the last sealed run")
}

func checkSwappedIndexes(t *T) {
	f := t.sealedLog()
	a, b := f.sealed[0].String(), f.sealed[1].String()
	t.tamper(f.j, `UPDATE runs SET log_index = 1000 WHERE tenant = ? AND run = ?`, f.j.Tenant(), a)
	t.tamper(f.j, `UPDATE runs SET log_index = 0 WHERE tenant = ? AND run = ?`, f.j.Tenant(), b)
	t.tamper(f.j, `UPDATE runs SET log_index = 1 WHERE tenant = ? AND run = ?`, f.j.Tenant(), a)
	t.wantLogCorrupt(f, "swapping the log indexes of two sealed runs")
	// Each run's leaf is in the log, at the other's index.
	t.wantRunCorrupt(f, f.sealed[0], "swapping the log indexes of two sealed runs")
	t.wantRunCorrupt(f, f.sealed[1], "swapping the log indexes of two sealed runs")
}

func checkChangedLeaf(t *T) {
	f := t.sealedLog()
	run := f.sealed[3]
	t.tamper(f.j, `UPDATE runs SET leaf = ? WHERE tenant = ? AND run = ?`, make([]byte, 32), f.j.Tenant(), run.String())
	t.wantRunCorrupt(f, run, "changing a sealed run's leaf")
	t.wantLogCorrupt(f, "changing a sealed run's leaf")
}

func checkShrunkLogSize(t *T) {
	f := t.sealedLog()
	t.tamper(f.j, `UPDATE logs SET size = 4 WHERE tenant = ?`, f.j.Tenant())
	t.wantLogCorrupt(f, "shrinking the recorded log size")
}

func checkForgedSignedCheckpoint(t *T) {
	f := t.sealedLog()
	forged := store.Sum([]byte("another history"))
	t.tamper(f.j, `UPDATE signed_checkpoints SET root = ?, note = ? WHERE tenant = ? AND size = 5`,
		forged[:], fakeNote(f.origin, 5, forged), f.j.Tenant())
	t.wantLogCorrupt(f, "replacing the signed checkpoint at size 5 with another root")
}

func checkEditedCheckpointNote(t *T) {
	f := t.sealedLog()
	cp, err := f.cs.CheckpointAt(t.ctx, 2)
	if err != nil {
		t.Fatalf("CheckpointAt(2): %v", err)
	}
	t.tamper(f.j, `UPDATE signed_checkpoints SET note = ? WHERE tenant = ? AND size = 2`,
		fakeNote(f.origin, 3, cp.Root), f.j.Tenant())
	t.wantLogCorrupt(f, "editing the size in the note of the signed checkpoint at size 2")
}

// checkUnreadableOutcomeRow: an outcome index row whose run id does not
// parse is corruption. The listing refuses it rather than thin it out of
// the page, and the count must refuse it too rather than count a run
// nobody can list.
func checkUnreadableOutcomeRow(t *T) {
	j, _ := t.Open()
	good, bad := store.NewRunID(), store.NewRunID()
	t.append(j, 1, conclude(good, "quarantined"))
	t.append(j, 1, conclude(bad, "quarantined"))
	t.tamper(j, `UPDATE runs SET run = 'not-a-run-id' WHERE tenant = ? AND run = ?`, j.Tenant(), bad.String())
	_, err := j.RunsByOutcome(t.ctx, "quarantined", 10)
	expect[*store.CorruptError](t, err, "RunsByOutcome over an unreadable index row")
	n, err := j.CountByOutcome(t.ctx, "quarantined")
	if err == nil {
		t.Fatalf("CountByOutcome over an unreadable index row = %d, want a *store.CorruptError", n)
	}
	expect[*store.CorruptError](t, err, "CountByOutcome over an unreadable index row")
}

func checkEditedWitnessedNote(t *T) {
	f := t.sealedLog()
	forged := store.Sum([]byte("another history"))
	t.tamper(f.j, `UPDATE witnessed SET note = ? WHERE tenant = ? AND size = 5`, fakeNote(f.origin, 5, forged), f.j.Tenant())
	t.wantLogCorrupt(f, "replacing the root in the witnessed note at size 5")
}

// checkInclusionProofOfAlteredLeafNode: a proof is built from stored nodes,
// so a run's stored level-0 node that is zeroed or deleted must make its
// inclusion proof fail as corrupt, not return a proof for a leaf the stored
// tree does not hold (or a NodeNotFound that reads as "not yet sealed").
func checkInclusionProofOfAlteredLeafNode(t *T) {
	for _, attack := range []struct {
		name, query string
		zero        bool
	}{
		{"zeroing the stored leaf hash (0, 4)", `UPDATE log_nodes SET hash = ? WHERE tenant = ? AND level = 0 AND idx = 4`, true},
		{"deleting the stored leaf hash (0, 4)", `DELETE FROM log_nodes WHERE tenant = ? AND level = 0 AND idx = 4`, false},
	} {
		f := t.sealedLog()
		var run *store.RunID
		for _, r := range f.sealed {
			inc, err := f.j.InclusionProof(t.ctx, r)
			if err != nil {
				t.Fatalf("InclusionProof(%s) of a sound store: %v", r, err)
			}
			if inc != nil && inc.Index == 4 {
				run = &r
			}
		}
		if run == nil {
			t.Fatalf("no sealed run at log index 4")
		}
		if attack.zero {
			t.tamper(f.j, attack.query, make([]byte, 32), f.j.Tenant())
		} else {
			t.tamper(f.j, attack.query, f.j.Tenant())
		}
		for _, proof := range []func() (*store.Inclusion, error){
			func() (*store.Inclusion, error) { return f.j.InclusionProof(t.ctx, *run) },
			func() (*store.Inclusion, error) { return f.j.InclusionProofAt(t.ctx, *run, 5) },
		} {
			inc, err := proof()
			var ce *store.CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("after %s, the inclusion proof of %s = %+v, %v; want a *store.CorruptError", attack.name, *run, inc, err)
			}
		}
	}
}
