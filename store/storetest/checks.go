package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/runseal/runseal/store"
)

var checks = []check{
	// chaining
	{"chaining/genesis-head", checkGenesisHead},
	{"chaining/contiguous-seq", checkContiguousSeq},
	{"chaining/links", checkLinks},
	{"chaining/hash-covers-raw-bytes", checkHashCoversRaw},
	{"chaining/sound-chain-verifies", checkVerify},
	{"chaining/concurrent-appenders-one-run", checkConcurrentOneRun},
	// fencing
	{"fencing/stale-epoch", checkStaleEpoch},
	{"fencing/future-epoch", checkFutureEpoch},
	{"fencing/no-lease-accepts-any-epoch", checkNoLeaseAnyEpoch},
	{"fencing/stale-epoch-cannot-seal", checkStaleCannotSeal},
	{"fencing/epoch-zero-refused", checkEpochZero},
	// exactly-once
	{"exactly-once/duplicate-start-refused", checkDuplicateEffect},
	{"exactly-once/same-key-other-run-allowed", checkEffectOtherRun},
	{"exactly-once/duplicate-within-batch", checkDuplicateInBatch},
	{"exactly-once/other-kinds-may-repeat-key", checkEffectOtherKinds},
	// atomicity
	{"atomicity/batch-spans-one-run", checkBatchOneRun},
	{"atomicity/rejected-batch-writes-nothing", checkRejectedBatch},
	{"atomicity/refused-member-does-not-sink-others", checkGroupIsolation},
	{"atomicity/record-too-large", checkTooLarge},
	{"atomicity/invalid-fields-refused", checkInvalidFields},
	// seal
	{"seal/sealed-run-refuses-appends", checkSealFreezes},
	{"seal/first-seal-wins", checkFirstSealWins},
	{"seal/only-final-outcomes-seal", checkOnlyFinalSeal},
	{"seal/outcome-must-be-latest-conclusion", checkSealNeedsConclusion},
	{"seal/unknown-run", checkSealUnknown},
	// outcome index
	{"outcome-index/sealed-runs-findable", checkOutcomeFindable},
	{"outcome-index/last-conclusion-wins", checkLastConclusionWins},
	{"outcome-index/newest-first", checkOutcomeNewestFirst},
	{"outcome-index/count-is-not-a-page", checkCountNotPage},
	// admission
	{"admission/admits-one-run", checkAdmitsOne},
	{"admission/claimed-by-the-append", checkAdmissionClaimed},
	{"admission/refused-batch-leaves-key-free", checkAdmissionRefusedFree},
	{"admission/unkeyed-claims-nothing", checkUnkeyed},
	{"admission/forget-frees-key-keeps-run", checkForget},
	{"admission/racing-admissions-one-winner", checkAdmissionRace},
	// discovery
	{"discovery/recent-runs-total-order", checkRecentTotalOrder},
	{"discovery/recent-runs-newest-first", checkRecentNewest},
	{"discovery/runs-by-id-once-each", checkRunsByID},
	{"discovery/recent-runs-from-source", checkRecentFrom},
	// case
	{"case-history/selects-one-matter", checkCaseHistory},
	{"case-history/bounded-oldest-first", checkCaseBounded},
	{"case-history/runs-of-a-case", checkCaseRuns},
	// read
	{"read/starts-where-told", checkReadFrom},
	{"read/page-is-bounded", checkReadPage},
	{"read/from-zero-refused", checkReadZero},
	// leases
	{"lease/live-lease-not-stolen", checkLeaseNotStolen},
	{"lease/takeover-bumps-epoch", checkTakeover},
	{"lease/acquire-never-renews", checkAcquireNeverRenews},
	{"lease/renew-extends-only-what-is-held", checkRenew},
	{"lease/released-lease-free-at-once", checkReleaseFree},
	{"lease/release-keeps-epoch", checkReleaseKeepsEpoch},
	{"lease/fenced-caller-cannot-release-new-owner", checkFencedRelease},
	{"lease/ttl-whole-seconds", checkTTL},
	{"lease/racing-acquires-one-owner", checkAcquireRace},
	{"lease/first-lease-fences-earlier-writers", checkFirstLeaseFences},
	// recovery
	{"recovery/abandoned-names-the-dead-not-the-finished", checkAbandoned},
	{"recovery/abandoned-oldest-first", checkAbandonedOrder},
	{"recovery/waiting-runs-last-record-suspension", checkWaiting},
	{"recovery/waiting-runs-soonest-first", checkWaitingOrder},
	// cancellation
	{"cancellation/needs-no-lease", checkCancelNoLease},
	{"cancellation/first-asker-stays", checkCancelFirst},
	{"cancellation/unknown-run", checkCancelUnknown},
	// bounds
	{"bounds/limits-validated", checkLimits},
	// tenancy
	{"tenancy/tenant-named", checkTenant},
	// log
	{"log/empty-log", checkEmptyLog},
	{"log/only-grows", checkLogOnlyGrows},
	{"log/inclusion-at-past-sizes", checkInclusionAtPastSizes},
	{"log/root-commits-to-sealed-runs", checkRootCommitsToSealedRuns},
	{"log/sizes-beyond-the-log-refused", checkLogSizeBounds},
	{"log/unsealed-runs-not-in-log", checkUnsealedNotInLog},
	{"log/concurrent-seals-no-gap-no-duplicate", checkConcurrentSealsNoGaps},
	{"log/signed-checkpoints-kept", checkSignedCheckpoints},
	{"disclosure/register-keeps-acts", checkDisclosureRegister},
	// publication and tokens (optional interfaces)
	{"publish/outbox-and-cosignatures", checkPublications},
	{"auth/tokens-kept-hashed", checkTokens},
	// integrity: what Verify and VerifyLog catch when the database is
	// edited behind the store's back
	{"integrity/sound-store-verifies", checkSoundStoreVerifies},
	{"integrity/zeroed-log-node", checkZeroedLogNode},
	{"integrity/zeroed-leaf-hash", checkZeroedLeafHash},
	{"integrity/deleted-log-node", checkDeletedLogNode},
	{"integrity/extra-log-node", checkExtraLogNode},
	{"integrity/changed-sealed-outcome", checkChangedSealedOutcome},
	{"integrity/changed-outcome-index", checkChangedOutcomeIndex},
	{"integrity/deleted-seal", checkDeletedSeal},
	{"integrity/seal-without-log-index", checkSealWithoutIndex},
	{"integrity/swapped-log-indexes", checkSwappedIndexes},
	{"integrity/changed-leaf", checkChangedLeaf},
	{"integrity/shrunk-log-size", checkShrunkLogSize},
	{"integrity/forged-signed-checkpoint", checkForgedSignedCheckpoint},
	{"integrity/edited-checkpoint-note", checkEditedCheckpointNote},
	{"integrity/unreadable-outcome-row-refused", checkUnreadableOutcomeRow},
}

func checkGenesisHead(t *T) {
	j, _ := t.Open()
	h := t.head(j, store.NewRunID())
	if h != (store.Head{}) {
		t.Fatalf("head of an unknown run = %+v, want genesis {0, zero}", h)
	}
}

func checkContiguousSeq(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	var got []store.Seq
	for i := 0; i < 3; i++ {
		for _, r := range t.append(j, 1, note(run, "a"), note(run, "b")) {
			got = append(got, r.Seq)
		}
	}
	for i, s := range got {
		if s != store.Seq(i+1) {
			t.Fatalf("seqs = %v, want 1..6", got)
		}
	}
	if h := t.head(j, run); h.Seq != 6 {
		t.Fatalf("head seq = %d, want 6", h.Seq)
	}
}

func checkLinks(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	t.append(j, 1, note(run, "a"))
	t.append(j, 1, note(run, "b"), note(run, "c"))
	recs, err := j.Read(t.ctx, run, 1)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	prev := store.ZeroDigest
	for _, r := range recs {
		if r.PrevHash != prev {
			t.Fatalf("seq %d prev_hash %s, want %s", r.Seq, r.PrevHash, prev)
		}
		prev = r.Hash
	}
	if h := t.head(j, run); h.Hash != prev {
		t.Fatalf("head hash %s, want last record's %s", h.Hash, prev)
	}
}

func checkHashCoversRaw(t *T) {
	j, _ := t.Open()
	run, c := store.NewRunID(), store.NewCaseID()
	step := uint32(7)
	k := key("e")
	in := []store.Append{
		{Run: run, Case: c, Step: &step, Kind: "StepStarted", Fields: []byte(`{"b":2, "a":[1,2]}`)},
		{Run: run, Phase: store.Compensating, EffectKey: &k, Kind: "EffectDone", Fields: []byte(`{"output":{"n":18446744073709551615}}`)},
	}
	recs := t.append(j, 3, in...)
	read, err := j.Read(t.ctx, run, 1)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	for i, r := range read {
		if store.ChainHash(r.PrevHash, r.Raw) != r.Hash {
			t.Errorf("seq %d: hash does not cover prev||raw", r.Seq)
		}
		if !bytes.Equal(r.Raw, recs[i].Raw) || r.Hash != recs[i].Hash {
			t.Errorf("seq %d: read back different bytes than append returned", r.Seq)
		}
		b, err := store.DecodeBody(r.Raw)
		if err != nil {
			t.Errorf("seq %d: raw does not decode: %v", r.Seq, err)
			continue
		}
		if b.Epoch != 3 || b.Run != run || b.Kind != in[i].Kind || b.V != store.RecordVersion {
			t.Errorf("seq %d: body %+v does not carry what was appended", r.Seq, b)
		}
	}
	if !strings.Contains(string(read[1].Raw), `18446744073709551615`) {
		t.Errorf("integer beyond 2^53 not written exactly: %s", read[1].Raw)
	}
	if read[0].Case != c || read[0].Step == nil || *read[0].Step != 7 || read[1].Phase != store.Compensating || read[1].EffectKey == nil || *read[1].EffectKey != k {
		t.Errorf("routing fields lost: %+v / %+v", read[0].Body, read[1].Body)
	}
}

func checkVerify(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	t.append(j, 1, note(run, "a"), note(run, "b"))
	recs := t.append(j, 1, note(run, "c"))
	d, err := j.Verify(t.ctx, run)
	if err != nil {
		t.Fatalf("Verify of a sound chain: %v", err)
	}
	if d != recs[0].Hash {
		t.Fatalf("Verify = %s, want head %s", d, recs[0].Hash)
	}
	_, err = j.Verify(t.ctx, store.NewRunID())
	expect[*store.NotFoundError](t, err, "Verify of an unknown run")
}

func checkConcurrentOneRun(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	const writers, each = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if _, err := j.Append(t.ctx, 1, []store.Append{note(run, "x"), note(run, "y")}); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent append: %v", err)
	}
	if h := t.head(j, run); h.Seq != writers*each*2 {
		t.Fatalf("head seq = %d, want %d", h.Seq, writers*each*2)
	}
	if _, err := j.Verify(t.ctx, run); err != nil {
		t.Fatalf("chain after concurrent appends: %v", err)
	}
}

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

// checkFirstLeaseFences: appends to an unleased run pass at any epoch, so
// the first Acquire must grant an epoch above every one in the chain, or a
// writer still appending at an old epoch passes the new owner's fence and
// the chain shows epochs going backwards.
func checkFirstLeaseFences(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	t.append(j, 9, note(run, "unleased writer"))
	t.append(j, 2, note(run, "another unleased writer"))
	l := t.acquire(j, run, "owner", 30*time.Second)
	if l.Epoch <= 9 {
		t.Fatalf("first Acquire after appends at epoch 9 granted epoch %d, want above 9", l.Epoch)
	}
	for _, e := range []store.Epoch{1, 2, 9} {
		_, err := j.Append(t.ctx, e, []store.Append{note(run, "late")})
		expect[*store.FencedError](t, err, fmt.Sprintf("append at epoch %d after the first lease (epoch %d)", e, l.Epoch))
	}
	t.append(j, l.Epoch, note(run, "owner writes"))
	fresh := store.NewRunID()
	if l := t.acquire(j, fresh, "owner", 30*time.Second); l.Epoch != 1 {
		t.Errorf("first Acquire of a run with no records granted epoch %d, want 1", l.Epoch)
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

func checkDuplicateEffect(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	k := key("charge card")
	t.append(j, 1, effectStarted(run, k))
	_, err := j.Append(t.ctx, 1, []store.Append{note(run, "between"), effectStarted(run, k)})
	d := expect[*store.DuplicateEffectError](t, err, "second EffectStarted for one key")
	if d.Key != k || d.Run != run {
		t.Errorf("DuplicateEffect = %+v, want run %s key %s", d, run, k)
	}
	if h := t.head(j, run); h.Seq != 1 {
		t.Errorf("refused batch wrote: head seq %d, want 1", h.Seq)
	}
}

func checkEffectOtherRun(t *T) {
	j, _ := t.Open()
	k := key("shared")
	r1, r2 := store.NewRunID(), store.NewRunID()
	t.append(j, 1, effectStarted(r1, k))
	if _, err := j.Append(t.ctx, 1, []store.Append{effectStarted(r2, k)}); err != nil {
		t.Fatalf("same effect key in another run refused: %v", err)
	}
}

func checkDuplicateInBatch(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	k := key("twice")
	_, err := j.Append(t.ctx, 1, []store.Append{effectStarted(run, k), effectStarted(run, k)})
	expect[*store.DuplicateEffectError](t, err, "two EffectStarted for one key in one batch")
	if h := t.head(j, run); h.Seq != 0 {
		t.Errorf("refused batch wrote: head seq %d", h.Seq)
	}
}

func checkEffectOtherKinds(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	k := key("k")
	t.append(j, 1, effectStarted(run, k))
	done := store.Append{Run: run, Kind: "EffectDone", EffectKey: &k, Fields: []byte(`{"output":1}`)}
	t.append(j, 1, done, done)
	_, err := j.Append(t.ctx, 1, []store.Append{{Run: run, Kind: store.KindEffectStarted}})
	expect[*store.InvalidArgumentError](t, err, "EffectStarted without an effect key")
}

func checkBatchOneRun(t *T) {
	j, _ := t.Open()
	r1, r2 := store.NewRunID(), store.NewRunID()
	_, err := j.Append(t.ctx, 1, []store.Append{note(r1, "a"), note(r2, "b")})
	expect[*store.InvalidArgumentError](t, err, "a batch spanning two runs")
	if t.head(j, r1).Seq != 0 || t.head(j, r2).Seq != 0 {
		t.Errorf("a refused two-run batch wrote")
	}
	_, err = j.Append(t.ctx, 1, nil)
	expect[*store.InvalidArgumentError](t, err, "an empty batch")
}

func checkRejectedBatch(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	k := key("k")
	t.append(j, 1, effectStarted(run, k))
	c := store.NewCaseID()
	bad := []store.Append{
		admit(run, "order-1", "shop"),
		{Run: run, Case: c, Kind: "Note", Fields: []byte(`{}`)},
		conclude(run, "quarantined"),
		effectStarted(run, k), // refused: the whole batch must vanish
	}
	_, err := j.Append(t.ctx, 1, bad)
	expect[*store.DuplicateEffectError](t, err, "batch ending in a duplicate effect")
	if h := t.head(j, run); h.Seq != 1 {
		t.Errorf("head seq %d after refused batch, want 1", h.Seq)
	}
	if r, ok, _ := j.AdmittedAs(t.ctx, "order-1"); ok {
		t.Errorf("refused batch claimed admission key for %s", r)
	}
	if n, _ := j.CountByOutcome(t.ctx, "quarantined"); n != 0 {
		t.Errorf("refused batch reached the outcome index")
	}
	if recs, _ := j.CaseHistory(t.ctx, c, 10); len(recs) != 0 {
		t.Errorf("refused batch reached the case index")
	}
	if got, _ := j.RecentRunsFrom(t.ctx, "shop", nil, 10); len(got) != 0 {
		t.Errorf("refused batch reached the source index")
	}
}

func checkGroupIsolation(t *T) {
	j, _ := t.Open()
	k := key("k")
	dup := store.NewRunID()
	t.append(j, 1, effectStarted(dup, k))
	const n = 32
	var wg sync.WaitGroup
	errs := make([]error, n)
	runs := make([]store.RunID, n)
	for i := 0; i < n; i++ {
		runs[i] = store.NewRunID()
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if i%2 == 0 {
				_, errs[i] = j.Append(t.ctx, 1, []store.Append{effectStarted(dup, k)})
			} else {
				_, errs[i] = j.Append(t.ctx, 1, []store.Append{note(runs[i], "ok")})
			}
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if i%2 == 0 {
			var d *store.DuplicateEffectError
			if !errors.As(err, &d) {
				t.Errorf("duplicate %d: err %v, want DuplicateEffect", i, err)
			}
		} else if err != nil {
			t.Errorf("innocent append %d sank with a refused neighbour: %v", i, err)
		} else if t.head(j, runs[i]).Seq != 1 {
			t.Errorf("innocent append %d acknowledged but not stored", i)
		}
	}
}

func checkTooLarge(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	big := fmt.Sprintf(`{"blob":%q}`, strings.Repeat("x", store.MaxRecordBytes))
	_, err := j.Append(t.ctx, 1, []store.Append{note(run, "first"), {Run: run, Kind: "Note", Fields: []byte(big)}})
	expect[*store.RecordTooLargeError](t, err, "a record over 1 MiB")
	if h := t.head(j, run); h.Seq != 0 {
		t.Errorf("oversized batch wrote: head seq %d", h.Seq)
	}
}

func checkInvalidFields(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	for _, a := range []store.Append{
		{Run: run, Kind: "Note", Fields: []byte(`{"seq":5}`)},
		{Run: run, Kind: "Note", Fields: []byte(`[1]`)},
		{Run: run, Kind: "Note", Fields: []byte(`{"a":1,"a":2}`)},
		{Run: run, Kind: "", Fields: nil},
		{Run: run, Kind: "has space"},
		{Run: run, Kind: store.KindRunConcluded, Fields: []byte(`{}`)},
		{Run: run, Kind: store.KindRunSuspended, Fields: []byte(`{"awaiting":"time","until":"tomorrow"}`)},
		{Run: run, Kind: "Note", Phase: "sideways"},
	} {
		_, err := j.Append(t.ctx, 1, []store.Append{a})
		ia := expect[*store.InvalidArgumentError](t, err, fmt.Sprintf("append kind %q fields %s", a.Kind, a.Fields))
		if ia.Field == "" {
			t.Errorf("invalid argument names no field: %v", ia)
		}
	}
	if h := t.head(j, run); h.Seq != 0 {
		t.Errorf("invalid appends wrote: head seq %d", h.Seq)
	}
}

func checkSealFreezes(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	l := t.acquire(j, run, "a", 30*time.Second)
	t.append(j, l.Epoch, note(run, "work"))
	t.concludeAndSeal(j, run, l.Epoch, "succeeded")
	_, err := j.Append(t.ctx, l.Epoch, []store.Append{note(run, "after")})
	rs := expect[*store.RunSealedError](t, err, "append to a sealed run under the current epoch")
	if rs.Outcome != "succeeded" {
		t.Errorf("RunSealed.Outcome = %q", rs.Outcome)
	}
	t.append(j, 1, note(store.NewRunID(), "other runs still open"))
}

func checkFirstSealWins(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	recs := t.append(j, 1, note(run, "a"), conclude(run, "succeeded"))
	d1 := t.sealed(j, run, 1, "succeeded")
	if d1 != recs[1].Hash {
		t.Fatalf("Seal = %s, want terminal hash %s", d1, recs[1].Hash)
	}
	d2 := t.sealed(j, run, 1, "succeeded")
	if d2 != d1 {
		t.Errorf("re-seal returned %s, want %s", d2, d1)
	}
	d3, err := j.Seal(t.ctx, run, 1, "cancelled")
	if err == nil && d3 != d1 {
		t.Errorf("re-seal with another outcome changed the digest")
	}
	p, err := j.LogPositions(t.ctx, []store.RunID{run})
	if err == nil && (len(p) != 1 || p[0] == nil || p[0].Index != 0 || p[0].Leaf != d1) {
		t.Errorf("log positions after re-seal = %+v, want one leaf at 0", p)
	}
	other := store.NewRunID()
	t.append(j, 1, conclude(other, "quarantined"))
	t.sealed(j, other, 1, "quarantined")
	if p, err := j.LogPositions(t.ctx, []store.RunID{other}); err == nil && (p[0] == nil || p[0].Index != 1) {
		t.Errorf("re-seal took a log index: next seal at %+v, want index 1", p[0])
	}
}

func checkOnlyFinalSeal(t *T) {
	j, _ := t.Open()
	for _, outcome := range []string{"failed", "exhausted"} {
		run := store.NewRunID()
		t.append(j, 1, conclude(run, outcome))
		_, err := j.Seal(t.ctx, run, 1, outcome)
		expect[*store.InvalidArgumentError](t, err, "sealing a "+outcome+" run")
		t.append(j, 1, note(run, "resumed")) // still open for resume
	}
	for _, outcome := range []string{"succeeded", "quarantined", "cancelled"} {
		run := store.NewRunID()
		t.append(j, 1, conclude(run, outcome))
		t.sealed(j, run, 1, outcome)
	}
}

func checkSealNeedsConclusion(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	t.append(j, 1, note(run, "a"))
	_, err := j.Seal(t.ctx, run, 1, "succeeded")
	expect[*store.InvalidArgumentError](t, err, "sealing a run that never concluded")
	t.append(j, 1, conclude(run, "quarantined"))
	_, err = j.Seal(t.ctx, run, 1, "succeeded")
	expect[*store.InvalidArgumentError](t, err, "sealing with an outcome other than the latest conclusion")
	t.sealed(j, run, 1, "quarantined")
}

func checkSealUnknown(t *T) {
	j, _ := t.Open()
	_, err := j.Seal(t.ctx, store.NewRunID(), 1, "succeeded")
	expect[*store.NotFoundError](t, err, "sealing an unknown run")
}

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

func checkAdmitsOne(t *T) {
	j, _ := t.Open()
	r1, r2 := store.NewRunID(), store.NewRunID()
	t.append(j, 1, admit(r1, "order-42", "shop"))
	_, err := j.Append(t.ctx, 1, []store.Append{admit(r2, "order-42", "shop")})
	d := expect[*store.DuplicateAdmissionError](t, err, "second admission with one key")
	if d.Holder != r1 || d.Key != "order-42" {
		t.Errorf("DuplicateAdmission = %+v, want holder %s", d, r1)
	}
	if t.head(j, r2).Seq != 0 {
		t.Errorf("refused admission wrote its run")
	}
}

func checkAdmissionClaimed(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	if _, ok, err := j.AdmittedAs(t.ctx, "k"); err != nil || ok {
		t.Fatalf("AdmittedAs before any admission = %v, %v", ok, err)
	}
	t.append(j, 1, admit(run, "k", ""))
	got, ok, err := j.AdmittedAs(t.ctx, "k")
	if err != nil || !ok || got != run {
		t.Errorf("AdmittedAs = %s, %v, %v, want %s", got, ok, err, run)
	}
}

func checkAdmissionRefusedFree(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	_, err := j.Append(t.ctx, 1, []store.Append{admit(run, "k", ""), {Run: run, Kind: "Note", Fields: []byte(`{"seq":1}`)}})
	if err == nil {
		t.Fatalf("batch with an invalid record accepted")
	}
	if _, ok, _ := j.AdmittedAs(t.ctx, "k"); ok {
		t.Fatalf("refused admission holds its key")
	}
	t.append(j, 1, admit(store.NewRunID(), "k", ""))
}

func checkUnkeyed(t *T) {
	j, _ := t.Open()
	t.append(j, 1, admit(store.NewRunID(), "", ""))
	t.append(j, 1, admit(store.NewRunID(), "", ""))
	if _, ok, _ := j.AdmittedAs(t.ctx, "x"); ok {
		t.Errorf("an unkeyed admission claimed a key")
	}
}

func checkForget(t *T) {
	j, clk := t.Open()
	run := store.NewRunID()
	t.append(j, 1, admit(run, "k", ""))
	clk.Advance(2 * time.Second)
	cut := time.Now().Add(24 * time.Hour) // after any store's claim time
	if fc, ok := clk.(*FakeClock); ok {
		cut = fc.Now()
	}
	n, err := j.ForgetAdmissions(t.ctx, cut)
	if err != nil || n != 1 {
		t.Fatalf("ForgetAdmissions = %d, %v, want 1", n, err)
	}
	if _, ok, _ := j.AdmittedAs(t.ctx, "k"); ok {
		t.Errorf("forgotten key still held")
	}
	if recs, _ := j.Read(t.ctx, run, 1); len(recs) != 1 {
		t.Errorf("forgetting a key touched the run's records")
	}
	t.append(j, 1, admit(store.NewRunID(), "k", ""))
	if n, _ := j.ForgetAdmissions(t.ctx, time.Unix(0, 0)); n != 0 {
		t.Errorf("ForgetAdmissions(epoch 0) retired %d keys", n)
	}
}

func checkAdmissionRace(t *T) {
	j, _ := t.Open()
	const n = 16
	var wg sync.WaitGroup
	var mu sync.Mutex
	winners := 0
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := j.Append(t.ctx, 1, []store.Append{admit(store.NewRunID(), "race", "")})
			mu.Lock()
			defer mu.Unlock()
			var d *store.DuplicateAdmissionError
			switch {
			case err == nil:
				winners++
			case !errors.As(err, &d):
				t.Errorf("racing admission: %v", err)
			}
		}()
	}
	wg.Wait()
	if winners != 1 {
		t.Errorf("%d racing admissions won, want exactly 1", winners)
	}
}

func checkRecentTotalOrder(t *T) {
	j, _ := t.Open()
	const n = 11
	for i := 0; i < n; i++ {
		t.append(j, 1, note(store.NewRunID(), "same second"))
	}
	var seen []store.Activity
	var after *store.Activity
	for {
		page, err := j.RecentRuns(t.ctx, after, 3)
		if err != nil {
			t.Fatalf("RecentRuns: %v", err)
		}
		if len(page) == 0 {
			break
		}
		seen = append(seen, page...)
		after = &page[len(page)-1]
		if len(seen) > n {
			break
		}
	}
	if len(seen) != n {
		t.Fatalf("paging served %d runs, want each of %d exactly once", len(seen), n)
	}
	ids := map[store.RunID]bool{}
	for i, a := range seen {
		ids[a.Run] = true
		if i > 0 {
			p := seen[i-1]
			if a.At > p.At || (a.At == p.At && a.Run.String() >= p.Run.String()) {
				t.Fatalf("not in (at, run) descending order at %d: %+v then %+v", i, p, a)
			}
		}
	}
	if len(ids) != n {
		t.Fatalf("paging served duplicates")
	}
}

func checkRecentNewest(t *T) {
	j, clk := t.Open()
	a, b := store.NewRunID(), store.NewRunID()
	t.append(j, 1, note(a, "1"))
	clk.Advance(2 * time.Second)
	t.append(j, 1, note(b, "2"))
	clk.Advance(2 * time.Second)
	t.append(j, 1, note(a, "3"))
	got, err := j.RecentRuns(t.ctx, nil, 10)
	if err != nil || len(got) != 2 {
		t.Fatalf("RecentRuns = %v, %v", got, err)
	}
	if got[0].Run != a || got[1].Run != b || got[0].At <= got[1].At {
		t.Errorf("RecentRuns = %+v, want %s (latest append) first", got, a)
	}
}

func checkRunsByID(t *T) {
	j, clk := t.Open()
	var all []store.RunID
	for i := 0; i < 7; i++ {
		r := store.NewRunID()
		all = append(all, r)
		t.append(j, 1, note(r, "x"))
	}
	var seen []store.RunID
	var after *store.RunID
	for i := 0; i < 10; i++ {
		page, err := j.RunsByID(t.ctx, after, 2)
		if err != nil {
			t.Fatalf("RunsByID: %v", err)
		}
		if len(page) == 0 {
			break
		}
		seen = append(seen, page...)
		after = &page[len(page)-1]
		// A run appending during the walk must not move in this order.
		clk.Advance(time.Second)
		t.append(j, 1, note(all[0], "activity"))
	}
	t.runs(seen, all...) // ULIDs minted in order sort in order
}

func checkRecentFrom(t *T) {
	j, _ := t.Open()
	mine, theirs, none := store.NewRunID(), store.NewRunID(), store.NewRunID()
	t.append(j, 1, admit(mine, "a", "peer-1"))
	t.append(j, 1, admit(theirs, "b", "peer-2"))
	t.append(j, 1, admit(none, "", ""))
	got, err := j.RecentRunsFrom(t.ctx, "peer-1", nil, 10)
	if err != nil || len(got) != 1 || got[0].Run != mine {
		t.Fatalf("RecentRunsFrom(peer-1) = %v, %v, want only %s", got, err, mine)
	}
	t.append(j, 1, note(mine, "later"))
	if _, err := j.ForgetAdmissions(t.ctx, time.Now().Add(100*365*24*time.Hour)); err != nil {
		t.Fatalf("ForgetAdmissions: %v", err)
	}
	if got, _ := j.RecentRunsFrom(t.ctx, "peer-1", nil, 10); len(got) != 1 {
		t.Errorf("source forgotten with the admission key: %v", got)
	}
}

func checkCaseHistory(t *T) {
	j, _ := t.Open()
	c1, c2 := store.NewCaseID(), store.NewCaseID()
	owner, sweep, other := store.NewRunID(), store.NewRunID(), store.NewRunID()
	t.append(j, 1, store.Append{Run: owner, Case: c1, Kind: "Opened"})
	t.append(j, 1, store.Append{Run: other, Case: c2, Kind: "Opened"})
	// A sweep belongs to no case but stamps the records it writes about one.
	t.append(j, 1, note(sweep, "tick"), store.Append{Run: sweep, Case: c1, Kind: "Escalated"})
	t.append(j, 1, store.Append{Run: owner, Case: c1, Kind: "Closed"})
	got, err := j.CaseHistory(t.ctx, c1, 10)
	if err != nil {
		t.Fatalf("CaseHistory: %v", err)
	}
	var kinds []string
	for _, r := range got {
		if r.Case != c1 {
			t.Errorf("case history of %s holds a record of case %s", c1, r.Case)
		}
		kinds = append(kinds, r.Kind)
	}
	if strings.Join(kinds, ",") != "Opened,Escalated,Closed" {
		t.Errorf("case history kinds = %v, want Opened,Escalated,Closed (the sweep's record included, oldest first)", kinds)
	}
}

func checkCaseBounded(t *T) {
	j, _ := t.Open()
	c := store.NewCaseID()
	run := store.NewRunID()
	for i := 0; i < 5; i++ {
		t.append(j, 1, store.Append{Run: run, Case: c, Kind: "Step", Fields: []byte(fmt.Sprintf(`{"i":%d}`, i))})
	}
	got, err := j.CaseHistory(t.ctx, c, 3)
	if err != nil || len(got) != 3 {
		t.Fatalf("CaseHistory(limit 3) = %d records, %v", len(got), err)
	}
	for i, r := range got {
		if r.Seq != store.Seq(i+1) {
			t.Errorf("case history not oldest first: %d at %d", r.Seq, i)
		}
	}
}

func checkReadFrom(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	t.append(j, 1, note(run, "1"), note(run, "2"), note(run, "3"), note(run, "4"))
	got, err := j.Read(t.ctx, run, 3)
	if err != nil || len(got) != 2 || got[0].Seq != 3 || got[1].Seq != 4 {
		t.Fatalf("Read(from 3) = %d records, %v", len(got), err)
	}
	if got, _ := j.Read(t.ctx, run, 5); len(got) != 0 {
		t.Errorf("Read past the head returned %d records", len(got))
	}
}

func checkReadPage(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	for i := 0; i < 3; i++ {
		t.append(j, 1, note(run, "a"), note(run, "b"))
	}
	got, err := j.ReadPage(t.ctx, run, 2, 3)
	if err != nil || len(got) != 3 || got[0].Seq != 2 || got[2].Seq != 4 {
		t.Fatalf("ReadPage(from 2, limit 3) = %d records, %v", len(got), err)
	}
	var walked []store.Seq
	from := store.Seq(1)
	for {
		page, err := j.ReadPage(t.ctx, run, from, 4)
		if err != nil {
			t.Fatalf("ReadPage: %v", err)
		}
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			walked = append(walked, r.Seq)
		}
		from = page[len(page)-1].Seq + 1
	}
	if len(walked) != 6 {
		t.Errorf("paging walked %v, want 1..6", walked)
	}
}

func checkReadZero(t *T) {
	j, _ := t.Open()
	_, err := j.Read(t.ctx, store.NewRunID(), 0)
	expect[*store.InvalidArgumentError](t, err, "Read from seq 0")
	_, err = j.ReadPage(t.ctx, store.NewRunID(), 0, 5)
	expect[*store.InvalidArgumentError](t, err, "ReadPage from seq 0")
}

func checkLeaseNotStolen(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	l := t.acquire(j, run, "a", 30*time.Second)
	_, err := j.Acquire(t.ctx, run, "b", 30*time.Second)
	h := expect[*store.LeaseHeldError](t, err, "acquiring a live lease held by another")
	if h.Owner != "a" || h.Epoch != l.Epoch || h.Remaining <= 0 || h.Remaining > 30*time.Second {
		t.Errorf("LeaseHeld = %+v, want owner a epoch %d and 0 < remaining <= 30s", h, l.Epoch)
	}
}

func checkTakeover(t *T) {
	j, clk := t.Open()
	run := store.NewRunID()
	l1 := t.acquire(j, run, "a", 2*time.Second)
	clk.Advance(3 * time.Second)
	l2 := t.acquire(j, run, "b", 30*time.Second)
	if l2.Epoch <= l1.Epoch {
		t.Fatalf("takeover epoch %d, want above %d", l2.Epoch, l1.Epoch)
	}
	t.append(j, l2.Epoch, note(run, "new owner writes"))
}

func checkAcquireNeverRenews(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	t.acquire(j, run, "a", 30*time.Second)
	_, err := j.Acquire(t.ctx, run, "a", 30*time.Second)
	expect[*store.LeaseHeldError](t, err, "the holder acquiring its own live lease")
}

func checkRenew(t *T) {
	j, clk := t.Open()
	run := store.NewRunID()
	l := t.acquire(j, run, "a", 5*time.Second)
	clk.Advance(3 * time.Second)
	r, err := j.Renew(t.ctx, run, "a", l.Epoch, 10*time.Second)
	if err != nil {
		t.Fatalf("renew by the holder: %v", err)
	}
	if r.Epoch != l.Epoch || !r.Expires.After(l.Expires) {
		t.Errorf("renewal = %+v, want epoch kept and expiry extended past %v", r, l.Expires)
	}
	for _, c := range []struct {
		owner string
		epoch store.Epoch
	}{{"b", l.Epoch}, {"a", l.Epoch + 1}} {
		_, err := j.Renew(t.ctx, run, c.owner, c.epoch, 10*time.Second)
		expect[*store.LeaseNotHeldError](t, err, fmt.Sprintf("renew by (%s, %d)", c.owner, c.epoch))
	}
	clk.Advance(12 * time.Second) // lapsed
	_, err = j.Renew(t.ctx, run, "a", l.Epoch, 10*time.Second)
	expect[*store.LeaseNotHeldError](t, err, "renewing a lapsed lease")
	// A renewal never claims: the lapsed lease is still free for anyone.
	l2 := t.acquire(j, run, "b", 10*time.Second)
	if l2.Epoch != l.Epoch+1 {
		t.Errorf("epoch after lapse = %d, want %d", l2.Epoch, l.Epoch+1)
	}
	if err := j.ReleaseLease(t.ctx, run, l2.Epoch); err != nil {
		t.Fatalf("release: %v", err)
	}
	_, err = j.Renew(t.ctx, run, "b", l2.Epoch, 10*time.Second)
	expect[*store.LeaseNotHeldError](t, err, "renewing a released lease")
}

func checkReleaseFree(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	l := t.acquire(j, run, "a", time.Hour)
	if err := j.ReleaseLease(t.ctx, run, l.Epoch); err != nil {
		t.Fatalf("release: %v", err)
	}
	if err := j.ReleaseLease(t.ctx, run, l.Epoch); err != nil {
		t.Fatalf("second release: %v", err)
	}
	l2 := t.acquire(j, run, "b", time.Hour)
	if l2.Epoch != l.Epoch+1 {
		t.Errorf("acquire after release: epoch %d, want %d", l2.Epoch, l.Epoch+1)
	}
}

func checkReleaseKeepsEpoch(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	l := t.acquire(j, run, "a", time.Hour)
	if err := j.ReleaseLease(t.ctx, run, l.Epoch); err != nil {
		t.Fatalf("release: %v", err)
	}
	// The released epoch still fences: a future epoch is refused.
	_, err := j.Append(t.ctx, l.Epoch+1, []store.Append{note(run, "x")})
	expect[*store.FencedError](t, err, "append with an epoch never granted after release")
	if abandoned, _ := j.AbandonedRuns(t.ctx, 10); contains(abandoned, run) {
		t.Errorf("a released lease is listed as abandoned")
	}
}

func checkFencedRelease(t *T) {
	j, clk := t.Open()
	run := store.NewRunID()
	l1 := t.acquire(j, run, "a", 2*time.Second)
	clk.Advance(3 * time.Second)
	l2 := t.acquire(j, run, "b", 30*time.Second)
	if err := j.ReleaseLease(t.ctx, run, l1.Epoch); err != nil {
		t.Errorf("release by a fenced caller is not an error, got %v", err)
	}
	_, err := j.Acquire(t.ctx, run, "c", 30*time.Second)
	expect[*store.LeaseHeldError](t, err, "acquire after a fenced caller released")
	if _, err := j.Renew(t.ctx, run, "b", l2.Epoch, 30*time.Second); err != nil {
		t.Errorf("the new owner lost its lease to a fenced release: %v", err)
	}
}

func checkTTL(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	for _, ttl := range []time.Duration{0, -time.Second, 999 * time.Millisecond, 1 << 62} {
		_, err := j.Acquire(t.ctx, run, "a", ttl)
		expect[*store.InvalidArgumentError](t, err, fmt.Sprintf("acquire with ttl %v", ttl))
	}
	l := t.acquire(j, run, "a", 1500*time.Millisecond)
	_, err := j.Renew(t.ctx, run, "a", l.Epoch, 500*time.Millisecond)
	expect[*store.InvalidArgumentError](t, err, "renew with a sub-second ttl")
	_, err = j.Acquire(t.ctx, run, "", time.Minute)
	expect[*store.InvalidArgumentError](t, err, "acquire with a blank owner")
}

func checkAcquireRace(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	const n = 16
	var wg sync.WaitGroup
	var mu sync.Mutex
	var won []store.Lease
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			l, err := j.Acquire(t.ctx, run, fmt.Sprintf("owner-%d", i), time.Minute)
			mu.Lock()
			defer mu.Unlock()
			var h *store.LeaseHeldError
			switch {
			case err == nil:
				won = append(won, l)
			case !errors.As(err, &h):
				t.Errorf("racing acquire: %v", err)
			}
		}(i)
	}
	wg.Wait()
	if len(won) != 1 {
		t.Fatalf("%d racing acquires won, want exactly 1", len(won))
	}
}

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

func checkLimits(t *T) {
	j, _ := t.Open()
	for _, limit := range []int{0, -1, store.MaxLimit + 1} {
		_, err := j.RunsByOutcome(t.ctx, "failed", limit)
		expect[*store.InvalidArgumentError](t, err, fmt.Sprintf("RunsByOutcome limit %d", limit))
		_, err = j.RecentRuns(t.ctx, nil, limit)
		expect[*store.InvalidArgumentError](t, err, fmt.Sprintf("RecentRuns limit %d", limit))
		_, err = j.AbandonedRuns(t.ctx, limit)
		expect[*store.InvalidArgumentError](t, err, fmt.Sprintf("AbandonedRuns limit %d", limit))
		_, err = j.WaitingRuns(t.ctx, limit)
		expect[*store.InvalidArgumentError](t, err, fmt.Sprintf("WaitingRuns limit %d", limit))
		_, err = j.ReadPage(t.ctx, store.NewRunID(), 1, limit)
		expect[*store.InvalidArgumentError](t, err, fmt.Sprintf("ReadPage limit %d", limit))
		_, err = j.CaseHistory(t.ctx, store.NewCaseID(), limit)
		expect[*store.InvalidArgumentError](t, err, fmt.Sprintf("CaseHistory limit %d", limit))
		_, err = j.RunsByID(t.ctx, nil, limit)
		expect[*store.InvalidArgumentError](t, err, fmt.Sprintf("RunsByID limit %d", limit))
	}
	_, err := j.RunsByOutcome(t.ctx, "Not An Outcome", 5)
	expect[*store.InvalidArgumentError](t, err, "RunsByOutcome with a malformed outcome")
}

func checkTenant(t *T) {
	j, _ := t.Open()
	if j.Tenant() == "" {
		t.Errorf("Tenant() is empty; a store serves %q until told otherwise", store.DefaultTenant)
	}
}

func checkCaseRuns(t *T) {
	j, _ := t.Open()
	c, other := store.NewCaseID(), store.NewCaseID()
	var touched []store.RunID
	for i := 0; i < 5; i++ {
		r := store.NewRunID()
		touched = append(touched, r)
		t.append(j, 1, note(r, "unrelated"), store.Append{Run: r, Case: c, Kind: "Touched"}, store.Append{Run: r, Case: c, Kind: "Again"})
	}
	t.append(j, 1, store.Append{Run: store.NewRunID(), Case: other, Kind: "Elsewhere"})
	var got []store.RunID
	var after *store.RunID
	for i := 0; i < 10; i++ {
		page, err := j.CaseRuns(t.ctx, c, after, 2)
		if err != nil {
			t.Fatalf("CaseRuns: %v", err)
		}
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
		after = &page[len(page)-1]
	}
	t.runs(got, touched...)
}
