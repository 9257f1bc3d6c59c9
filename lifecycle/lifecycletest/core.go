package lifecycletest

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/runseal/runseal/lifecycle"
)

var coreChecks = []check{
	{"reserve.created-consumes-number", checkReserveCreated},
	{"reserve.exhausted-consumes-nothing", checkReserveExhausted},
	{"reserve.budget-counts-every-record", checkBudgetCountsEveryRecord},
	{"reserve.idempotent-key", checkReserveIdempotentKey},
	{"reserve.refusals", checkReserveRefusals},
	{"abandon.unclaimed-becomes-failed", checkAbandonUnclaimed},
	{"abandon.consumed-is-false", checkAbandonConsumed},
	{"unmanaged.unsupported", checkUnmanagedUnsupported},
	{"observe.not-found", checkObserveNotFound},
	{"claim.writes-initial-params-and-state", checkClaimWrites},
	{"claim.new-epoch", checkClaimNewEpoch},
	{"claim.stale-epoch-fenced", checkClaimStaleEpochFenced},
	{"claim.not-claimable-lease-lost", checkClaimNotClaimable},
	{"claim.rejection-writes-nothing", checkClaimRejection},
	{"renew.heartbeat", checkRenewHeartbeat},
	{"renew.stale-token-lease-lost", checkRenewStale},
	{"fail-stale.unchanged-observation-wins", checkFailStaleWins},
	{"fail-stale.changed-observation-loses", checkFailStaleChanged},
	{"fail-stale.complete-observation-compared", checkFailStaleComplete},
	{"fail-stale.no-clock-comparison", checkFailStaleNoClock},
	{"fail-stale.owner-fenced-after", checkFailStaleFencesOwner},
	{"fail-stale.not-running-false", checkFailStaleNotRunning},
	{"fail-stale.invalid-request", checkFailStaleInvalid},
	{"mutate.applies-with-exact-token", checkMutateApplies},
	{"mutate.stale-token-writes-nothing", checkMutateStale},
	{"mutate.incompatible-writes-nothing", checkMutateIncompatible},
	{"mutate.history-immutable", checkMutateImmutable},
	{"mutate.constraints-arity-checked", checkMutateConstraints},
	{"mutate.pause-ends-epoch", checkMutatePause},
	{"terminal.commits-with-exact-token", checkTerminalCommits},
	{"terminal.validation-writes-nothing", checkTerminalValidation},
	{"terminal.stale-token-writes-nothing", checkTerminalStale},
	{"terminal.incompatible-writes-nothing", checkTerminalIncompatible},
}

func checkReserveCreated(c *checker) {
	s := c.study(defaultSpec)
	seen := map[lifecycle.TrialID]bool{}
	for i := range uint64(4) {
		out := c.reserve(s, 10)
		if out.Status != lifecycle.ReservationCreated || out.Number != i || out.Trial == "" || seen[out.Trial] {
			c.Errorf("reservation %d: want created number %d with a fresh trial id, got %+v", i, i, out)
			continue
		}
		seen[out.Trial] = true
		want := lifecycle.LeaseObservation{Trial: out.Trial, State: lifecycle.TrialWaiting}
		if got := c.observe(out.Trial); !got.Equal(want) {
			c.Errorf("reserved trial: want observation %+v, got %+v", want, got)
		}
		if tr := c.inspect(out.Trial); tr.Number != i || !tr.Managed || tr.Study != s {
			c.Errorf("reserved trial: want managed number %d of study %s, got %+v", i, s, tr)
		}
	}
	if n := c.inspectStudy(s).Trials; n != 4 {
		c.Errorf("4 reservations: study counts %d trial records", n)
	}
}

func checkReserveExhausted(c *checker) {
	s := c.study(defaultSpec)
	c.reserve(s, 2)
	c.reserve(s, 2)
	for range 3 {
		out := c.reserve(s, 2)
		if out != (lifecycle.ReservationOutcome{Status: lifecycle.ReservationExhausted}) {
			c.Errorf("reserve at budget 2 with 2 records: want a bare exhausted outcome, got %+v", out)
		}
	}
	if n := c.inspectStudy(s).Trials; n != 2 {
		c.Errorf("exhausted reservations consumed numbers: study counts %d records, want 2", n)
	}
	if out := c.reserve(s, 3); out.Status != lifecycle.ReservationCreated || out.Number != 2 {
		c.Errorf("reserve after exhaustion with a larger budget: want number 2 (no gap), got %+v", out)
	}
}

func checkBudgetCountsEveryRecord(c *checker) {
	s := c.study(defaultSpec)
	abandoned := c.reserve(s, 3).Trial
	if won, err := c.b.Abandon(c.ctx, lifecycle.AbandonRequest{Trial: abandoned}); err != nil || !won {
		c.Fatalf("abandon: got %v, %v", won, err)
	}
	tok := c.claim(c.reserve(s, 3).Trial, "owner")
	c.ok(c.b.Terminal(c.ctx, lifecycle.TerminalRequest{Owner: tok, State: lifecycle.TrialFailed}), "terminal failed")
	c.reserve(s, 3)
	if out := c.reserve(s, 3); out.Status != lifecycle.ReservationExhausted {
		c.Errorf("budget 3 with an abandoned, a failed and a waiting record: want exhausted, got %+v", out)
	}
	if u, ok := c.b.(UnmanagedTrialCreator); ok {
		_, err := u.CreateUnmanagedTrial(c.ctx, s, lifecycle.TrialComplete)
		c.ok(err, "create unmanaged trial")
		if out := c.reserve(s, 4); out.Status != lifecycle.ReservationExhausted {
			c.Errorf("budget 4 with 3 managed and 1 unmanaged record: want exhausted, got %+v", out)
		}
	}
}

func checkReserveIdempotentKey(c *checker) {
	s := c.study(defaultSpec)
	req := lifecycle.ReserveAndCreateRequest{Study: s, MaxTrials: 2, Key: "worker-7/attempt-1"}
	first, err := c.b.ReserveAndCreateIfBudget(c.ctx, req)
	c.ok(err, "reserve with key")
	again, err := c.b.ReserveAndCreateIfBudget(c.ctx, req)
	c.ok(err, "replay reserve with key")
	if again != first {
		c.Errorf("replayed key: want %+v, got %+v", first, again)
	}
	c.reserve(s, 2) // fills the budget
	req.MaxTrials = 1
	late, err := c.b.ReserveAndCreateIfBudget(c.ctx, req)
	c.ok(err, "replay after the budget is full")
	if late != first {
		c.Errorf("replayed key after the budget filled: want the original %+v, got %+v", first, late)
	}
	if n := c.inspectStudy(s).Trials; n != 2 {
		c.Errorf("replays consumed numbers: study counts %d records, want 2", n)
	}
	other := c.study(defaultSpec)
	req.Study, req.MaxTrials = other, 5
	there, err := c.b.ReserveAndCreateIfBudget(c.ctx, req)
	c.ok(err, "same key in another study")
	if there.Status != lifecycle.ReservationCreated || there.Trial == first.Trial {
		c.Errorf("a key is scoped to its study: want a new trial in the other study, got %+v", there)
	}
}

func checkReserveRefusals(c *checker) {
	s := c.study(defaultSpec)
	_, err := c.b.ReserveAndCreateIfBudget(c.ctx, lifecycle.ReserveAndCreateRequest{Study: "no-such-study", MaxTrials: 5})
	c.wantKind(err, lifecycle.KindNotFound, "reserve in an unknown study")
	_, err = c.b.ReserveAndCreateIfBudget(c.ctx, lifecycle.ReserveAndCreateRequest{Study: s, MaxTrials: 0})
	c.wantKind(err, lifecycle.KindInvalid, "reserve with a zero budget")
	if n := c.inspectStudy(s).Trials; n != 0 {
		c.Errorf("refused reservations consumed numbers: %d records", n)
	}
}

func checkAbandonUnclaimed(c *checker) {
	s := c.study(defaultSpec)
	tr := c.waiting(s)
	won, err := c.b.Abandon(c.ctx, lifecycle.AbandonRequest{Trial: tr})
	c.ok(err, "abandon")
	if !won {
		c.Errorf("abandon of a waiting trial: want true")
	}
	if got := c.observe(tr); got.State != lifecycle.TrialFailed {
		c.Errorf("abandoned trial: want failed, got %s", got.State)
	}
	won, err = c.b.Abandon(c.ctx, lifecycle.AbandonRequest{Trial: tr})
	c.ok(err, "abandon again")
	if won {
		c.Errorf("second abandon of one reservation: want false, got true")
	}
	_, err = c.b.Claim(c.ctx, lifecycle.ClaimRequest{Trial: tr, Owner: "late"})
	c.wantKind(err, lifecycle.KindLeaseLost, "claim of an abandoned trial")
	_, err = c.b.Abandon(c.ctx, lifecycle.AbandonRequest{Trial: "no-such-trial"})
	c.wantKind(err, lifecycle.KindNotFound, "abandon of an unknown trial")
}

func checkAbandonConsumed(c *checker) {
	s := c.study(defaultSpec)
	running := c.running(s, "owner")
	paused := c.running(s, "owner")
	c.pause(paused)
	done := c.running(s, "owner")
	c.ok(c.b.Terminal(c.ctx, complete(done, 1)), "terminal")
	for _, tc := range []struct {
		name  string
		trial lifecycle.TrialID
	}{{"running", running.Trial}, {"paused", paused.Trial}, {"complete", done.Trial}} {
		before := c.snapshot(s, tc.trial)
		won, err := c.b.Abandon(c.ctx, lifecycle.AbandonRequest{Trial: tc.trial})
		if err != nil || won {
			c.Errorf("abandon of a %s trial: want false, got %v, %v", tc.name, won, err)
		}
		c.unchanged(before, "abandon of a "+tc.name+" trial", s, tc.trial)
	}
}

func checkUnmanagedUnsupported(c *checker) {
	u, ok := c.b.(UnmanagedTrialCreator)
	if !ok {
		c.Skipf("backend cannot create unmanaged trials")
	}
	s := c.study(defaultSpec)
	waiting, err := u.CreateUnmanagedTrial(c.ctx, s, lifecycle.TrialWaiting)
	c.ok(err, "create unmanaged waiting trial")
	running, err := u.CreateUnmanagedTrial(c.ctx, s, lifecycle.TrialRunning)
	c.ok(err, "create unmanaged running trial")
	done, err := u.CreateUnmanagedTrial(c.ctx, s, lifecycle.TrialComplete)
	c.ok(err, "create unmanaged complete trial")
	before := c.snapshot(s, waiting, running, done)
	_, err = c.b.Abandon(c.ctx, lifecycle.AbandonRequest{Trial: waiting})
	c.wantKind(err, lifecycle.KindUnsupported, "abandon of an unmanaged trial")
	_, err = c.b.Observe(c.ctx, running)
	c.wantKind(err, lifecycle.KindUnsupported, "observe of an unmanaged trial")
	_, err = c.b.Claim(c.ctx, lifecycle.ClaimRequest{Trial: waiting, Owner: "owner"})
	c.wantKind(err, lifecycle.KindUnsupported, "claim of an unmanaged trial")
	_, err = c.b.FailStale(c.ctx, lifecycle.FailStaleRequest{
		Observed: lifecycle.LeaseObservation{Trial: running, State: lifecycle.TrialRunning},
		Grace:    time.Second, Intent: testIntent,
	})
	c.wantKind(err, lifecycle.KindUnsupported, "fail_stale of an unmanaged trial")
	err = c.b.PutFinalizedState(c.ctx, lifecycle.FinalizedStateRequest{Trial: done, State: trialBlob("x", "k", 1, "v")})
	c.wantKind(err, lifecycle.KindUnsupported, "put_finalized_state on an unmanaged trial")
	c.unchanged(before, "operations on unmanaged trials", s, waiting, running, done)
}

func checkObserveNotFound(c *checker) {
	_, err := c.b.Observe(c.ctx, "no-such-trial")
	c.wantKind(err, lifecycle.KindNotFound, "observe of an unknown trial")
}

func checkClaimWrites(c *checker) {
	s := c.study(defaultSpec)
	tr := c.waiting(s)
	at := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	param := lifecycle.Param{Name: "lr", Value: 0.01, Distribution: json.RawMessage(`{"name":"FloatDistribution","low":0.001,"high":1}`)}
	blob := trialBlob("sampler", "tpe.trial", 1, "seed=7")
	tok, err := c.b.Claim(c.ctx, lifecycle.ClaimRequest{
		Trial: tr, Owner: "worker-a", Params: []lifecycle.Param{param},
		States: []lifecycle.StateBlob{blob, constraintsBlob(0, -1)}, HeartbeatAt: at,
	})
	c.ok(err, "claim")
	if tok != (lifecycle.TrialOwnerToken{Trial: tr, Owner: "worker-a", Epoch: tok.Epoch}) || tok.Epoch == 0 {
		c.Errorf("claim token: want trial %s owner worker-a and a positive epoch, got %+v", tr, tok)
	}
	want := lifecycle.LeaseObservation{Trial: tr, State: lifecycle.TrialRunning, Owner: "worker-a", Epoch: tok.Epoch, HeartbeatAt: at}
	if got := c.observe(tr); !got.Equal(want) {
		c.Errorf("claimed trial: want observation %+v, got %+v", want, got)
	}
	got := c.inspect(tr)
	if len(got.Params) != 1 || got.Params[0].Name != "lr" || got.Params[0].Value != 0.01 {
		c.Errorf("claim did not write its initial parameter: %+v", got.Params)
	}
	if !hasBlob(got.States, blob) || !hasBlob(got.States, constraintsBlob(0, -1)) {
		c.Errorf("claim did not write its initial state: %+v", got.States)
	}
}

func hasBlob(blobs []lifecycle.StateBlob, want lifecycle.StateBlob) bool {
	return slices.ContainsFunc(blobs, func(b lifecycle.StateBlob) bool {
		return b.Scope == want.Scope && b.Name == want.Name && b.Kind == want.Kind &&
			b.Version == want.Version && string(b.Data) == string(want.Data)
	})
}

func checkClaimNewEpoch(c *checker) {
	s := c.study(defaultSpec)
	tr := c.waiting(s)
	prev := c.observe(tr).Epoch
	for i, owner := range []string{"a", "b", "a", "a"} {
		tok := c.claim(tr, owner)
		obs := c.observe(tr)
		if tok.Epoch <= prev || obs.Epoch != tok.Epoch {
			c.Errorf("claim %d by %s: want an epoch above %d in token and observation, got token %d, observed %d", i, owner, prev, tok.Epoch, obs.Epoch)
		}
		prev = obs.Epoch
		c.pause(tok)
		if e := c.observe(tr).Epoch; e != prev {
			c.Errorf("pause changed the epoch from %d to %d", prev, e)
		}
	}
}

func checkClaimStaleEpochFenced(c *checker) {
	s := c.study(defaultSpec)
	tr := c.waiting(s)
	old := c.claim(tr, "same-owner")
	c.pause(old)
	cur := c.claim(tr, "same-owner")
	before := c.snapshot(s, tr)
	_, err := c.b.Renew(c.ctx, lifecycle.RenewRequest{Owner: old})
	c.wantKind(err, lifecycle.KindLeaseLost, "renew with the previous epoch's token of the same owner")
	err = c.b.FencedMutate(c.ctx, lifecycle.FencedMutationRequest{Owner: old, Params: []lifecycle.Param{{Name: "x", Value: 1}}})
	c.wantKind(err, lifecycle.KindLeaseLost, "mutate with the previous epoch's token of the same owner")
	err = c.b.Terminal(c.ctx, complete(old, 1))
	c.wantKind(err, lifecycle.KindLeaseLost, "terminal with the previous epoch's token of the same owner")
	c.unchanged(before, "operations under a previous epoch", s, tr)
	_, err = c.b.Renew(c.ctx, lifecycle.RenewRequest{Owner: cur})
	c.ok(err, "renew with the current token")
}

func checkClaimNotClaimable(c *checker) {
	s := c.study(defaultSpec)
	running := c.running(s, "a")
	done := c.running(s, "a")
	c.ok(c.b.Terminal(c.ctx, complete(done, 1)), "terminal")
	for _, tc := range []struct {
		name  string
		trial lifecycle.TrialID
	}{{"running", running.Trial}, {"complete", done.Trial}} {
		before := c.snapshot(s, tc.trial)
		_, err := c.b.Claim(c.ctx, lifecycle.ClaimRequest{Trial: tc.trial, Owner: "b"})
		c.wantKind(err, lifecycle.KindLeaseLost, "claim of a "+tc.name+" trial")
		c.unchanged(before, "claim of a "+tc.name+" trial", s, tc.trial)
	}
	_, err := c.b.Claim(c.ctx, lifecycle.ClaimRequest{Trial: "no-such-trial", Owner: "b"})
	c.wantKind(err, lifecycle.KindNotFound, "claim of an unknown trial")
}

func checkClaimRejection(c *checker) {
	s := c.study(defaultSpec)
	tr := c.waiting(s)
	tok, err := c.b.Claim(c.ctx, lifecycle.ClaimRequest{
		Trial: tr, Owner: "a", Params: []lifecycle.Param{{Name: "x", Value: 1}},
		States: []lifecycle.StateBlob{trialBlob("sampler", "k1", 1, "one")},
	})
	c.ok(err, "claim")
	c.pause(tok)
	for _, tc := range []struct {
		name string
		req  lifecycle.ClaimRequest
		kind lifecycle.Kind
	}{
		{"changed parameter", lifecycle.ClaimRequest{Params: []lifecycle.Param{{Name: "y", Value: 5}, {Name: "x", Value: 2}}}, lifecycle.KindConflict},
		{"state of another kind", lifecycle.ClaimRequest{States: []lifecycle.StateBlob{trialBlob("fresh", "k", 1, "v"), trialBlob("sampler", "k2", 1, "two")}}, lifecycle.KindIncompatible},
		{"state of another version", lifecycle.ClaimRequest{States: []lifecycle.StateBlob{trialBlob("sampler", "k1", 2, "two")}}, lifecycle.KindIncompatible},
		{"constraints of the wrong arity", lifecycle.ClaimRequest{States: []lifecycle.StateBlob{constraintsBlob(1)}}, lifecycle.KindInvalid},
		{"study-scope state", lifecycle.ClaimRequest{States: []lifecycle.StateBlob{studyBlob("seam", "k", 1, "v")}}, lifecycle.KindInvalid},
		{"non-finite parameter", lifecycle.ClaimRequest{Params: []lifecycle.Param{{Name: "z", Value: math.Inf(1)}}}, lifecycle.KindInvalid},
		{"empty owner", lifecycle.ClaimRequest{Owner: "-"}, lifecycle.KindInvalid},
	} {
		req := tc.req
		req.Trial = tr
		switch req.Owner {
		case "":
			req.Owner = "b"
		case "-":
			req.Owner = ""
		}
		before := c.snapshot(s, tr)
		_, err := c.b.Claim(c.ctx, req)
		c.wantKind(err, tc.kind, "claim with "+tc.name)
		c.unchanged(before, "claim with "+tc.name, s, tr)
	}
	if got := c.observe(tr); got.State != lifecycle.TrialPaused || got.Epoch != tok.Epoch {
		c.Errorf("after refused claims: want the trial paused at epoch %d, got %+v", tok.Epoch, got)
	}
}

func checkRenewHeartbeat(c *checker) {
	s := c.study(defaultSpec)
	tok := c.running(s, "a")
	for i := uint64(1); i <= 3; i++ {
		at := time.Date(2031, 1, 1, 0, 0, int(i), 0, time.UTC)
		obs, err := c.b.Renew(c.ctx, lifecycle.RenewRequest{Owner: tok, HeartbeatAt: at})
		c.ok(err, "renew")
		want := lifecycle.LeaseObservation{Trial: tok.Trial, State: lifecycle.TrialRunning, Owner: "a", Epoch: tok.Epoch, HeartbeatSeq: i, HeartbeatAt: at}
		if !obs.Equal(want) {
			c.Errorf("renew %d: want %+v, got %+v", i, want, obs)
		}
		if got := c.observe(tok.Trial); !got.Equal(obs) {
			c.Errorf("renew %d returned %+v but observe reads %+v", i, obs, got)
		}
	}
}

func checkRenewStale(c *checker) {
	s := c.study(defaultSpec)
	tok := c.running(s, "a")
	other := c.running(s, "a")
	for _, tc := range []struct {
		name string
		tok  lifecycle.TrialOwnerToken
	}{
		{"another owner", lifecycle.TrialOwnerToken{Trial: tok.Trial, Owner: "b", Epoch: tok.Epoch}},
		{"an older epoch", lifecycle.TrialOwnerToken{Trial: tok.Trial, Owner: "a", Epoch: tok.Epoch - 1}},
		{"a future epoch", lifecycle.TrialOwnerToken{Trial: tok.Trial, Owner: "a", Epoch: tok.Epoch + 1}},
		{"another trial's epoch", lifecycle.TrialOwnerToken{Trial: tok.Trial, Owner: "a", Epoch: other.Epoch + 7}},
	} {
		before := c.snapshot(s, tok.Trial)
		_, err := c.b.Renew(c.ctx, lifecycle.RenewRequest{Owner: tc.tok})
		c.wantKind(err, lifecycle.KindLeaseLost, "renew with "+tc.name)
		c.unchanged(before, "renew with "+tc.name, s, tok.Trial)
	}
	c.ok(c.b.Terminal(c.ctx, complete(tok, 1)), "terminal")
	_, err := c.b.Renew(c.ctx, lifecycle.RenewRequest{Owner: tok})
	c.wantKind(err, lifecycle.KindLeaseLost, "renew after the terminal outcome")
}

func checkFailStaleWins(c *checker) {
	s := c.study(defaultSpec)
	tok := c.running(s, "a")
	obs := c.observe(tok.Trial)
	intent := lifecycle.FinalizationIntent{Kind: "stale-failure", Data: json.RawMessage(`{"retry":true}`)}
	won, err := c.b.FailStale(c.ctx, lifecycle.FailStaleRequest{Observed: obs, Grace: 30 * time.Second, Intent: intent})
	c.ok(err, "fail_stale")
	if !won {
		c.Fatalf("fail_stale with the exact current observation: want true")
	}
	if got := c.observe(tok.Trial); got.State != lifecycle.TrialFailed || got.Epoch != obs.Epoch {
		c.Errorf("after fail_stale: want failed at epoch %d, got %+v", obs.Epoch, got)
	}
	key := lifecycle.OutboxKey{Trial: tok.Trial, Epoch: obs.Epoch}
	rec := c.outbox(key)
	if rec.Phase != lifecycle.PhaseInitial || rec.Cause != lifecycle.CauseStale || rec.Outcome != lifecycle.TrialFailed ||
		rec.Study != s || rec.Intent.Kind != intent.Kind || string(rec.Intent.Data) != string(intent.Data) || rec.Grace != 30*time.Second {
		c.Errorf("fail_stale outbox record: want initial, stale, failed, with the request's intent and grace; got %+v", rec)
	}
	before := c.snapshot(s, tok.Trial)
	won, err = c.b.FailStale(c.ctx, lifecycle.FailStaleRequest{Observed: obs, Grace: time.Second, Intent: intent})
	if err != nil || won {
		c.Errorf("second fail_stale with the same observation: want false, got %v, %v", won, err)
	}
	c.unchanged(before, "second fail_stale", s, tok.Trial)
}

func checkFailStaleChanged(c *checker) {
	s := c.study(defaultSpec)
	for _, tc := range []struct {
		name   string
		change func(lifecycle.TrialOwnerToken)
	}{
		{"renewed", func(tok lifecycle.TrialOwnerToken) {
			_, err := c.b.Renew(c.ctx, lifecycle.RenewRequest{Owner: tok})
			c.ok(err, "renew")
		}},
		{"paused", func(tok lifecycle.TrialOwnerToken) { c.pause(tok) }},
		{"re-claimed", func(tok lifecycle.TrialOwnerToken) { c.pause(tok); c.claim(tok.Trial, tok.Owner) }},
		{"completed", func(tok lifecycle.TrialOwnerToken) { c.ok(c.b.Terminal(c.ctx, complete(tok, 1)), "terminal") }},
	} {
		tok := c.running(s, "a")
		obs := c.observe(tok.Trial)
		tc.change(tok)
		before := c.snapshot(s, tok.Trial)
		won, err := c.b.FailStale(c.ctx, lifecycle.FailStaleRequest{Observed: obs, Grace: time.Second, Intent: testIntent})
		if err != nil || won {
			c.Errorf("fail_stale after the owner %s: want false, got %v, %v", tc.name, won, err)
		}
		c.unchanged(before, "fail_stale after the owner "+tc.name, s, tok.Trial)
	}
}

func checkFailStaleComplete(c *checker) {
	s := c.study(defaultSpec)
	tok := c.running(s, "a")
	_, err := c.b.Renew(c.ctx, lifecycle.RenewRequest{Owner: tok, HeartbeatAt: time.Date(2030, 5, 5, 5, 5, 5, 5, time.UTC)})
	c.ok(err, "renew")
	obs := c.observe(tok.Trial)
	for _, tc := range []struct {
		name string
		edit func(*lifecycle.LeaseObservation)
	}{
		{"owner", func(o *lifecycle.LeaseObservation) { o.Owner = "b" }},
		{"older epoch", func(o *lifecycle.LeaseObservation) { o.Epoch-- }},
		{"newer epoch", func(o *lifecycle.LeaseObservation) { o.Epoch++ }},
		{"heartbeat sequence", func(o *lifecycle.LeaseObservation) { o.HeartbeatSeq++ }},
		{"heartbeat timestamp", func(o *lifecycle.LeaseObservation) { o.HeartbeatAt = o.HeartbeatAt.Add(time.Nanosecond) }},
		{"state", func(o *lifecycle.LeaseObservation) { o.State = lifecycle.TrialPaused }},
	} {
		edited := obs
		tc.edit(&edited)
		before := c.snapshot(s, tok.Trial)
		won, err := c.b.FailStale(c.ctx, lifecycle.FailStaleRequest{Observed: edited, Grace: time.Second, Intent: testIntent})
		if err != nil || won {
			c.Errorf("fail_stale with a different %s: want false, got %v, %v", tc.name, won, err)
		}
		c.unchanged(before, "fail_stale with a different "+tc.name, s, tok.Trial)
	}
}

// checkFailStaleNoClock gives the store observations whose heartbeat
// timestamps, read against the sweeper's clock, would look fresh or even
// in the future. A store that judged staleness by comparing clocks would
// refuse; the contract says only the observation counts.
func checkFailStaleNoClock(c *checker) {
	s := c.study(defaultSpec)
	for _, tc := range []struct {
		name  string
		at    time.Time
		grace time.Duration
	}{
		{"owner clock an hour ahead", time.Now().Add(time.Hour), time.Millisecond},
		{"heartbeat just now, grace a day", time.Now(), 24 * time.Hour},
		{"no timestamp", time.Time{}, time.Millisecond},
	} {
		tok := c.running(s, "a")
		_, err := c.b.Renew(c.ctx, lifecycle.RenewRequest{Owner: tok, HeartbeatAt: tc.at})
		c.ok(err, "renew")
		obs := c.observe(tok.Trial)
		won, err := c.b.FailStale(c.ctx, lifecycle.FailStaleRequest{Observed: obs, Grace: tc.grace, Intent: testIntent})
		if err != nil || !won {
			c.Errorf("fail_stale with an unchanged observation (%s): want true, got %v, %v", tc.name, won, err)
		}
	}
}

func checkFailStaleFencesOwner(c *checker) {
	s := c.study(defaultSpec)
	tok := c.running(s, "a")
	won, err := c.b.FailStale(c.ctx, lifecycle.FailStaleRequest{Observed: c.observe(tok.Trial), Grace: time.Second, Intent: testIntent})
	if err != nil || !won {
		c.Fatalf("fail_stale: want true, got %v, %v", won, err)
	}
	before := c.snapshot(s, tok.Trial)
	_, err = c.b.Renew(c.ctx, lifecycle.RenewRequest{Owner: tok})
	c.wantKind(err, lifecycle.KindLeaseLost, "renew by the failed owner")
	err = c.b.FencedMutate(c.ctx, lifecycle.FencedMutationRequest{Owner: tok, Intermediate: []lifecycle.IntermediateValue{{Step: 1, Value: 1}}})
	c.wantKind(err, lifecycle.KindLeaseLost, "mutate by the failed owner")
	err = c.b.Terminal(c.ctx, complete(tok, 1))
	c.wantKind(err, lifecycle.KindLeaseLost, "terminal by the failed owner")
	_, err = c.b.TerminalWithIntent(c.ctx, complete(tok, 1), testIntent)
	c.wantKind(err, lifecycle.KindLeaseLost, "terminal with intent by the failed owner")
	c.unchanged(before, "the failed owner's late writes", s, tok.Trial)
}

func checkFailStaleNotRunning(c *checker) {
	s := c.study(defaultSpec)
	waiting := c.waiting(s)
	paused := c.running(s, "a")
	c.pause(paused)
	for _, tr := range []lifecycle.TrialID{waiting, paused.Trial} {
		obs := c.observe(tr)
		before := c.snapshot(s, tr)
		won, err := c.b.FailStale(c.ctx, lifecycle.FailStaleRequest{Observed: obs, Grace: time.Second, Intent: testIntent})
		if err != nil || won {
			c.Errorf("fail_stale of a %s trial: want false, got %v, %v", obs.State, won, err)
		}
		c.unchanged(before, fmt.Sprintf("fail_stale of a %s trial", obs.State), s, tr)
	}
	_, err := c.b.FailStale(c.ctx, lifecycle.FailStaleRequest{
		Observed: lifecycle.LeaseObservation{Trial: "no-such-trial", State: lifecycle.TrialRunning}, Grace: time.Second, Intent: testIntent,
	})
	c.wantKind(err, lifecycle.KindNotFound, "fail_stale of an unknown trial")
}

func checkFailStaleInvalid(c *checker) {
	s := c.study(defaultSpec)
	tok := c.running(s, "a")
	obs := c.observe(tok.Trial)
	before := c.snapshot(s, tok.Trial)
	for _, tc := range []struct {
		name string
		req  lifecycle.FailStaleRequest
	}{
		{"zero grace", lifecycle.FailStaleRequest{Observed: obs, Intent: testIntent}},
		{"negative grace", lifecycle.FailStaleRequest{Observed: obs, Grace: -time.Second, Intent: testIntent}},
		{"no intent", lifecycle.FailStaleRequest{Observed: obs, Grace: time.Second}},
	} {
		_, err := c.b.FailStale(c.ctx, tc.req)
		c.wantKind(err, lifecycle.KindInvalid, "fail_stale with "+tc.name)
	}
	c.unchanged(before, "invalid fail_stale requests", s, tok.Trial)
}

func checkMutateApplies(c *checker) {
	s := c.study(defaultSpec)
	tok := c.running(s, "a")
	err := c.b.FencedMutate(c.ctx, lifecycle.FencedMutationRequest{
		Owner:        tok,
		Params:       []lifecycle.Param{{Name: "depth", Value: 3}},
		Intermediate: []lifecycle.IntermediateValue{{Step: 0, Value: 0.5}, {Step: 1, Value: 0.25}},
		Attrs:        map[string]json.RawMessage{"note": json.RawMessage(`"hello"`)},
		States:       []lifecycle.StateBlob{trialBlob("model", "ckpt", 1, "bytes"), constraintsBlob(0.5, -2)},
	})
	c.ok(err, "fenced mutate")
	got := c.inspect(tok.Trial)
	if len(got.Params) != 1 || got.Params[0].Name != "depth" || got.Params[0].Value != 3 {
		c.Errorf("mutate did not write its parameter: %+v", got.Params)
	}
	if len(got.Intermediate) != 2 || got.Intermediate[0] != (lifecycle.IntermediateValue{Step: 0, Value: 0.5}) || got.Intermediate[1] != (lifecycle.IntermediateValue{Step: 1, Value: 0.25}) {
		c.Errorf("mutate did not write its intermediate values: %+v", got.Intermediate)
	}
	if string(got.Attrs["note"]) != `"hello"` {
		c.Errorf("mutate did not write its attribute: %+v", got.Attrs)
	}
	if !hasBlob(got.States, trialBlob("model", "ckpt", 1, "bytes")) || !hasBlob(got.States, constraintsBlob(0.5, -2)) {
		c.Errorf("mutate did not write its state: %+v", got.States)
	}
	if obs := c.observe(tok.Trial); obs.State != lifecycle.TrialRunning || obs.Owner != "a" || obs.Epoch != tok.Epoch {
		c.Errorf("mutate changed the lease: %+v", obs)
	}
}

func checkMutateStale(c *checker) {
	s := c.study(defaultSpec)
	old := c.running(s, "a")
	c.pause(old)
	c.claim(old.Trial, "b")
	before := c.snapshot(s, old.Trial)
	err := c.b.FencedMutate(c.ctx, lifecycle.FencedMutationRequest{
		Owner: old, Params: []lifecycle.Param{{Name: "x", Value: 1}}, States: []lifecycle.StateBlob{trialBlob("m", "k", 1, "v")},
	})
	c.wantKind(err, lifecycle.KindLeaseLost, "mutate with a stale token")
	c.unchanged(before, "mutate with a stale token", s, old.Trial)
}

func checkMutateIncompatible(c *checker) {
	s := c.study(defaultSpec)
	tok := c.running(s, "a")
	c.ok(c.b.FencedMutate(c.ctx, lifecycle.FencedMutationRequest{
		Owner: tok, States: []lifecycle.StateBlob{trialBlob("a", "k1", 1, "a1"), trialBlob("b", "k1", 1, "b1")},
	}), "seed state")
	before := c.snapshot(s, tok.Trial)
	for _, tc := range []struct {
		name string
		bad  lifecycle.StateBlob
	}{
		{"kind", trialBlob("b", "k2", 1, "b2")},
		{"version", trialBlob("b", "k1", 2, "b2")},
	} {
		err := c.b.FencedMutate(c.ctx, lifecycle.FencedMutationRequest{
			Owner:        tok,
			Params:       []lifecycle.Param{{Name: "z", Value: 9}},
			Intermediate: []lifecycle.IntermediateValue{{Step: 4, Value: 4}},
			States:       []lifecycle.StateBlob{trialBlob("a", "k1", 1, "a2"), trialBlob("new", "k", 1, "n"), tc.bad},
		})
		c.wantKind(err, lifecycle.KindIncompatible, "mutate replacing a blob of another "+tc.name)
		c.unchanged(before, "mutate replacing a blob of another "+tc.name, s, tok.Trial)
	}
}

func checkMutateImmutable(c *checker) {
	s := c.study(defaultSpec)
	tok := c.running(s, "a")
	c.ok(c.b.FencedMutate(c.ctx, lifecycle.FencedMutationRequest{
		Owner: tok, Params: []lifecycle.Param{{Name: "x", Value: 1}}, Intermediate: []lifecycle.IntermediateValue{{Step: 0, Value: 0.5}},
	}), "first write")
	c.ok(c.b.FencedMutate(c.ctx, lifecycle.FencedMutationRequest{
		Owner: tok, Params: []lifecycle.Param{{Name: "x", Value: 1}}, Intermediate: []lifecycle.IntermediateValue{{Step: 0, Value: 0.5}},
	}), "identical rewrite")
	before := c.snapshot(s, tok.Trial)
	err := c.b.FencedMutate(c.ctx, lifecycle.FencedMutationRequest{Owner: tok, Params: []lifecycle.Param{{Name: "x", Value: 2}}})
	c.wantKind(err, lifecycle.KindConflict, "changing a set parameter")
	err = c.b.FencedMutate(c.ctx, lifecycle.FencedMutationRequest{Owner: tok, Intermediate: []lifecycle.IntermediateValue{{Step: 1, Value: 1}, {Step: 0, Value: 0.75}}})
	c.wantKind(err, lifecycle.KindConflict, "changing a reported step")
	c.unchanged(before, "refused history rewrites", s, tok.Trial)
}

func checkMutateConstraints(c *checker) {
	s := c.study(defaultSpec)
	tok := c.running(s, "a")
	before := c.snapshot(s, tok.Trial)
	for _, tc := range []struct {
		name string
		blob lifecycle.StateBlob
	}{
		{"too few values", constraintsBlob(1)},
		{"too many values", constraintsBlob(1, 2, 3)},
		{"another kind", trialBlob(lifecycle.ConstraintsStateName, "other", 1, "[1,2]")},
		{"not an array", trialBlob(lifecycle.ConstraintsStateName, lifecycle.ConstraintsKind, 1, `{"a":1}`)},
	} {
		err := c.b.FencedMutate(c.ctx, lifecycle.FencedMutationRequest{Owner: tok, States: []lifecycle.StateBlob{tc.blob}})
		c.wantKind(err, lifecycle.KindInvalid, "constraint state with "+tc.name)
	}
	c.unchanged(before, "refused constraint state", s, tok.Trial)
	c.ok(c.b.FencedMutate(c.ctx, lifecycle.FencedMutationRequest{Owner: tok, States: []lifecycle.StateBlob{constraintsBlob(1, 2)}}), "constraint state of the right arity")
	plain := c.study(lifecycle.StudySpec{Objectives: 1})
	ptok := c.running(plain, "a")
	err := c.b.FencedMutate(c.ctx, lifecycle.FencedMutationRequest{Owner: ptok, States: []lifecycle.StateBlob{constraintsBlob()}})
	c.wantKind(err, lifecycle.KindInvalid, "constraint state in a study without constraints")
}

func checkMutatePause(c *checker) {
	s := c.study(defaultSpec)
	tok := c.running(s, "a")
	c.pause(tok)
	obs := c.observe(tok.Trial)
	if obs.State != lifecycle.TrialPaused || obs.Owner != "" || obs.Epoch != tok.Epoch {
		c.Errorf("after pause: want paused, no owner, epoch %d; got %+v", tok.Epoch, obs)
	}
	_, err := c.b.Renew(c.ctx, lifecycle.RenewRequest{Owner: tok})
	c.wantKind(err, lifecycle.KindLeaseLost, "renew after pause")
	next := c.claim(tok.Trial, "b")
	if next.Epoch <= tok.Epoch {
		c.Errorf("claim after pause: want an epoch above %d, got %d", tok.Epoch, next.Epoch)
	}
}

func checkTerminalCommits(c *checker) {
	s := c.study(lifecycle.StudySpec{Objectives: 2})
	for _, tc := range []struct {
		state  lifecycle.TrialState
		values []float64
	}{
		{lifecycle.TrialComplete, []float64{1.5, -2}},
		{lifecycle.TrialPruned, nil},
		{lifecycle.TrialPruned, []float64{0, 0}},
		{lifecycle.TrialFailed, nil},
	} {
		tok := c.running(s, "a")
		c.ok(c.b.Terminal(c.ctx, lifecycle.TerminalRequest{Owner: tok, State: tc.state, Values: tc.values}), "terminal "+string(tc.state))
		obs := c.observe(tok.Trial)
		if obs.State != tc.state || obs.Owner != "" || obs.Epoch != tok.Epoch {
			c.Errorf("after terminal %s: want that state, no owner, epoch %d; got %+v", tc.state, tok.Epoch, obs)
		}
		if got := c.inspect(tok.Trial).Values; !slices.Equal(got, tc.values) {
			c.Errorf("terminal %s: want values %v, got %v", tc.state, tc.values, got)
		}
		if _, ok, err := c.b.GetOutbox(c.ctx, lifecycle.OutboxKey{Trial: tok.Trial, Epoch: tok.Epoch}); err != nil || ok {
			c.Errorf("plain terminal wrote an outbox record (ok=%v, err=%v)", ok, err)
		}
		err := c.b.Terminal(c.ctx, lifecycle.TerminalRequest{Owner: tok, State: tc.state, Values: tc.values})
		c.wantKind(err, lifecycle.KindLeaseLost, "a second terminal")
	}
}

func checkTerminalValidation(c *checker) {
	s := c.study(lifecycle.StudySpec{Objectives: 2})
	tok := c.running(s, "a")
	before := c.snapshot(s, tok.Trial)
	for _, tc := range []struct {
		name   string
		state  lifecycle.TrialState
		values []float64
	}{
		{"complete without values", lifecycle.TrialComplete, nil},
		{"complete with too few values", lifecycle.TrialComplete, []float64{1}},
		{"complete with too many values", lifecycle.TrialComplete, []float64{1, 2, 3}},
		{"complete with NaN", lifecycle.TrialComplete, []float64{1, math.NaN()}},
		{"pruned with one of two values", lifecycle.TrialPruned, []float64{1}},
		{"failed with values", lifecycle.TrialFailed, []float64{1, 2}},
		{"a nonterminal state", lifecycle.TrialPaused, nil},
		{"no state", "", nil},
	} {
		err := c.b.Terminal(c.ctx, lifecycle.TerminalRequest{Owner: tok, State: tc.state, Values: tc.values, States: []lifecycle.StateBlob{trialBlob("m", "k", 1, "v")}})
		c.wantKind(err, lifecycle.KindInvalid, "terminal "+tc.name)
	}
	c.unchanged(before, "invalid terminal outcomes", s, tok.Trial)
}

func checkTerminalStale(c *checker) {
	s := c.study(defaultSpec)
	old := c.running(s, "a")
	c.pause(old)
	c.claim(old.Trial, "b")
	before := c.snapshot(s, old.Trial)
	err := c.b.Terminal(c.ctx, complete(old, 1))
	c.wantKind(err, lifecycle.KindLeaseLost, "terminal with a stale token")
	c.unchanged(before, "terminal with a stale token", s, old.Trial)
}

func checkTerminalIncompatible(c *checker) {
	s := c.study(defaultSpec)
	tok := c.running(s, "a")
	c.ok(c.b.FencedMutate(c.ctx, lifecycle.FencedMutationRequest{Owner: tok, States: []lifecycle.StateBlob{trialBlob("m", "k1", 1, "v")}}), "seed state")
	before := c.snapshot(s, tok.Trial)
	req := complete(tok, 1)
	req.States = []lifecycle.StateBlob{trialBlob("n", "k", 1, "v"), trialBlob("m", "k1", 3, "w")}
	c.wantKind(c.b.Terminal(c.ctx, req), lifecycle.KindIncompatible, "terminal replacing a blob of another version")
	_, err := c.b.TerminalWithIntent(c.ctx, req, testIntent)
	c.wantKind(err, lifecycle.KindIncompatible, "terminal with intent replacing a blob of another version")
	c.unchanged(before, "incompatible terminal outcomes", s, tok.Trial)
}
