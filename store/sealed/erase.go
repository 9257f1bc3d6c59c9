package sealed

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/runseal/runseal/internal/canon"
	"github.com/runseal/runseal/keyring"
	"github.com/runseal/runseal/store"
)

// An Erasure is a request to destroy one scope's key: who asks, and why.
type Erasure struct {
	Scope  string
	Actor  store.Operator
	Reason string
	At     time.Time // when; time.Now when zero
}

// ErasureResult is what an erasure did.
type ErasureResult struct {
	Scope string `json:"scope"`
	// Already is true when the scope had been erased before: nothing was
	// destroyed or recorded this time.
	Already bool `json:"already_erased"`
	// Run is the run recording the act, sealed into the log, and Leaf its
	// log leaf; zero when Already.
	Run  store.RunID  `json:"run,omitempty"`
	Leaf store.Digest `json:"leaf,omitempty"`
}

// erasureOwner holds the lease under which an erasure records itself.
const erasureOwner = "runseal-erase"

// Erase destroys e.Scope's key in the key ring, then records the act (a
// ScopeErased record with scope, actor, basis, at and reason, all clear)
// in a run of its own, concluded "succeeded" and sealed, so the erasure is
// in the chain and the log. Erasing a scope the ring never had is an error
// (keyring.ErrUnknownScope); erasing an erased scope succeeds with Already
// set and records nothing.
//
// The key is destroyed before the act is recorded, so a failure in between
// leaves the data erased and the act unrecorded; the error says so.
func (j *Journal) Erase(ctx context.Context, e Erasure) (ErasureResult, error) {
	if err := keyring.ValidateScope(e.Scope); err != nil {
		return ErasureResult{}, err
	}
	if err := e.Actor.Validate(); err != nil {
		return ErasureResult{}, err
	}
	if e.Reason == "" || len(e.Reason) > 4096 {
		return ErasureResult{}, &store.InvalidArgumentError{Field: "reason", Detail: "an erasure needs a reason of 1 to 4096 bytes"}
	}
	if e.At.IsZero() {
		e.At = time.Now()
	}
	first, err := j.ring.Erase(ctx, e.Scope)
	if err != nil {
		return ErasureResult{}, err
	}
	if !first {
		return ErasureResult{Scope: e.Scope, Already: true}, nil
	}
	run, leaf, err := j.recordErasure(ctx, e)
	if err != nil {
		return ErasureResult{Scope: e.Scope}, fmt.Errorf("scope %s is erased, but recording the act failed: %w", e.Scope, err)
	}
	return ErasureResult{Scope: e.Scope, Run: run, Leaf: leaf}, nil
}

func (j *Journal) recordErasure(ctx context.Context, e Erasure) (store.RunID, store.Digest, error) {
	run := store.NewRunID()
	l, err := j.Acquire(ctx, run, erasureOwner, time.Minute)
	if err != nil {
		return run, store.Digest{}, err
	}
	fields := canon.Value{Kind: canon.Object, Members: []canon.Member{
		{Key: "scope", Value: canon.StringValue(e.Scope)},
		{Key: "actor", Value: canon.StringValue(e.Actor.Actor)},
		{Key: "basis", Value: canon.StringValue(string(e.Actor.Basis))},
		{Key: "at", Value: canon.StringValue(e.At.UTC().Format(time.RFC3339Nano))},
		{Key: "reason", Value: canon.StringValue(e.Reason)},
	}}
	obj, err := canon.NewObject(fields.Members)
	if err != nil {
		return run, store.Digest{}, err
	}
	// A case's erasure is stamped with the case, so that the case's history
	// and every disclosure package of it carry the act. Its fields are all
	// clear, so it needs no key (the case's is gone).
	c := caseOfScope(e.Scope)
	if _, err := j.Append(ctx, l.Epoch, []store.Append{
		{Run: run, Case: c, Kind: KindScopeErased, Fields: obj.Marshal()},
		{Run: run, Case: c, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)},
	}); err != nil {
		return run, store.Digest{}, err
	}
	leaf, err := j.Seal(ctx, run, l.Epoch, "succeeded")
	if err != nil {
		return run, store.Digest{}, err
	}
	// A sealed run refuses every append anyway; a failed release is harmless.
	_ = j.ReleaseLease(ctx, run, l.Epoch)
	return run, leaf, nil
}

// caseOfScope returns the case a "<tenant>/case/<ULID>" scope names, or the
// zero case.
func caseOfScope(scope string) store.CaseID {
	parts := strings.Split(scope, "/")
	if len(parts) != 3 || parts[1] != "case" {
		return store.CaseID{}
	}
	c, err := store.ParseCaseID(parts[2])
	if err != nil {
		return store.CaseID{}
	}
	return c
}
