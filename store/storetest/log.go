package storetest

// Log: the Merkle log of sealed runs only grows, and its proofs and signed
// checkpoints commit to exactly the sealed runs.

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
	"golang.org/x/mod/sumdb/tlog"
)

func (t *T) checkpoint(j store.Journal) store.Checkpoint {
	cp, err := j.Checkpoint(t.ctx)
	if err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	return cp
}

// sealRuns seals n fresh runs and returns them in seal order with the
// checkpoint after each seal.
func (t *T) sealRuns(j store.Journal, n int) ([]store.RunID, []store.Checkpoint) {
	var runs []store.RunID
	cps := []store.Checkpoint{t.checkpoint(j)}
	outcomes := []string{"succeeded", "quarantined", "cancelled"}
	for i := 0; i < n; i++ {
		r := store.NewRunID()
		t.append(j, 1, note(r, fmt.Sprint(i)))
		t.concludeAndSeal(j, r, 1, outcomes[i%3])
		runs = append(runs, r)
		cps = append(cps, t.checkpoint(j))
	}
	return runs, cps
}

func checkEmptyLog(t *T) {
	j, _ := t.Open()
	cp := t.checkpoint(j)
	if cp.Size != 0 || cp.Root != store.Digest(log.EmptyRoot()) {
		t.Fatalf("empty log checkpoint = %+v, want size 0 and SHA-256(\"\")", cp)
	}
	if cp.Origin == "" {
		t.Errorf("checkpoint has no origin")
	}
	if p, err := j.ConsistencyProof(t.ctx, 0, 0); err != nil || len(p) != 0 {
		t.Errorf("ConsistencyProof(0, 0) = %v, %v, want an empty proof", p, err)
	}
}

func checkLogOnlyGrows(t *T) {
	j, _ := t.Open()
	_, cps := t.sealRuns(j, 13)
	// Interleave unsealed activity and refused re-seals: neither moves the log.
	for i := 1; i < len(cps); i++ {
		if cps[i].Size != cps[i-1].Size+1 {
			t.Fatalf("seal %d moved the log from %d to %d leaves", i, cps[i-1].Size, cps[i].Size)
		}
	}
	for a := range cps {
		for b := a; b < len(cps); b++ {
			p, err := j.ConsistencyProof(t.ctx, cps[a].Size, cps[b].Size)
			if err != nil {
				t.Fatalf("ConsistencyProof(%d, %d): %v", cps[a].Size, cps[b].Size, err)
			}
			hs := make([]log.Hash, len(p))
			for i := range p {
				hs[i] = log.Hash(p[i])
			}
			if err := log.VerifyConsistency(cps[a].Size, cps[b].Size, log.Hash(cps[a].Root), log.Hash(cps[b].Root), hs); err != nil {
				t.Fatalf("checkpoints at %d and %d are not consistent: %v", cps[a].Size, cps[b].Size, err)
			}
			if cps[a].Size > 0 {
				th := make([]tlog.Hash, len(p))
				for i := range p {
					th[i] = tlog.Hash(p[i])
				}
				if err := tlog.CheckTree(th, int64(cps[b].Size), tlog.Hash(cps[b].Root), int64(cps[a].Size), tlog.Hash(cps[a].Root)); err != nil {
					t.Fatalf("x/mod tlog rejects consistency %d..%d: %v", cps[a].Size, cps[b].Size, err)
				}
			}
		}
	}
}

func checkInclusionAtPastSizes(t *T) {
	j, _ := t.Open()
	runs, cps := t.sealRuns(j, 9)
	for i, r := range runs {
		for _, cp := range cps {
			inc, err := j.InclusionProofAt(t.ctx, r, cp.Size)
			if err != nil {
				t.Fatalf("InclusionProofAt(run %d, size %d): %v", i, cp.Size, err)
			}
			if uint64(i) >= cp.Size {
				if inc != nil {
					t.Fatalf("run sealed at %d has a proof at size %d", i, cp.Size)
				}
				continue
			}
			if inc == nil || inc.Index != uint64(i) || inc.Size != cp.Size {
				t.Fatalf("InclusionProofAt(run %d, size %d) = %+v", i, cp.Size, inc)
			}
			hs := make([]log.Hash, len(inc.Proof))
			th := make([]tlog.Hash, len(inc.Proof))
			for k := range inc.Proof {
				hs[k], th[k] = log.Hash(inc.Proof[k]), tlog.Hash(inc.Proof[k])
			}
			if err := log.VerifyInclusion(log.Hash(inc.Leaf), inc.Index, cp.Size, hs, log.Hash(cp.Root)); err != nil {
				t.Fatalf("run %d not included at size %d: %v", i, cp.Size, err)
			}
			if err := tlog.CheckRecord(th, int64(cp.Size), tlog.Hash(cp.Root), int64(inc.Index), tlog.RecordHash(inc.Leaf[:])); err != nil {
				t.Fatalf("x/mod tlog rejects inclusion of run %d at size %d: %v", i, cp.Size, err)
			}
		}
	}
	last := runs[len(runs)-1]
	inc, err := j.InclusionProof(t.ctx, last)
	if err != nil || inc == nil || inc.Size != cps[len(cps)-1].Size {
		t.Fatalf("InclusionProof of the last sealed run = %+v, %v", inc, err)
	}
}

func checkRootCommitsToSealedRuns(t *T) {
	j, _ := t.Open()
	runs, cps := t.sealRuns(j, 7)
	pos, err := j.LogPositions(t.ctx, runs)
	if err != nil {
		t.Fatalf("LogPositions: %v", err)
	}
	rebuild := func(skip int) store.Digest {
		var m log.MemStore
		var leaves []log.Hash
		for i, p := range pos {
			if i != skip {
				leaves = append(leaves, log.Hash(p.Leaf))
			}
		}
		root, err := log.Append(t.ctx, &m, 0, leaves...)
		if err != nil {
			t.Fatalf("rebuild: %v", err)
		}
		return store.Digest(root)
	}
	final := cps[len(cps)-1]
	for i, p := range pos {
		if p == nil || p.Index != uint64(i) {
			t.Fatalf("run %d sealed in order %d has position %+v", i, i, p)
		}
		h := t.head(j, runs[i])
		if p.Leaf != h.Hash {
			t.Fatalf("leaf of run %d is not its terminal chain hash", i)
		}
	}
	if rebuild(-1) != final.Root {
		t.Fatalf("the root is not the tree of the sealed runs' terminal hashes in seal order")
	}
	for i := range pos {
		if rebuild(i) == final.Root {
			t.Fatalf("removing sealed run %d leaves the root unchanged", i)
		}
	}
}

func checkLogSizeBounds(t *T) {
	j, _ := t.Open()
	runs, cps := t.sealRuns(j, 3)
	size := cps[len(cps)-1].Size
	_, err := j.ConsistencyProof(t.ctx, 0, size+1)
	expect[*store.InvalidArgumentError](t, err, "a consistency proof to a size beyond the log")
	_, err = j.ConsistencyProof(t.ctx, size, size-1)
	expect[*store.InvalidArgumentError](t, err, "a consistency proof from a larger to a smaller size")
	_, err = j.InclusionProofAt(t.ctx, runs[0], size+1)
	expect[*store.InvalidArgumentError](t, err, "an inclusion proof at a size beyond the log")
}

func checkUnsealedNotInLog(t *T) {
	j, _ := t.Open()
	open, failed := store.NewRunID(), store.NewRunID()
	t.append(j, 1, note(open, "running"))
	t.append(j, 1, conclude(failed, "failed"))
	sealedRuns, _ := t.sealRuns(j, 2)
	for _, r := range []store.RunID{open, failed, store.NewRunID()} {
		inc, err := j.InclusionProof(t.ctx, r)
		if err != nil || inc != nil {
			t.Errorf("InclusionProof of an unsealed run = %+v, %v, want nil and no error", inc, err)
		}
	}
	asked := []store.RunID{open, sealedRuns[1], failed, sealedRuns[0], sealedRuns[1]}
	pos, err := j.LogPositions(t.ctx, asked)
	if err != nil || len(pos) != len(asked) {
		t.Fatalf("LogPositions = %v, %v", pos, err)
	}
	if pos[0] != nil || pos[2] != nil || pos[1] == nil || pos[1].Index != 1 || pos[3] == nil || pos[3].Index != 0 || pos[4] == nil || pos[4].Index != 1 {
		t.Errorf("LogPositions not in the order asked: %+v", pos)
	}
}

func checkConcurrentSealsNoGaps(t *T) {
	j, _ := t.Open()
	const n = 24
	runs := make([]store.RunID, n)
	for i := range runs {
		runs[i] = store.NewRunID()
		t.append(j, 1, conclude(runs[i], "succeeded"))
	}
	rand.Shuffle(n, func(a, b int) { runs[a], runs[b] = runs[b], runs[a] })
	errs := make(chan error, n*2)
	done := make(chan struct{})
	for i := 0; i < n; i++ {
		go func(r store.RunID) {
			_, err := j.Seal(t.ctx, r, 1, "succeeded")
			errs <- err
			_, err = j.Seal(t.ctx, r, 1, "succeeded") // racing re-seal
			errs <- err
			done <- struct{}{}
		}(runs[i])
	}
	for i := 0; i < n; i++ {
		<-done
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent seal: %v", err)
		}
	}
	pos, err := j.LogPositions(t.ctx, runs)
	if err != nil {
		t.Fatalf("LogPositions: %v", err)
	}
	seen := make([]bool, n)
	for _, p := range pos {
		if p == nil || p.Index >= n || seen[p.Index] {
			t.Fatalf("log indexes have a gap or a duplicate: %+v", pos)
		}
		seen[p.Index] = true
	}
	if cp := t.checkpoint(j); cp.Size != n {
		t.Fatalf("log size %d after %d seals", cp.Size, n)
	}
}

func checkSignedCheckpoints(t *T) {
	j, _ := t.Open()
	cs, ok := j.(store.CheckpointStore)
	if !ok {
		t.Fatalf("the journal does not keep signed checkpoints (store.CheckpointStore)")
	}
	if got, err := cs.LatestCheckpoint(t.ctx); err != nil || got != nil {
		t.Fatalf("LatestCheckpoint of an empty store = %+v, %v", got, err)
	}
	_, cps := t.sealRuns(j, 3)
	first := store.SignedCheckpoint{Size: cps[2].Size, Root: cps[2].Root, Note: []byte("note one\n")}
	saved, err := cs.SaveCheckpoint(t.ctx, first)
	if err != nil || string(saved.Note) != "note one\n" {
		t.Fatalf("SaveCheckpoint = %+v, %v", saved, err)
	}
	again, err := cs.SaveCheckpoint(t.ctx, store.SignedCheckpoint{Size: cps[2].Size, Root: cps[2].Root, Note: []byte("note two\n")})
	if err != nil || string(again.Note) != "note one\n" {
		t.Errorf("a size signed twice: kept %q, %v; want the first note kept", again.Note, err)
	}
	bad := cps[3].Root
	bad[0] ^= 1
	_, err = cs.SaveCheckpoint(t.ctx, store.SignedCheckpoint{Size: cps[3].Size, Root: bad, Note: []byte("forged\n")})
	expect[*store.InvalidArgumentError](t, err, "saving a checkpoint whose root is not the log's")
	_, err = cs.SaveCheckpoint(t.ctx, store.SignedCheckpoint{Size: cps[3].Size + 1, Root: cps[3].Root, Note: []byte("future\n")})
	expect[*store.InvalidArgumentError](t, err, "saving a checkpoint beyond the log")
	if _, err := cs.SaveCheckpoint(t.ctx, store.SignedCheckpoint{Size: cps[1].Size, Root: cps[1].Root, Note: []byte("older\n")}); err != nil {
		t.Fatalf("saving an older size: %v", err)
	}
	latest, err := cs.LatestCheckpoint(t.ctx)
	if err != nil || latest == nil || latest.Size != cps[2].Size {
		t.Errorf("LatestCheckpoint = %+v, %v, want size %d", latest, err, cps[2].Size)
	}
	if at, err := cs.SignedCheckpointAt(t.ctx, cps[1].Size); err != nil || at == nil || string(at.Note) != "older\n" {
		t.Errorf("SignedCheckpointAt(%d) = %+v, %v", cps[1].Size, at, err)
	}
	for _, cp := range cps {
		got, err := cs.CheckpointAt(t.ctx, cp.Size)
		if err != nil || got != cp {
			t.Errorf("CheckpointAt(%d) = %+v, %v, want %+v", cp.Size, got, err, cp)
		}
	}
	_, err = cs.CheckpointAt(t.ctx, cps[3].Size+1)
	expect[*store.InvalidArgumentError](t, err, "CheckpointAt beyond the log")
}

// register is the disclosure register a serving backend keeps (the
// interface disclosure.Register, restated to keep this package below it).
type register interface {
	RecordDisclosure(ctx context.Context, d store.Disclosure) error
	Disclosures(ctx context.Context, after string, limit int) ([]store.Disclosure, error)
}
