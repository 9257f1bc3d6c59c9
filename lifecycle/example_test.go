package lifecycle_test

import (
	"context"
	"fmt"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/memstore"
)

// A worker reserves, claims and finishes a trial; a finalizer then takes
// the study's finalization claim and drives the trial's outbox record
// through its phases.
func Example() {
	ctx := context.Background()
	s := memstore.New()
	study, _ := s.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1})

	// Worker.
	res, _ := s.ReserveAndCreateIfBudget(ctx, lifecycle.ReserveAndCreateRequest{Study: study, MaxTrials: 100})
	tok, _ := s.Claim(ctx, lifecycle.ClaimRequest{Trial: res.Trial, Owner: "worker-1",
		Params: []lifecycle.Param{{Name: "x", Value: 0.5}}})
	_, _ = s.Renew(ctx, lifecycle.RenewRequest{Owner: tok})
	key, _ := s.TerminalWithIntent(ctx,
		lifecycle.TerminalRequest{Owner: tok, State: lifecycle.TrialComplete, Values: []float64{0.25}},
		lifecycle.FinalizationIntent{Kind: "tell"})

	// Finalizer.
	obs, _ := s.ObserveFinalization(ctx, study)
	fin, _ := s.AcquireFinalization(ctx, lifecycle.FinalizationAcquireRequest{Study: study, Holder: "finalizer-1", Observed: obs})
	sampler := lifecycle.StateBlob{Scope: lifecycle.ScopeStudy, Name: "sampler", Kind: "tpe", Version: 1, Data: []byte("...")}
	for _, step := range []lifecycle.OutboxAdvanceRequest{
		{Key: key, Phase: lifecycle.PhaseCallbacks, States: []lifecycle.StateBlob{sampler}},
		{Key: key, Phase: lifecycle.PhaseEffects},
		{Key: key, Phase: lifecycle.PhaseDone},
	} {
		phase, err := s.AdvanceOutboxOwned(ctx, fin, step)
		fmt.Println(phase, err)
	}
	_ = s.ReleaseFinalization(ctx, fin)
	after, _ := s.ObserveFinalization(ctx, study)
	fmt.Printf("trial %d: fence %d, held %t\n", res.Number, after.Fence, after.Held)
	// Output:
	// callbacks <nil>
	// effects <nil>
	// done <nil>
	// trial 0: fence 1, held false
}
