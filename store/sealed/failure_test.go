package sealed_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/runseal/runseal/internal/canon"
	"github.com/runseal/runseal/keyring"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sealed"
)

// TestAppendToErasedCase_RefusedNamingScope: once a case is erased, an
// append to it is refused (an erased scope never gets a key again, and
// nothing is ever stored in the clear instead), the error names the scope,
// and nothing is written.
func TestAppendToErasedCase_RefusedNamingScope(t *testing.T) {
	ctx := context.Background()
	inner, _ := openSQLite(t)
	ring := openRing(t)
	j := sealed.New(inner, ring, sealed.Options{})
	c, run := store.NewCaseID(), store.NewRunID()
	if _, err := j.Append(ctx, 1, []store.Append{{Run: run, Case: c, Kind: "Data", Fields: []byte(`{"secret":"before"}`)}}); err != nil {
		t.Fatal(err)
	}
	scope := sealed.CaseScope(j.Tenant(), c)
	if _, err := ring.Erase(ctx, scope); err != nil {
		t.Fatal(err)
	}
	_, err := j.Append(ctx, 1, []store.Append{{Run: run, Case: c, Kind: "Data", Fields: []byte(`{"secret":"after"}`)}})
	var se *keyring.ScopeError
	if !errors.Is(err, keyring.ErrErased) || !errors.As(err, &se) || se.Scope != scope || !strings.Contains(err.Error(), scope) {
		t.Fatalf("append to an erased case = %v, want keyring.ErrErased naming scope %s", err, scope)
	}
	var ee *store.ErasedError
	if !errors.Is(err, store.ErrErased) || !errors.As(err, &ee) || ee.Scope != scope || ee.Case != c || ee.Run != run || !store.IsDomain(err) {
		t.Fatalf("append to an erased case = %v, want a store.ErasedError (a refusal, not a failure) naming case %s and scope %s", err, c, scope)
	}
	recs, err := inner.Read(ctx, run, 1)
	if err != nil || len(recs) != 1 {
		t.Fatalf("the refused append wrote something: %d records, %v", len(recs), err)
	}
	// A record with no field to seal needs no key and still goes in.
	if _, err := j.Append(ctx, 1, []store.Append{{Run: run, Case: c, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)}}); err != nil {
		t.Fatalf("a record with only clear fields, in an erased case: %v", err)
	}
}

// TestUnwrapFailure_NamesScope: an envelope moved into another case's
// record reads as corrupt (not erased, not unknown), and the error names
// the scope its data key failed to unwrap under, so an operator knows
// which key ring entry to look at.
func TestUnwrapFailure_NamesScope(t *testing.T) {
	ctx := context.Background()
	inner, _ := openSQLite(t)
	j := sealed.New(inner, openRing(t), sealed.Options{})
	from, to := store.NewCaseID(), store.NewCaseID()
	a := store.NewRunID()
	if _, err := j.Append(ctx, 1, []store.Append{{Run: a, Case: from, Kind: "Data", Fields: []byte(`{"payload":"x"}`)}}); err != nil {
		t.Fatal(err)
	}
	// The destination case has a key of its own.
	if _, err := j.Append(ctx, 1, []store.Append{{Run: store.NewRunID(), Case: to, Kind: "Data", Fields: []byte(`{"payload":"y"}`)}}); err != nil {
		t.Fatal(err)
	}
	recs, err := inner.Read(ctx, a, 1)
	if err != nil {
		t.Fatal(err)
	}
	env := storedField(t, recs[0].Raw, "payload")
	moved := store.NewRunID()
	raw, err := store.EncodeBody(store.Body{Seq: 1, Run: moved, Case: to, Epoch: 1, V: store.RecordVersion, Kind: "Data", Fields: []byte(`{"payload":` + env + `}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inner.Append(ctx, 1, []store.Append{{Run: moved, Raw: raw}}); err != nil {
		t.Fatal(err)
	}
	_, err = j.Read(ctx, moved, 1)
	var ce *store.CorruptError
	scope := sealed.CaseScope(j.Tenant(), to)
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), scope) {
		t.Fatalf("read of an envelope moved to case %s = %v, want a CorruptError naming scope %s", to, err, scope)
	}
}

// TestRead_WrongKeyRingIsUnknownScope: reading a sealed journal with a key
// ring that never held its scopes (the wrong --keyring) is an error naming
// the scope, classed keyring.ErrUnknownScope: never "erased", which would
// tell an operator the data is gone, and never "corrupt".
func TestRead_WrongKeyRingIsUnknownScope(t *testing.T) {
	ctx := context.Background()
	inner, _ := openSQLite(t)
	j := sealed.New(inner, openRing(t), sealed.Options{})
	c, run := store.NewCaseID(), store.NewRunID()
	if _, err := j.Append(ctx, 1, []store.Append{{Run: run, Case: c, Kind: "Data", Fields: []byte(`{"payload":"x"}`)}}); err != nil {
		t.Fatal(err)
	}
	other := sealed.New(inner, openRing(t), sealed.Options{})
	_, err := other.Read(ctx, run, 1)
	var ce *store.CorruptError
	scope := sealed.CaseScope(j.Tenant(), c)
	if !errors.Is(err, keyring.ErrUnknownScope) || errors.As(err, &ce) || !strings.Contains(err.Error(), scope) {
		t.Fatalf("read with a key ring that never had the scope = %v, want keyring.ErrUnknownScope naming %s", err, scope)
	}
}

// storedField returns a stored record's field as its canonical JSON.
func storedField(t *testing.T, raw []byte, name string) string {
	t.Helper()
	b, err := store.DecodeBody(raw)
	if err != nil {
		t.Fatal(err)
	}
	v, err := canon.Parse(b.Fields)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := v.Get(name)
	if !ok {
		t.Fatalf("no field %q in %s", name, b.Fields)
	}
	return string(f.Marshal())
}
