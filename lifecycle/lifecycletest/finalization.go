package lifecycletest

import (
	"github.com/runseal/runseal/lifecycle"
)

var finalizationChecks = []check{
	{"finalization.observe-vacant-read-only", checkFinObserveVacant},
	{"finalization.acquire-exact-observation", checkFinAcquireExact},
	{"finalization.reclaim-exact-observation", checkFinReclaim},
	{"finalization.renew", checkFinRenew},
	{"finalization.release-keeps-fence", checkFinReleaseKeepsFence},
	{"finalization.protocol-stays-active", checkFinProtocolStaysActive},
	{"finalization.owned-ops-need-current-owner", checkFinOwnedOps},
}

func checkFinObserveVacant(c *checker) {
	s := c.study(defaultSpec)
	want := lifecycle.FinalizationObservation{Study: s}
	for range 2 {
		obs, err := c.b.ObserveFinalization(c.ctx, s)
		c.ok(err, "observe finalization")
		if obs != want {
			c.Errorf("unacquired claim: want the vacant observation %+v, got %+v", want, obs)
		}
	}
	// Observing must not have activated the protocol: a legacy finalizer
	// may still advance and write study state.
	key := c.told(s)
	_, err := c.b.AdvanceOutbox(c.ctx, lifecycle.OutboxAdvanceRequest{
		Key: key, Phase: lifecycle.PhaseCallbacks, States: []lifecycle.StateBlob{studyBlob("sampler", "tpe", 1, "v")},
	})
	c.ok(err, "legacy advance after only observing")
	_, err = c.b.ObserveFinalization(c.ctx, "no-such-study")
	c.wantKind(err, lifecycle.KindNotFound, "observe finalization of an unknown study")
}

func checkFinAcquireExact(c *checker) {
	s := c.study(defaultSpec)
	vacant := lifecycle.FinalizationObservation{Study: s}
	for _, tc := range []struct {
		name string
		obs  lifecycle.FinalizationObservation
	}{
		{"fence", lifecycle.FinalizationObservation{Study: s, Fence: 1}},
		{"heartbeat", lifecycle.FinalizationObservation{Study: s, HeartbeatSeq: 1}},
		{"held", lifecycle.FinalizationObservation{Study: s, Held: true}},
		{"holder", lifecycle.FinalizationObservation{Study: s, Holder: "x"}},
		{"study", lifecycle.FinalizationObservation{Study: "other"}},
	} {
		_, err := c.b.AcquireFinalization(c.ctx, lifecycle.FinalizationAcquireRequest{Study: s, Holder: "a", Observed: tc.obs})
		c.wantKind(err, lifecycle.KindConflict, "acquire with a different "+tc.name)
		if got, err := c.b.ObserveFinalization(c.ctx, s); err != nil || got != vacant {
			c.Errorf("refused acquire (%s) changed the claim: %+v, %v", tc.name, got, err)
		}
	}
	tok, err := c.b.AcquireFinalization(c.ctx, lifecycle.FinalizationAcquireRequest{Study: s, Holder: "a", Observed: vacant})
	c.ok(err, "acquire with the exact observation")
	if tok != (lifecycle.FinalizationToken{Study: s, Holder: "a", Fence: 1}) {
		c.Errorf("first acquire: want fence 1 for holder a, got %+v", tok)
	}
	want := lifecycle.FinalizationObservation{Study: s, Fence: 1, Held: true, Holder: "a"}
	if got, err := c.b.ObserveFinalization(c.ctx, s); err != nil || got != want {
		c.Errorf("after acquire: want %+v, got %+v, %v", want, got, err)
	}
	_, err = c.b.AcquireFinalization(c.ctx, lifecycle.FinalizationAcquireRequest{Study: s, Holder: "", Observed: want})
	c.wantKind(err, lifecycle.KindInvalid, "acquire with no holder")
	_, err = c.b.AcquireFinalization(c.ctx, lifecycle.FinalizationAcquireRequest{Study: "no-such-study", Holder: "a"})
	c.wantKind(err, lifecycle.KindNotFound, "acquire in an unknown study")
}

func checkFinReclaim(c *checker) {
	s := c.study(defaultSpec)
	a := c.acquire(s, "a")
	early, err := c.b.ObserveFinalization(c.ctx, s)
	c.ok(err, "observe")
	_, err = c.b.RenewFinalization(c.ctx, a)
	c.ok(err, "renew a")
	_, err = c.b.AcquireFinalization(c.ctx, lifecycle.FinalizationAcquireRequest{Study: s, Holder: "b", Observed: early})
	c.wantKind(err, lifecycle.KindConflict, "reclaim with an observation the holder renewed past")
	now, err := c.b.ObserveFinalization(c.ctx, s)
	c.ok(err, "observe")
	b, err := c.b.AcquireFinalization(c.ctx, lifecycle.FinalizationAcquireRequest{Study: s, Holder: "b", Observed: now})
	c.ok(err, "reclaim with the exact observation")
	if b.Fence <= a.Fence {
		c.Errorf("reclaim: want a fence above %d, got %d", a.Fence, b.Fence)
	}
	_, err = c.b.RenewFinalization(c.ctx, a)
	c.wantKind(err, lifecycle.KindLeaseLost, "renew by the displaced holder")
	c.wantKind(c.b.ReleaseFinalization(c.ctx, a), lifecycle.KindLeaseLost, "release by the displaced holder")
	if got, err := c.b.ObserveFinalization(c.ctx, s); err != nil || !got.Held || got.Holder != "b" || got.Fence != b.Fence {
		c.Errorf("the displaced holder's calls changed the claim: %+v, %v", got, err)
	}
}

func checkFinRenew(c *checker) {
	s := c.study(defaultSpec)
	tok := c.acquire(s, "a")
	for i := uint64(1); i <= 2; i++ {
		obs, err := c.b.RenewFinalization(c.ctx, tok)
		c.ok(err, "renew finalization")
		want := lifecycle.FinalizationObservation{Study: s, Fence: tok.Fence, HeartbeatSeq: i, Held: true, Holder: "a"}
		if obs != want {
			c.Errorf("renew %d: want %+v, got %+v", i, want, obs)
		}
	}
	before, _ := c.b.ObserveFinalization(c.ctx, s)
	for _, tc := range []struct {
		name string
		tok  lifecycle.FinalizationToken
	}{
		{"another holder", lifecycle.FinalizationToken{Study: s, Holder: "b", Fence: tok.Fence}},
		{"an older fence", lifecycle.FinalizationToken{Study: s, Holder: "a", Fence: tok.Fence - 1}},
		{"a future fence", lifecycle.FinalizationToken{Study: s, Holder: "a", Fence: tok.Fence + 1}},
	} {
		_, err := c.b.RenewFinalization(c.ctx, tc.tok)
		c.wantKind(err, lifecycle.KindLeaseLost, "renew finalization with "+tc.name)
	}
	if after, _ := c.b.ObserveFinalization(c.ctx, s); after != before {
		c.Errorf("refused renewals changed the claim: %+v to %+v", before, after)
	}
}

func checkFinReleaseKeepsFence(c *checker) {
	s := c.study(defaultSpec)
	tok := c.acquire(s, "a")
	_, err := c.b.RenewFinalization(c.ctx, tok)
	c.ok(err, "renew")
	c.ok(c.b.ReleaseFinalization(c.ctx, tok), "release")
	obs, err := c.b.ObserveFinalization(c.ctx, s)
	c.ok(err, "observe")
	if obs.Fence != tok.Fence || obs.Held || obs.Holder != "" || obs.HeartbeatSeq != 1 {
		c.Errorf("after release: want fence %d kept, heartbeat 1, not held; got %+v", tok.Fence, obs)
	}
	c.wantKind(c.b.ReleaseFinalization(c.ctx, tok), lifecycle.KindLeaseLost, "a second release")
	_, err = c.b.RenewFinalization(c.ctx, tok)
	c.wantKind(err, lifecycle.KindLeaseLost, "renew after release")
	next, err := c.b.AcquireFinalization(c.ctx, lifecycle.FinalizationAcquireRequest{Study: s, Holder: "b", Observed: obs})
	c.ok(err, "acquire after release")
	if next.Fence <= tok.Fence {
		c.Errorf("acquire after release: want a fence above %d, got %d", tok.Fence, next.Fence)
	}
}

func checkFinProtocolStaysActive(c *checker) {
	s := c.study(defaultSpec)
	key := c.told(s)
	tok := c.acquire(s, "a")
	c.ok(c.b.ReleaseFinalization(c.ctx, tok), "release")
	run := c.running(s, "w")
	before := c.snapshot(s, key.Trial, run.Trial)
	_, err := c.b.AdvanceOutbox(c.ctx, lifecycle.OutboxAdvanceRequest{Key: key, Phase: lifecycle.PhaseCallbacks})
	c.wantKind(err, lifecycle.KindLeaseLost, "legacy advance after the protocol was activated and released")
	err = c.b.FencedMutate(c.ctx, lifecycle.FencedMutationRequest{Owner: run, States: []lifecycle.StateBlob{studyBlob("sampler", "tpe", 1, "v")}})
	c.wantKind(err, lifecycle.KindLeaseLost, "legacy study-state mutation after activation")
	req := complete(run, 1)
	req.States = []lifecycle.StateBlob{studyBlob("sampler", "tpe", 1, "v")}
	c.wantKind(c.b.Terminal(c.ctx, req), lifecycle.KindLeaseLost, "legacy terminal with study state after activation")
	_, err = c.b.TerminalWithIntent(c.ctx, req, testIntent)
	c.wantKind(err, lifecycle.KindLeaseLost, "terminal with intent and study state, without the owner")
	c.unchanged(before, "legacy writes after activation", s, key.Trial, run.Trial)
	// Stateless work stays open to non-owners.
	c.ok(c.b.FencedMutate(c.ctx, lifecycle.FencedMutationRequest{Owner: run, States: []lifecycle.StateBlob{trialBlob("m", "k", 1, "v")}}), "trial-state mutation after activation")
	_, err = c.b.TerminalWithIntent(c.ctx, complete(run, 1), testIntent)
	c.ok(err, "terminal intent without study state after activation")
}

func checkFinOwnedOps(c *checker) {
	s := c.study(defaultSpec)
	key := c.told(s)
	stale := c.acquire(s, "a")
	cur := c.acquire(s, "b")
	run := c.running(s, "w")
	seam := []lifecycle.StateBlob{studyBlob("sampler", "tpe", 1, "v")}
	before := c.snapshot(s, key.Trial, run.Trial)
	err := c.b.MutateOwned(c.ctx, stale, lifecycle.FencedMutationRequest{Owner: run, Params: []lifecycle.Param{{Name: "x", Value: 1}}})
	c.wantKind(err, lifecycle.KindLeaseLost, "mutate_owned with a displaced finalization token")
	_, err = c.b.TerminalWithIntentOwned(c.ctx, stale, complete(run, 1), testIntent)
	c.wantKind(err, lifecycle.KindLeaseLost, "terminal_with_intent_owned with a displaced finalization token")
	_, err = c.b.AdvanceOutboxOwned(c.ctx, stale, lifecycle.OutboxAdvanceRequest{Key: key, Phase: lifecycle.PhaseCallbacks, States: seam})
	c.wantKind(err, lifecycle.KindLeaseLost, "advance_outbox_owned with a displaced finalization token")
	other := c.study(defaultSpec)
	foreign := c.acquire(other, "b")
	_, err = c.b.AdvanceOutboxOwned(c.ctx, foreign, lifecycle.OutboxAdvanceRequest{Key: key, Phase: lifecycle.PhaseCallbacks})
	c.wantKind(err, lifecycle.KindLeaseLost, "advance_outbox_owned with another study's token")
	c.unchanged(before, "owned operations with a stale token", s, key.Trial, run.Trial)

	c.ok(c.b.MutateOwned(c.ctx, cur, lifecycle.FencedMutationRequest{Owner: run, States: seam}), "mutate_owned with the current token")
	phase, err := c.b.AdvanceOutboxOwned(c.ctx, cur, lifecycle.OutboxAdvanceRequest{Key: key, Phase: lifecycle.PhaseCallbacks, States: []lifecycle.StateBlob{studyBlob("sampler", "tpe", 1, "w")}})
	c.ok(err, "advance_outbox_owned with the current token")
	if phase != lifecycle.PhaseCallbacks {
		c.Errorf("advance_outbox_owned: want cursor %s, got %s", lifecycle.PhaseCallbacks, phase)
	}
	k2, err := c.b.TerminalWithIntentOwned(c.ctx, cur, complete(run, 1), testIntent)
	c.ok(err, "terminal_with_intent_owned with the current token")
	if k2 != (lifecycle.OutboxKey{Trial: run.Trial, Epoch: run.Epoch}) {
		c.Errorf("terminal_with_intent_owned: want key %v, got %v", lifecycle.OutboxKey{Trial: run.Trial, Epoch: run.Epoch}, k2)
	}
	if st := c.inspectStudy(s); !hasBlob(st.States, studyBlob("sampler", "tpe", 1, "w")) {
		c.Errorf("owned writes did not reach the study state: %+v", st.States)
	}
}
