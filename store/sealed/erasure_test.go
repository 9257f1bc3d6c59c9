package sealed_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	flog "github.com/transparency-dev/formats/log"
	fnote "github.com/transparency-dev/formats/note"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sealed"
	"github.com/runseal/runseal/store/sqlite"
)

// caseRun writes one sealed run of case c whose caller data holds secret.
func caseRun(t *testing.T, j store.Journal, c store.CaseID, secret string) store.RunID {
	t.Helper()
	ctx := context.Background()
	run := store.NewRunID()
	l, err := j.Acquire(ctx, run, "worker", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	k := store.Sum([]byte("send-" + run.String()))
	if _, err := j.Append(ctx, l.Epoch, []store.Append{
		{Run: run, Case: c, Kind: store.KindRunAdmitted, Fields: []byte(`{"source":"intake","applicant":"` + secret + `"}`)},
		{Run: run, Case: c, Kind: store.KindEffectStarted, EffectKey: &k, Fields: []byte(`{"email":"` + secret + `@example.com"}`)},
		{Run: run, Case: c, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded","summary":"approved ` + secret + `"}`)},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Seal(ctx, run, l.Epoch, "succeeded"); err != nil {
		t.Fatal(err)
	}
	return run
}

func copyJournal(t *testing.T, from, to string) {
	t.Helper()
	matches, _ := filepath.Glob(from + "*")
	for _, m := range matches {
		src, err := os.Open(m)
		if err != nil {
			t.Fatal(err)
		}
		dst, err := os.Create(to + strings.TrimPrefix(m, from))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(dst, src); err != nil {
			t.Fatal(err)
		}
		src.Close()
		dst.Close()
	}
}

// TestEraseCase_ProofsSurvivePayloadsDoNot is issue 13's done-when test:
// after a case is erased, checked with verifiers from outside this project
// (crypto/sha256 for the chain, transparency-dev/formats for the witnessed
// note, transparency-dev/merkle and x/mod tlog for every inclusion and the
// consistency proof), the journal still verifies, while the case's payloads
// no longer open even from a copy of the journal taken before the erasure,
// and another case's payloads still open.
func TestEraseCase_ProofsSurvivePayloadsDoNot(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ring := openRing(t)
	j := sealed.New(s, ring, sealed.Options{})
	gone, kept := store.NewCaseID(), store.NewCaseID()
	goneRuns := []store.RunID{caseRun(t, j, gone, "AdaLovelace"), caseRun(t, j, gone, "AdaLovelace")}
	keptRun := caseRun(t, j, kept, "CharlesBabbage")
	all := append(append([]store.RunID{}, goneRuns...), keptRun)

	// Sign the checkpoint with the log key, have a witness cosign it, and
	// keep it as witnessed.
	cp, err := j.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	skey, vkey, err := checkpoint.GenerateLogKey(rand.Reader, cp.Origin)
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := checkpoint.NewSigner(skey)
	wskey, wvkey, err := checkpoint.GenerateCosignerKey(rand.Reader, "witness.example")
	if err != nil {
		t.Fatal(err)
	}
	cosigner, _ := checkpoint.NewCosigner(wskey)
	body := checkpoint.Checkpoint{Origin: cp.Origin, Size: cp.Size, Root: cp.Root}
	logNote, err := checkpoint.Sign(body, signer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.SaveCheckpoint(ctx, store.SignedCheckpoint{Size: cp.Size, Root: cp.Root, Note: logNote, SignedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	witnessed, err := checkpoint.Sign(body, signer, cosigner.At(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.MarkWitnessed(ctx, cp.Size, witnessed); err != nil {
		t.Fatal(err)
	}

	// A backup, taken before the erasure.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(dir, "backup.db")
	copyJournal(t, path, backup)
	raw, _ := os.ReadFile(backup)
	if bytes.Contains(raw, []byte("AdaLovelace")) || bytes.Contains(raw, []byte("CharlesBabbage")) {
		t.Fatalf("the journal file holds caller data in the clear")
	}
	if s, err = sqlite.Open(ctx, path, sqlite.Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	j = sealed.New(s, ring, sealed.Options{})

	res, err := j.Erase(ctx, sealed.Erasure{Scope: sealed.CaseScope(j.Tenant(), gone),
		Actor: store.Operator{Actor: "dpo@example.com", Basis: store.Authenticated}, Reason: "GDPR art. 17 request #4711"})
	if err != nil || res.Already || res.Run.IsZero() {
		t.Fatalf("Erase = %+v, %v", res, err)
	}

	// 1. Every run's chain, recomputed with crypto/sha256 from the stored
	//    bytes, ends at the leaf the log holds for it.
	positions, err := s.LogPositions(ctx, append(all, res.Run))
	if err != nil {
		t.Fatal(err)
	}
	for i, run := range append(all, res.Run) {
		recs, err := s.Read(ctx, run, 1)
		if err != nil {
			t.Fatal(err)
		}
		var prev [32]byte
		for _, r := range recs {
			if h := sha256.Sum256(append(prev[:], r.Raw...)); h != r.Hash {
				t.Fatalf("run %s seq %d: SHA-256(prev || raw) != stored hash", run, r.Seq)
			}
			prev = r.Hash
		}
		if positions[i] == nil || positions[i].Leaf != prev {
			t.Fatalf("run %s: recomputed head %x is not its log leaf %+v", run, prev, positions[i])
		}
	}

	// 2. The witnessed checkpoint, read back after erasure, opens under the
	//    log key and the witness's cosignature with transparency-dev/formats.
	w, err := j.LatestWitnessed(ctx)
	if err != nil || w == nil {
		t.Fatalf("LatestWitnessed = %v, %v", w, err)
	}
	logV, err := fnote.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	witV, err := fnote.NewVerifierForCosignatureV1(wvkey)
	if err != nil {
		t.Fatal(err)
	}
	fcp, _, n, err := flog.ParseCheckpoint(w.Note, cp.Origin, logV, witV)
	if err != nil {
		t.Fatalf("witnessed checkpoint does not verify: %v", err)
	}
	if len(n.Sigs) != 2 || fcp.Size != cp.Size {
		t.Fatalf("witnessed checkpoint: %d verified signatures, size %d; want 2, %d", len(n.Sigs), fcp.Size, cp.Size)
	}
	if _, err := note.Open(w.Note, note.VerifierList(logV)); err != nil {
		t.Fatalf("x/mod note does not open the witnessed checkpoint: %v", err)
	}
	root := [32]byte(fcp.Hash)

	// 3. Every case run's inclusion proof at the witnessed size verifies
	//    with transparency-dev/merkle and with x/mod tlog.
	for _, run := range all {
		inc, err := j.InclusionProofAt(ctx, run, fcp.Size)
		if err != nil || inc == nil {
			t.Fatalf("InclusionProofAt(%s) = %v, %v", run, inc, err)
		}
		var hashes [][]byte
		var tp tlog.RecordProof
		for _, h := range inc.Proof {
			hashes = append(hashes, h[:])
			tp = append(tp, tlog.Hash(h))
		}
		leafHash := rfc6962.DefaultHasher.HashLeaf(inc.Leaf[:])
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, inc.Index, fcp.Size, leafHash, hashes, root[:]); err != nil {
			t.Errorf("merkle: inclusion of %s: %v", run, err)
		}
		if err := tlog.CheckRecord(tp, int64(fcp.Size), tlog.Hash(root), int64(inc.Index), tlog.RecordHash(inc.Leaf[:])); err != nil {
			t.Errorf("tlog: inclusion of %s: %v", run, err)
		}
	}
	// ... and the log after the erasure record extends the witnessed one.
	now, _ := j.Checkpoint(ctx)
	cons, err := j.ConsistencyProof(ctx, fcp.Size, now.Size)
	if err != nil {
		t.Fatal(err)
	}
	var ch [][]byte
	for _, h := range cons {
		ch = append(ch, h[:])
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, fcp.Size, now.Size, ch, root[:], now.Root[:]); err != nil {
		t.Errorf("the log after erasure is not consistent with the witnessed checkpoint: %v", err)
	}

	// 4. The erased case does not open, even from the backup; the other does.
	bs, err := sqlite.Open(ctx, backup, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close()
	for name, jj := range map[string]*sealed.Journal{"live journal": j, "pre-erasure backup": sealed.New(bs, ring, sealed.Options{})} {
		for _, run := range goneRuns {
			recs, err := jj.Read(ctx, run, 1)
			if err != nil {
				t.Fatalf("%s: reading an erased run: %v", name, err)
			}
			for _, r := range recs {
				if bytes.Contains(r.Fields, []byte("AdaLovelace")) {
					t.Errorf("%s: erased payload opened: %s", name, r.Fields)
				}
				fs, err := jj.Fields(ctx, r)
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range fs {
					if f.Name != "source" && f.Name != "outcome" && f.State != sealed.Erased {
						t.Errorf("%s: run %s seq %d field %s is %s, want erased", name, run, r.Seq, f.Name, f.State)
					}
				}
			}
		}
		recs, err := jj.Read(ctx, keptRun, 1)
		if err != nil || !bytes.Contains(recs[0].Fields, []byte("CharlesBabbage")) {
			t.Errorf("%s: the other case's payload no longer opens: %v", name, err)
		}
	}

	// 5. The act is in the chain, readable with no key; a second erasure
	//    says so and records nothing.
	er, err := s.Read(ctx, res.Run, 1)
	if err != nil || len(er) != 2 || er[0].Kind != sealed.KindScopeErased || !bytes.Contains(er[0].Raw, []byte("GDPR art. 17")) {
		t.Fatalf("erasure record = %v, %v", er, err)
	}
	hist, err := j.CaseHistory(ctx, gone, 100)
	if err != nil || hist[len(hist)-2].Kind != sealed.KindScopeErased {
		t.Errorf("the erased case's history does not end with the act of erasure: %v", err)
	}
	// 6. With no key, the stored records say which fields are erased.
	var stored []store.Record
	for _, run := range append(all, res.Run) {
		recs, _ := s.Read(ctx, run, 1)
		stored = append(stored, recs...)
	}
	in, err := sealed.Inspect(j.Tenant(), stored)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Erasures) != 1 || in.Erasures[0].Reason != "GDPR art. 17 request #4711" || in.Erasures[0].Actor.Actor != "dpo@example.com" {
		t.Errorf("recorded erasures = %+v", in.Erasures)
	}
	// Per gone run: admission's applicant, the effect's email, the summary.
	if e := in.Erased(); len(e) != 6 || len(in.Sealed) != 9 {
		t.Errorf("erased fields %v of sealed %v; want 6 of 9", e, in.Sealed)
	}
	again, err := j.Erase(ctx, sealed.Erasure{Scope: sealed.CaseScope(j.Tenant(), gone), Actor: store.Operator{Actor: "dpo@example.com", Basis: store.Authenticated}, Reason: "again"})
	if err != nil || !again.Already {
		t.Errorf("second erasure = %+v, %v; want Already", again, err)
	}
}
