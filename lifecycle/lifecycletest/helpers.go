package lifecycletest

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/runseal/runseal/lifecycle"
)

// defaultSpec is the study most checks use: one objective and two
// constraints, so that arity checks have something to check.
var defaultSpec = lifecycle.StudySpec{Objectives: 1, Constraints: 2}

// bigBudget is a budget no check exhausts by accident.
const bigBudget = 1 << 20

var testIntent = lifecycle.FinalizationIntent{Kind: "tell", Data: json.RawMessage(`{"callbacks":["retry"]}`)}

func trialBlob(name, kind string, version uint32, data string) lifecycle.StateBlob {
	return lifecycle.StateBlob{Scope: lifecycle.ScopeTrial, Name: name, Kind: kind, Version: version, Data: []byte(data)}
}

func studyBlob(name, kind string, version uint32, data string) lifecycle.StateBlob {
	return lifecycle.StateBlob{Scope: lifecycle.ScopeStudy, Name: name, Kind: kind, Version: version, Data: []byte(data)}
}

func constraintsBlob(values ...float64) lifecycle.StateBlob {
	data, _ := json.Marshal(values)
	return trialBlob(lifecycle.ConstraintsStateName, lifecycle.ConstraintsKind, lifecycle.ConstraintsVersion, string(data))
}

// ok ends the check when a setup step fails: nothing after it would mean
// anything.
func (c *checker) ok(err error, what string) {
	if err != nil {
		c.Fatalf("%s: unexpected error: %v", what, err)
	}
}

// wantKind reports a violation unless err has kind k and matches k's
// sentinel through errors.Is, which is how callers branch.
func (c *checker) wantKind(err error, k lifecycle.Kind, what string) bool {
	got := lifecycle.KindOf(err)
	if err == nil || got != k {
		c.Errorf("%s: want a %v error, got %v", what, k, err)
		return false
	}
	if !errors.Is(err, sentinel(k)) {
		c.Errorf("%s: %v error does not match its sentinel with errors.Is", what, k)
		return false
	}
	return true
}

func sentinel(k lifecycle.Kind) error {
	switch k {
	case lifecycle.KindNotFound:
		return lifecycle.ErrNotFound
	case lifecycle.KindLeaseLost:
		return lifecycle.ErrLeaseLost
	case lifecycle.KindConflict:
		return lifecycle.ErrConflict
	case lifecycle.KindIncompatible:
		return lifecycle.ErrIncompatible
	case lifecycle.KindResourceLimit:
		return lifecycle.ErrResourceLimit
	case lifecycle.KindUnsupported:
		return lifecycle.ErrUnsupported
	case lifecycle.KindStorage:
		return lifecycle.ErrStorage
	case lifecycle.KindInvalid:
		return lifecycle.ErrInvalid
	}
	return nil
}

func (c *checker) study(spec lifecycle.StudySpec) lifecycle.StudyID {
	id, err := c.b.CreateStudy(c.ctx, spec)
	c.ok(err, "create study")
	return id
}

func (c *checker) reserve(study lifecycle.StudyID, budget uint64) lifecycle.ReservationOutcome {
	out, err := c.b.ReserveAndCreateIfBudget(c.ctx, lifecycle.ReserveAndCreateRequest{Study: study, MaxTrials: budget})
	c.ok(err, "reserve")
	return out
}

// waiting reserves a trial and ends the check if that fails.
func (c *checker) waiting(study lifecycle.StudyID) lifecycle.TrialID {
	out := c.reserve(study, bigBudget)
	if out.Status != lifecycle.ReservationCreated || out.Trial == "" {
		c.Fatalf("reserve with a large budget: want a created trial, got %+v", out)
	}
	return out.Trial
}

func (c *checker) claim(trial lifecycle.TrialID, owner string) lifecycle.TrialOwnerToken {
	tok, err := c.b.Claim(c.ctx, lifecycle.ClaimRequest{Trial: trial, Owner: owner})
	c.ok(err, "claim "+owner)
	return tok
}

// running returns a new running trial and its owner token.
func (c *checker) running(study lifecycle.StudyID, owner string) lifecycle.TrialOwnerToken {
	return c.claim(c.waiting(study), owner)
}

func (c *checker) observe(trial lifecycle.TrialID) lifecycle.LeaseObservation {
	obs, err := c.b.Observe(c.ctx, trial)
	c.ok(err, "observe")
	return obs
}

func (c *checker) inspect(trial lifecycle.TrialID) lifecycle.Trial {
	t, err := c.b.InspectTrial(c.ctx, trial)
	c.ok(err, "inspect trial")
	return t
}

func (c *checker) inspectStudy(study lifecycle.StudyID) lifecycle.Study {
	s, err := c.b.InspectStudy(c.ctx, study)
	c.ok(err, "inspect study")
	return s
}

func (c *checker) pause(tok lifecycle.TrialOwnerToken) {
	c.ok(c.b.FencedMutate(c.ctx, lifecycle.FencedMutationRequest{Owner: tok, Pause: true}), "pause")
}

func complete(tok lifecycle.TrialOwnerToken, v float64) lifecycle.TerminalRequest {
	return lifecycle.TerminalRequest{Owner: tok, State: lifecycle.TrialComplete, Values: []float64{v}}
}

// told returns the key of a new Initial outbox record: a trial completed
// with testIntent.
func (c *checker) told(study lifecycle.StudyID) lifecycle.OutboxKey {
	tok := c.running(study, "owner")
	key, err := c.b.TerminalWithIntent(c.ctx, complete(tok, 1), testIntent)
	c.ok(err, "terminal with intent")
	return key
}

func (c *checker) outbox(key lifecycle.OutboxKey) lifecycle.OutboxRecord {
	rec, ok, err := c.b.GetOutbox(c.ctx, key)
	c.ok(err, "get outbox")
	if !ok {
		c.Fatalf("get outbox %v: record missing", key)
	}
	return rec
}

func (c *checker) advance(key lifecycle.OutboxKey, phase lifecycle.OutboxPhase, effects ...lifecycle.OutboxEffect) {
	got, err := c.b.AdvanceOutbox(c.ctx, lifecycle.OutboxAdvanceRequest{Key: key, Phase: phase, Effects: effects})
	c.ok(err, fmt.Sprintf("advance %v to %s", key, phase))
	if got != phase {
		c.Fatalf("advance %v to %s: cursor is %s", key, phase, got)
	}
}

func (c *checker) acquire(study lifecycle.StudyID, holder string) lifecycle.FinalizationToken {
	obs, err := c.b.ObserveFinalization(c.ctx, study)
	c.ok(err, "observe finalization")
	tok, err := c.b.AcquireFinalization(c.ctx, lifecycle.FinalizationAcquireRequest{Study: study, Holder: holder, Observed: obs})
	c.ok(err, "acquire finalization "+holder)
	return tok
}

// snapshot captures everything the backend shows about a study, the given
// trials and the whole outbox, for "nothing was written" comparisons.
func (c *checker) snapshot(study lifecycle.StudyID, trials ...lifecycle.TrialID) string {
	var snap struct {
		Study  lifecycle.Study
		Trials []lifecycle.Trial
		Outbox []lifecycle.OutboxRecord
	}
	snap.Study = c.inspectStudy(study)
	for _, id := range trials {
		snap.Trials = append(snap.Trials, c.inspect(id))
	}
	var err error
	snap.Outbox, err = c.b.ListOutbox(c.ctx)
	c.ok(err, "list outbox")
	b, err := json.Marshal(snap)
	c.ok(err, "encode snapshot")
	return string(b)
}

// unchanged reports a violation if the snapshot moved.
func (c *checker) unchanged(before string, what string, study lifecycle.StudyID, trials ...lifecycle.TrialID) {
	if after := c.snapshot(study, trials...); after != before {
		c.Errorf("%s wrote something:\n before %s\n after  %s", what, before, after)
	}
}
