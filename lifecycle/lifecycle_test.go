package lifecycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/memstore"
)

func TestErrorKinds(t *testing.T) {
	sentinels := map[lifecycle.Kind]error{
		lifecycle.KindNotFound:      lifecycle.ErrNotFound,
		lifecycle.KindLeaseLost:     lifecycle.ErrLeaseLost,
		lifecycle.KindConflict:      lifecycle.ErrConflict,
		lifecycle.KindIncompatible:  lifecycle.ErrIncompatible,
		lifecycle.KindResourceLimit: lifecycle.ErrResourceLimit,
		lifecycle.KindUnsupported:   lifecycle.ErrUnsupported,
		lifecycle.KindStorage:       lifecycle.ErrStorage,
		lifecycle.KindInvalid:       lifecycle.ErrInvalid,
	}
	for k, sentinel := range sentinels {
		t.Run(k.String(), func(t *testing.T) {
			err := error(lifecycle.NewError(k, "claim", "trial %q", "t1"))
			wrapped := errors.Join(errors.New("context"), err)
			if !errors.Is(wrapped, sentinel) {
				t.Errorf("errors.Is(%v, sentinel) = false", wrapped)
			}
			for other, s := range sentinels {
				if other != k && errors.Is(err, s) {
					t.Errorf("a %v error matches the %v sentinel", k, other)
				}
			}
			if got := lifecycle.KindOf(wrapped); got != k {
				t.Errorf("KindOf = %v, want %v", got, k)
			}
			var e *lifecycle.Error
			if !errors.As(wrapped, &e) || e.Op != "claim" {
				t.Errorf("errors.As did not find the operation: %+v", e)
			}
			if msg := err.Error(); !strings.Contains(msg, "claim") || !strings.Contains(msg, k.String()) || !strings.Contains(msg, `"t1"`) {
				t.Errorf("message %q lacks the operation, kind or detail", msg)
			}
		})
	}
	if lifecycle.KindOf(errors.New("plain")) != 0 || lifecycle.KindOf(nil) != 0 {
		t.Error("KindOf of a foreign or nil error is not 0")
	}
	cause := lifecycle.StorageError("observe", context.Canceled)
	if !errors.Is(cause, context.Canceled) || !errors.Is(cause, lifecycle.ErrStorage) {
		t.Error("a storage error must reach both its cause and its sentinel")
	}
}

func TestContextEndedIsStorageError(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s := memstore.New()
	study, err := s.CreateStudy(context.Background(), lifecycle.StudySpec{Objectives: 1})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	_, err = s.ReserveAndCreateIfBudget(ctx, lifecycle.ReserveAndCreateRequest{Study: study, MaxTrials: 5})
	if !errors.Is(err, lifecycle.ErrStorage) || !errors.Is(err, context.Canceled) {
		t.Fatalf("reserve with a cancelled context: %v", err)
	}
	if st, _ := s.InspectStudy(context.Background(), study); st.Trials != 0 {
		t.Errorf("a cancelled reservation created %d trials", st.Trials)
	}
}

func TestUnsupportedExtensions(t *testing.T) {
	var u lifecycle.UnsupportedExtensions
	ctx := context.Background()
	var tok lifecycle.FinalizationToken
	_, e1 := u.ObserveFinalization(ctx, "s")
	_, e2 := u.AcquireFinalization(ctx, lifecycle.FinalizationAcquireRequest{})
	_, e3 := u.RenewFinalization(ctx, tok)
	e4 := u.ReleaseFinalization(ctx, tok)
	_, e5 := u.TerminalWithIntent(ctx, lifecycle.TerminalRequest{}, lifecycle.FinalizationIntent{})
	_, e6 := u.TerminalWithIntentOwned(ctx, tok, lifecycle.TerminalRequest{}, lifecycle.FinalizationIntent{})
	e7 := u.MutateOwned(ctx, tok, lifecycle.FencedMutationRequest{})
	_, e8 := u.AdvanceOutbox(ctx, lifecycle.OutboxAdvanceRequest{})
	_, e9 := u.AdvanceOutboxOwned(ctx, tok, lifecycle.OutboxAdvanceRequest{})
	_, _, e10 := u.GetOutbox(ctx, lifecycle.OutboxKey{})
	_, e11 := u.ListOutbox(ctx)
	_, e12 := u.ListOutboxPage(ctx, lifecycle.OutboxPageRequest{})
	e13 := u.CompleteOutboxEffect(ctx, lifecycle.OutboxEffectCompletion{})
	_, e14 := u.CreateReplacement(ctx, lifecycle.OutboxEffectKey{})
	e15 := u.PutFinalizedState(ctx, lifecycle.FinalizedStateRequest{})
	for i, err := range []error{e1, e2, e3, e4, e5, e6, e7, e8, e9, e10, e11, e12, e13, e14, e15} {
		if !errors.Is(err, lifecycle.ErrUnsupported) {
			t.Errorf("extension %d: want Unsupported, got %v", i+1, err)
		}
	}
	// Every extension method of Storage must be covered, or a core-only
	// backend would not compile.
	st := reflect.TypeFor[lifecycle.Storage]()
	ue := reflect.TypeFor[lifecycle.UnsupportedExtensions]()
	if got, want := ue.NumMethod(), st.NumMethod()-8; got != want {
		t.Errorf("UnsupportedExtensions has %d methods, Storage has %d extension methods", got, want)
	}
}

func TestOperationContext(t *testing.T) {
	ctx := context.Background()
	if got := lifecycle.OperationFrom(ctx); got != lifecycle.NoOperation {
		t.Errorf("bare context carries %q", got)
	}
	if got := lifecycle.OperationFrom(lifecycle.WithOperation(ctx, "op-1")); got != "op-1" {
		t.Errorf("OperationFrom = %q", got)
	}
}

func TestValidation(t *testing.T) {
	big := strings.Repeat("x", lifecycle.MaxRequestBytes)
	tok := lifecycle.TrialOwnerToken{Trial: "t", Owner: "o", Epoch: 1}
	blob := lifecycle.StateBlob{Scope: lifecycle.ScopeTrial, Name: "n", Kind: "k", Version: 1}
	tests := []struct {
		name string
		err  error
		want lifecycle.Kind
	}{
		{"valid claim", lifecycle.ClaimRequest{Trial: "t", Owner: "o"}.Validate(), 0},
		{"owner not UTF-8", lifecycle.ClaimRequest{Trial: "t", Owner: "\xff"}.Validate(), lifecycle.KindInvalid},
		{"owner too long", lifecycle.ClaimRequest{Trial: "t", Owner: strings.Repeat("o", lifecycle.MaxNameBytes+1)}.Validate(), lifecycle.KindInvalid},
		{"duplicate parameter", lifecycle.ClaimRequest{Trial: "t", Owner: "o", Params: []lifecycle.Param{{Name: "a"}, {Name: "a"}}}.Validate(), lifecycle.KindInvalid},
		{"distribution not JSON", lifecycle.ClaimRequest{Trial: "t", Owner: "o", Params: []lifecycle.Param{{Name: "a", Distribution: json.RawMessage("{")}}}.Validate(), lifecycle.KindInvalid},
		{"oversized request", lifecycle.ClaimRequest{Trial: "t", Owner: "o", States: []lifecycle.StateBlob{{Scope: lifecycle.ScopeTrial, Name: "n", Kind: "k", Version: 1, Data: []byte(big)}}}.Validate(), lifecycle.KindResourceLimit},
		{"blob version 0", lifecycle.StateBlob{Scope: lifecycle.ScopeTrial, Name: "n", Kind: "k"}.Validate(), lifecycle.KindInvalid},
		{"blob unknown scope", lifecycle.StateBlob{Scope: "global", Name: "n", Kind: "k", Version: 1}.Validate(), lifecycle.KindInvalid},
		{"duplicate blob", lifecycle.FencedMutationRequest{Owner: tok, States: []lifecycle.StateBlob{blob, blob}}.Validate(), lifecycle.KindInvalid},
		{"duplicate step", lifecycle.FencedMutationRequest{Owner: tok, Intermediate: []lifecycle.IntermediateValue{{Step: 1}, {Step: 1}}}.Validate(), lifecycle.KindInvalid},
		{"infinite intermediate", lifecycle.FencedMutationRequest{Owner: tok, Intermediate: []lifecycle.IntermediateValue{{Value: math.Inf(-1)}}}.Validate(), lifecycle.KindInvalid},
		{"attribute without value", lifecycle.FencedMutationRequest{Owner: tok, Attrs: map[string]json.RawMessage{"a": nil}}.Validate(), lifecycle.KindInvalid},
		{"token without owner", lifecycle.RenewRequest{Owner: lifecycle.TrialOwnerToken{Trial: "t"}}.Validate(), lifecycle.KindInvalid},
		{"page zero records", lifecycle.OutboxPageRequest{Study: "s", MaxBytes: 1}.Validate(), lifecycle.KindResourceLimit},
		{"page huge bytes", lifecycle.OutboxPageRequest{Study: "s", MaxRecords: 1, MaxBytes: math.MaxUint64}.Validate(), lifecycle.KindResourceLimit},
		{"page valid", lifecycle.OutboxPageRequest{Study: "s", MaxRecords: 1, MaxBytes: math.MaxInt}.Validate(), 0},
		{"replacement spec with constraint state", lifecycle.ReplacementSpec{MaxTrials: 1, States: []lifecycle.StateBlob{{Scope: lifecycle.ScopeTrial, Name: lifecycle.ConstraintsStateName, Kind: lifecycle.ConstraintsKind, Version: 1}}}.Validate(), lifecycle.KindConflict},
		{"replacement spec with study state", lifecycle.ReplacementSpec{MaxTrials: 1, States: []lifecycle.StateBlob{{Scope: lifecycle.ScopeStudy, Name: "n", Kind: "k", Version: 1}}}.Validate(), lifecycle.KindInvalid},
		{"replacement spec without budget", lifecycle.ReplacementSpec{}.Validate(), lifecycle.KindInvalid},
		{"duplicate effect", lifecycle.OutboxAdvanceRequest{Key: lifecycle.OutboxKey{Trial: "t"}, Phase: lifecycle.PhaseEffects, Effects: []lifecycle.OutboxEffect{
			{Name: "e", Kind: lifecycle.EffectExternal}, {Name: "e", Kind: lifecycle.EffectExternal}}}.Validate(), lifecycle.KindInvalid},
		{"study spec without objectives", lifecycle.StudySpec{}.Validate(), lifecycle.KindInvalid},
		{"study spec negative constraints", lifecycle.StudySpec{Objectives: 1, Constraints: -1}.Validate(), lifecycle.KindInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := lifecycle.KindOf(tt.err); got != tt.want || (tt.want == 0) != (tt.err == nil) {
				t.Errorf("got %v, want kind %v", tt.err, tt.want)
			}
		})
	}
}

// TestJSONRoundTrip checks that the types that become journal record
// fields survive encoding: an observation must still equal itself, so
// that a sweeper on another node can compare it.
func TestJSONRoundTrip(t *testing.T) {
	obs := lifecycle.LeaseObservation{
		Trial: "t", State: lifecycle.TrialRunning, Owner: "o", Epoch: 3, HeartbeatSeq: 9,
		HeartbeatAt: time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.FixedZone("X", 3600)),
	}
	var back lifecycle.LeaseObservation
	roundTrip(t, obs, &back)
	if !back.Equal(obs) {
		t.Errorf("observation changed in JSON: %+v to %+v", obs, back)
	}
	rec := lifecycle.OutboxRecord{
		Key: lifecycle.OutboxKey{Trial: "t", Epoch: 2}, Study: "s", TerminalSeq: 5, Outcome: lifecycle.TrialFailed,
		Cause: lifecycle.CauseStale, Grace: 30 * time.Second, Intent: lifecycle.FinalizationIntent{Kind: "k", Data: json.RawMessage(`{"a":1}`)},
		Phase: lifecycle.PhaseEffects,
		Effects: []lifecycle.OutboxEffect{{Name: "r", Kind: lifecycle.EffectReplacement, Replacement: &lifecycle.ReplacementSpec{
			MaxTrials: 10, Params: []lifecycle.Param{{Name: "x", Value: 0.1}},
			States: []lifecycle.StateBlob{{Scope: lifecycle.ScopeTrial, Name: "n", Kind: "k", Version: 1, Data: []byte{0, 1, 255}}},
		}}},
		Completed: []lifecycle.EffectCompletion{{Name: "r", Replacement: &lifecycle.ReplacementOutcome{Status: lifecycle.ReplacementCreated, Trial: "u", Number: 7}}},
	}
	var recBack lifecycle.OutboxRecord
	roundTrip(t, rec, &recBack)
	if !reflect.DeepEqual(rec, recBack) {
		t.Errorf("outbox record changed in JSON:\n%+v\n%+v", rec, recBack)
	}
}

func roundTrip(t *testing.T, v, out any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
}

// observesRegardless observes a trial even once the caller's context has
// ended, so that a test can tell a sweep that waits on that context from
// one that returns on what it observed.
type observesRegardless struct{ *memstore.Storage }

func (o observesRegardless) Observe(ctx context.Context, trial lifecycle.TrialID) (lifecycle.LeaseObservation, error) {
	return o.Storage.Observe(context.WithoutCancel(ctx), trial)
}

func TestFailIfStale(t *testing.T) {
	ctx := context.Background()
	intent := lifecycle.FinalizationIntent{Kind: "stale"}
	setup := func(t *testing.T) (*memstore.Storage, lifecycle.TrialOwnerToken) {
		t.Helper()
		s := memstore.New()
		study, err := s.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1})
		if err != nil {
			t.Fatal(err)
		}
		out, err := s.ReserveAndCreateIfBudget(ctx, lifecycle.ReserveAndCreateRequest{Study: study, MaxTrials: 5})
		if err != nil {
			t.Fatal(err)
		}
		tok, err := s.Claim(ctx, lifecycle.ClaimRequest{Trial: out.Trial, Owner: "o", HeartbeatAt: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		return s, tok
	}

	t.Run("silent owner is failed", func(t *testing.T) {
		s, tok := setup(t)
		won, err := lifecycle.FailIfStale(ctx, s, tok.Trial, time.Millisecond, intent)
		if err != nil || !won {
			t.Fatalf("got %v, %v", won, err)
		}
		if _, ok, _ := s.GetOutbox(ctx, lifecycle.OutboxKey{Trial: tok.Trial, Epoch: tok.Epoch}); !ok {
			t.Error("no outbox record")
		}
	})
	t.Run("owner that renews during the grace survives", func(t *testing.T) {
		s, tok := setup(t)
		won, err := lifecycle.FailIfStale(ctx, renewsAfterObserve{s, tok}, tok.Trial, time.Millisecond, intent)
		if err != nil || won {
			t.Fatalf("got %v, %v", won, err)
		}
		if obs, _ := s.Observe(ctx, tok.Trial); obs.State != lifecycle.TrialRunning {
			t.Errorf("trial is %s", obs.State)
		}
	})
	t.Run("not running returns at once", func(t *testing.T) {
		s, tok := setup(t)
		if err := s.FencedMutate(ctx, lifecycle.FencedMutationRequest{Owner: tok, Pause: true}); err != nil {
			t.Fatal(err)
		}
		// A context that ends as soon as anything waits on it: a sweep
		// that waited out the grace would return its error.
		waited, stopWaiting := context.WithCancel(ctx)
		stopWaiting()
		won, err := lifecycle.FailIfStale(waited, observesRegardless{s}, tok.Trial, time.Hour, intent)
		if err != nil || won {
			t.Fatalf("got %v, %v; want false, nil without waiting", won, err)
		}
	})
	t.Run("cancelled wait fails nothing", func(t *testing.T) {
		s, tok := setup(t)
		cctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
		defer cancel()
		won, err := lifecycle.FailIfStale(cctx, s, tok.Trial, time.Hour, intent)
		if won || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, %v", won, err)
		}
		if obs, _ := s.Observe(ctx, tok.Trial); obs.State != lifecycle.TrialRunning {
			t.Errorf("trial is %s", obs.State)
		}
	})
	t.Run("invalid grace", func(t *testing.T) {
		s, tok := setup(t)
		if _, err := lifecycle.FailIfStale(ctx, s, tok.Trial, 0, intent); !errors.Is(err, lifecycle.ErrInvalid) {
			t.Fatalf("got %v", err)
		}
	})
}

// renewsAfterObserve has the owner heartbeat right after every observation,
// that is, during the sweeper's grace interval.
type renewsAfterObserve struct {
	*memstore.Storage
	owner lifecycle.TrialOwnerToken
}

func (r renewsAfterObserve) Observe(ctx context.Context, id lifecycle.TrialID) (lifecycle.LeaseObservation, error) {
	obs, err := r.Storage.Observe(ctx, id)
	if _, rerr := r.Renew(ctx, lifecycle.RenewRequest{Owner: r.owner}); rerr != nil {
		return obs, rerr
	}
	return obs, err
}
