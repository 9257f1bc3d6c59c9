package lifecycletest_test

import (
	"context"
	"math"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/lifecycletest"
	"github.com/runseal/runseal/lifecycle/memstore"
)

// The meta-test: each broken implementation below breaks one guarantee
// the way a real backend could, and the suite must report it under the
// invariant it breaks. A suite that passes them all verifies nothing.

func memFactory() (lifecycletest.Backend, error) { return memstore.New(), nil }

func wrap(f func(m *memstore.Storage) lifecycletest.Backend) lifecycletest.Factory {
	return func() (lifecycletest.Backend, error) { return f(memstore.New()), nil }
}

// noEpochBump reports every owner epoch as 1 and accepts epoch 1 as the
// current one: a claim that does not start a new epoch.
type noEpochBump struct{ *memstore.Storage }

func (b noEpochBump) current(ctx context.Context, tok lifecycle.TrialOwnerToken) lifecycle.TrialOwnerToken {
	if obs, err := b.Storage.Observe(ctx, tok.Trial); err == nil && tok.Epoch == 1 {
		tok.Epoch = obs.Epoch
	}
	return tok
}

func (b noEpochBump) Claim(ctx context.Context, req lifecycle.ClaimRequest) (lifecycle.TrialOwnerToken, error) {
	tok, err := b.Storage.Claim(ctx, req)
	tok.Epoch = min(tok.Epoch, 1)
	return tok, err
}

func (b noEpochBump) Observe(ctx context.Context, id lifecycle.TrialID) (lifecycle.LeaseObservation, error) {
	obs, err := b.Storage.Observe(ctx, id)
	obs.Epoch = min(obs.Epoch, 1)
	return obs, err
}

func (b noEpochBump) Renew(ctx context.Context, req lifecycle.RenewRequest) (lifecycle.LeaseObservation, error) {
	req.Owner = b.current(ctx, req.Owner)
	return b.Storage.Renew(ctx, req)
}

func (b noEpochBump) FencedMutate(ctx context.Context, req lifecycle.FencedMutationRequest) error {
	req.Owner = b.current(ctx, req.Owner)
	return b.Storage.FencedMutate(ctx, req)
}

func (b noEpochBump) Terminal(ctx context.Context, req lifecycle.TerminalRequest) error {
	req.Owner = b.current(ctx, req.Owner)
	return b.Storage.Terminal(ctx, req)
}

// twoStaleWinners tells every sweeper it won.
type twoStaleWinners struct{ *memstore.Storage }

func (b twoStaleWinners) FailStale(ctx context.Context, req lifecycle.FailStaleRequest) (bool, error) {
	_, err := b.Storage.FailStale(ctx, req)
	return err == nil, err
}

// clockSweeper judges staleness by comparing its own clock with the
// owner's heartbeat timestamp, which the contract forbids.
type clockSweeper struct{ *memstore.Storage }

func (b clockSweeper) FailStale(ctx context.Context, req lifecycle.FailStaleRequest) (bool, error) {
	if time.Since(req.Observed.HeartbeatAt) < req.Grace {
		return false, nil
	}
	return b.Storage.FailStale(ctx, req)
}

// staleMutation accepts writes from stale owners (and drops them).
type staleMutation struct{ *memstore.Storage }

func (b staleMutation) FencedMutate(ctx context.Context, req lifecycle.FencedMutationRequest) error {
	if err := b.Storage.FencedMutate(ctx, req); lifecycle.KindOf(err) != lifecycle.KindLeaseLost {
		return err
	}
	return nil
}

// partialIncompatible writes the compatible blobs of a mutation before it
// reports the incompatible one.
type partialIncompatible struct{ *memstore.Storage }

func (b partialIncompatible) FencedMutate(ctx context.Context, req lifecycle.FencedMutationRequest) error {
	err := b.Storage.FencedMutate(ctx, req)
	if lifecycle.KindOf(err) == lifecycle.KindIncompatible {
		for _, blob := range req.States {
			_ = b.Storage.FencedMutate(ctx, lifecycle.FencedMutationRequest{Owner: req.Owner, States: []lifecycle.StateBlob{blob}})
		}
	}
	return err
}

// releaseResetsFence reports a released claim as vacant again.
type releaseResetsFence struct{ *memstore.Storage }

func (b releaseResetsFence) ObserveFinalization(ctx context.Context, s lifecycle.StudyID) (lifecycle.FinalizationObservation, error) {
	obs, err := b.Storage.ObserveFinalization(ctx, s)
	if !obs.Held {
		obs.Fence, obs.HeartbeatSeq = 0, 0
	}
	return obs, err
}

// exhaustedConsumes burns a trial number on every exhausted reservation.
type exhaustedConsumes struct{ *memstore.Storage }

func (b exhaustedConsumes) ReserveAndCreateIfBudget(ctx context.Context, req lifecycle.ReserveAndCreateRequest) (lifecycle.ReservationOutcome, error) {
	out, err := b.Storage.ReserveAndCreateIfBudget(ctx, req)
	if err == nil && out.Status == lifecycle.ReservationExhausted {
		_, _ = b.Storage.CreateUnmanagedTrial(ctx, req.Study, lifecycle.TrialFailed)
	}
	return out, err
}

// phaseSkipper walks through skipped phases instead of refusing.
type phaseSkipper struct{ *memstore.Storage }

func (b phaseSkipper) AdvanceOutbox(ctx context.Context, req lifecycle.OutboxAdvanceRequest) (lifecycle.OutboxPhase, error) {
	got, err := b.Storage.AdvanceOutbox(ctx, req)
	for lifecycle.KindOf(err) == lifecycle.KindConflict && len(req.Effects) == 0 {
		rec, _, _ := b.Storage.GetOutbox(ctx, req.Key)
		next := []lifecycle.OutboxPhase{"", lifecycle.PhaseCallbacks, lifecycle.PhaseEffects, lifecycle.PhaseDone}[rec.Phase.Rank()]
		if _, err := b.Storage.AdvanceOutbox(ctx, lifecycle.OutboxAdvanceRequest{Key: req.Key, Phase: next}); err != nil {
			return "", err
		}
		got, err = b.Storage.AdvanceOutbox(ctx, req)
	}
	return got, err
}

// replacementTwice creates a fresh trial on every replay after the first.
type replacementTwice struct {
	*memstore.Storage
	seen *sync.Map
}

func (b replacementTwice) CreateReplacement(ctx context.Context, eff lifecycle.OutboxEffectKey) (lifecycle.ReplacementOutcome, error) {
	out, err := b.Storage.CreateReplacement(ctx, eff)
	if _, replay := b.seen.LoadOrStore(eff, true); err != nil || !replay {
		return out, err
	}
	rec, _, _ := b.Storage.GetOutbox(ctx, eff.Outbox)
	fresh, err := b.Storage.ReserveAndCreateIfBudget(ctx, lifecycle.ReserveAndCreateRequest{Study: rec.Study, MaxTrials: math.MaxUint32})
	return lifecycle.ReplacementOutcome{Status: lifecycle.ReplacementCreated, Trial: fresh.Trial, Number: fresh.Number}, err
}

// pageIgnoresBytes bounds pages by count only.
type pageIgnoresBytes struct{ *memstore.Storage }

func (b pageIgnoresBytes) ListOutboxPage(ctx context.Context, req lifecycle.OutboxPageRequest) (lifecycle.OutboxPage, error) {
	req.MaxBytes = math.MaxInt
	return b.Storage.ListOutboxPage(ctx, req)
}

// abandonAlwaysWins reports every abandon as the winner.
type abandonAlwaysWins struct{ *memstore.Storage }

func (b abandonAlwaysWins) Abandon(ctx context.Context, req lifecycle.AbandonRequest) (bool, error) {
	_, err := b.Storage.Abandon(ctx, req)
	return err == nil, err
}

// legacyEmulation lets a non-owner advance after activation by briefly
// acquiring the claim itself: the emulation the contract forbids.
type legacyEmulation struct{ *memstore.Storage }

func (b legacyEmulation) AdvanceOutbox(ctx context.Context, req lifecycle.OutboxAdvanceRequest) (lifecycle.OutboxPhase, error) {
	got, err := b.Storage.AdvanceOutbox(ctx, req)
	if lifecycle.KindOf(err) != lifecycle.KindLeaseLost {
		return got, err
	}
	rec, _, _ := b.Storage.GetOutbox(ctx, req.Key)
	obs, _ := b.Storage.ObserveFinalization(ctx, rec.Study)
	tok, aerr := b.Storage.AcquireFinalization(ctx, lifecycle.FinalizationAcquireRequest{Study: rec.Study, Holder: "legacy", Observed: obs})
	if aerr != nil {
		return got, err
	}
	defer b.Storage.ReleaseFinalization(ctx, tok)
	return b.Storage.AdvanceOutboxOwned(ctx, tok, req)
}

// displacedAccepted lets a displaced finalizer act with the current fence.
type displacedAccepted struct{ *memstore.Storage }

func (b displacedAccepted) AdvanceOutboxOwned(ctx context.Context, owner lifecycle.FinalizationToken, req lifecycle.OutboxAdvanceRequest) (lifecycle.OutboxPhase, error) {
	if obs, err := b.Storage.ObserveFinalization(ctx, owner.Study); err == nil && obs.Held {
		owner.Fence, owner.Holder = obs.Fence, obs.Holder
	}
	return b.Storage.AdvanceOutboxOwned(ctx, owner, req)
}

// panicsOnRenew crashes on one method; the suite must report, not crash.
type panicsOnRenew struct{ *memstore.Storage }

func (panicsOnRenew) Renew(context.Context, lifecycle.RenewRequest) (lifecycle.LeaseObservation, error) {
	panic("renew is broken")
}

// coreOnly has the eight core methods and none of the extensions.
type coreOnly struct {
	lifecycle.UnsupportedExtensions
	m *memstore.Storage
}

func (b coreOnly) ReserveAndCreateIfBudget(ctx context.Context, r lifecycle.ReserveAndCreateRequest) (lifecycle.ReservationOutcome, error) {
	return b.m.ReserveAndCreateIfBudget(ctx, r)
}
func (b coreOnly) Abandon(ctx context.Context, r lifecycle.AbandonRequest) (bool, error) {
	return b.m.Abandon(ctx, r)
}
func (b coreOnly) Observe(ctx context.Context, id lifecycle.TrialID) (lifecycle.LeaseObservation, error) {
	return b.m.Observe(ctx, id)
}
func (b coreOnly) Claim(ctx context.Context, r lifecycle.ClaimRequest) (lifecycle.TrialOwnerToken, error) {
	return b.m.Claim(ctx, r)
}
func (b coreOnly) Renew(ctx context.Context, r lifecycle.RenewRequest) (lifecycle.LeaseObservation, error) {
	return b.m.Renew(ctx, r)
}
func (b coreOnly) FailStale(ctx context.Context, r lifecycle.FailStaleRequest) (bool, error) {
	return b.m.FailStale(ctx, r)
}
func (b coreOnly) FencedMutate(ctx context.Context, r lifecycle.FencedMutationRequest) error {
	return b.m.FencedMutate(ctx, r)
}
func (b coreOnly) Terminal(ctx context.Context, r lifecycle.TerminalRequest) error {
	return b.m.Terminal(ctx, r)
}
func (b coreOnly) InspectStudy(ctx context.Context, s lifecycle.StudyID) (lifecycle.Study, error) {
	return b.m.InspectStudy(ctx, s)
}
func (b coreOnly) InspectTrial(ctx context.Context, t lifecycle.TrialID) (lifecycle.Trial, error) {
	return b.m.InspectTrial(ctx, t)
}
func (b coreOnly) CreateStudy(ctx context.Context, s lifecycle.StudySpec) (lifecycle.StudyID, error) {
	return b.m.CreateStudy(ctx, s)
}

func TestSuiteCatchesBrokenImplementations(t *testing.T) {
	tests := []struct {
		name    string
		factory lifecycletest.Factory
		// mustFail lists invariants the suite must report violated.
		mustFail []string
	}{
		{"claim does not bump the epoch", wrap(func(m *memstore.Storage) lifecycletest.Backend { return noEpochBump{m} }),
			[]string{"claim.new-epoch", "claim.stale-epoch-fenced"}},
		{"fail_stale lets two winners through", wrap(func(m *memstore.Storage) lifecycletest.Backend { return twoStaleWinners{m} }),
			[]string{"fail-stale.changed-observation-loses", "race.sweepers-one-winner"}},
		{"fail_stale compares clocks", wrap(func(m *memstore.Storage) lifecycletest.Backend { return clockSweeper{m} }),
			[]string{"fail-stale.no-clock-comparison"}},
		{"mutation accepts a stale token", wrap(func(m *memstore.Storage) lifecycletest.Backend { return staleMutation{m} }),
			[]string{"mutate.stale-token-writes-nothing", "claim.stale-epoch-fenced"}},
		{"incompatible state writes partially", wrap(func(m *memstore.Storage) lifecycletest.Backend { return partialIncompatible{m} }),
			[]string{"mutate.incompatible-writes-nothing"}},
		{"release resets the fence", wrap(func(m *memstore.Storage) lifecycletest.Backend { return releaseResetsFence{m} }),
			[]string{"finalization.release-keeps-fence"}},
		{"exhausted reservation consumes a number", wrap(func(m *memstore.Storage) lifecycletest.Backend { return exhaustedConsumes{m} }),
			[]string{"reserve.exhausted-consumes-nothing"}},
		{"advance skips phases", wrap(func(m *memstore.Storage) lifecycletest.Backend { return phaseSkipper{m} }),
			[]string{"outbox.advance-skip-conflict"}},
		{"replacement is not idempotent", wrap(func(m *memstore.Storage) lifecycletest.Backend {
			return replacementTwice{m, &sync.Map{}}
		}), []string{"outbox.create-replacement-idempotent"}},
		{"page ignores the byte bound", wrap(func(m *memstore.Storage) lifecycletest.Backend { return pageIgnoresBytes{m} }),
			[]string{"outbox.page-byte-bound"}},
		{"abandon always wins", wrap(func(m *memstore.Storage) lifecycletest.Backend { return abandonAlwaysWins{m} }),
			[]string{"abandon.unclaimed-becomes-failed", "abandon.consumed-is-false", "race.abandon-or-claim"}},
		{"legacy writer emulates ownership", wrap(func(m *memstore.Storage) lifecycletest.Backend { return legacyEmulation{m} }),
			[]string{"finalization.protocol-stays-active"}},
		{"displaced finalizer accepted", wrap(func(m *memstore.Storage) lifecycletest.Backend { return displacedAccepted{m} }),
			[]string{"finalization.owned-ops-need-current-owner", "race.displaced-finalizer-fenced"}},
		{"renew panics", wrap(func(m *memstore.Storage) lifecycletest.Backend { return panicsOnRenew{m} }),
			[]string{"renew.heartbeat"}},
		{"no finalization or outbox capability", wrap(func(m *memstore.Storage) lifecycletest.Backend { return coreOnly{m: m} }),
			[]string{"outbox.terminal-with-intent-atomic", "finalization.acquire-exact-observation", "outbox.page-order-and-continuation"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := lifecycletest.Verify(tt.factory)
			violated := rep.Violated()
			for _, inv := range tt.mustFail {
				if !slices.Contains(lifecycletest.Invariants(), inv) {
					t.Fatalf("test names unknown invariant %q", inv)
				}
				if !slices.Contains(violated, inv) {
					t.Errorf("suite did not report %s; it reported %v", inv, violated)
				}
			}
		})
	}
}

func TestSuitePassesReference(t *testing.T) {
	rep := lifecycletest.Verify(memFactory)
	if v := rep.Violated(); len(v) > 0 {
		t.Fatalf("reference implementation violates %v:\n%s", v, rep)
	}
	if got, want := rep.Ran(), len(lifecycletest.Invariants()); got != want {
		t.Errorf("ran %d checks, want %d", got, want)
	}
}

func TestVerifyOnly(t *testing.T) {
	rep := lifecycletest.Verify(memFactory, "claim.new-epoch")
	if len(rep.Results) != 1 || rep.Results[0].Invariant != "claim.new-epoch" {
		t.Fatalf("Verify with one name ran %+v", rep.Results)
	}
}

func TestInvariantNamesUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, n := range lifecycletest.Invariants() {
		if seen[n] {
			t.Errorf("invariant %q is checked twice", n)
		}
		seen[n] = true
	}
}

// TestRunFailsWhenNoCheckRan runs Run in a child test process whose -run
// filter matches no check: the child must fail rather than pass vacuously.
func TestRunFailsWhenNoCheckRan(t *testing.T) {
	if os.Getenv("LIFECYCLETEST_CHILD") == "1" {
		lifecycletest.Run(t, memFactory)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunFailsWhenNoCheckRan$/^no-such-check$")
	cmd.Env = append(os.Environ(), "LIFECYCLETEST_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no check ran") {
		t.Fatalf("child with no matching check: err %v, output:\n%s", err, out)
	}
}
