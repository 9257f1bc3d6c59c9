package sealed_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/runseal/runseal/keyring"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sealed"
)

// failingRing is a key ring that cannot answer (an HSM that is down).
type failingRing struct{ keyring.Ring }

func (failingRing) Unwrap(context.Context, string, []byte) ([]byte, error) {
	return nil, errors.New("token not present")
}

// TestCheckRing_NamesTheScopesARingLacks: a key ring that never held the
// scopes a journal's records are sealed under is named with them (sorted,
// at most MaxMissingListed, all counted); the journal's own ring passes,
// an erased scope is held (its tombstone), a journal with nothing sealed
// passes any ring, and a ring that cannot answer is an error of its own.
func TestCheckRing_NamesTheScopesARingLacks(t *testing.T) {
	ctx := context.Background()
	inner, _ := openSQLite(t)
	ring := openRing(t)
	j := sealed.New(inner, ring, sealed.Options{})

	if err := sealed.New(inner, openRing(t), sealed.Options{}).CheckRing(ctx, 64); err != nil {
		t.Fatalf("a journal with nothing sealed: %v", err)
	}
	var scopes []string
	const cases = sealed.MaxMissingListed + 2
	for i := range cases {
		c, run := store.NewCaseID(), store.NewRunID()
		if _, err := j.Append(ctx, 1, []store.Append{{Run: run, Case: c, Kind: "Note", Fields: []byte(fmt.Sprintf(`{"secret":"s%d"}`, i))}}); err != nil {
			t.Fatal(err)
		}
		scopes = append(scopes, sealed.CaseScope(j.Tenant(), c))
	}
	caseless := store.NewRunID()
	if _, err := j.Append(ctx, 1, []store.Append{{Run: caseless, Kind: "Note", Fields: []byte(`{"secret":"x"}`)}}); err != nil {
		t.Fatal(err)
	}
	scopes = append(scopes, sealed.RunScope(j.Tenant(), caseless))
	slices.Sort(scopes)
	if _, err := ring.Erase(ctx, scopes[0]); err != nil {
		t.Fatal(err)
	}
	if err := j.CheckRing(ctx, 64); err != nil {
		t.Errorf("the journal's own ring, one scope erased: %v", err)
	}

	err := sealed.New(inner, openRing(t), sealed.Options{}).CheckRing(ctx, 64)
	var me *sealed.ScopesMissingError
	if !errors.Is(err, sealed.ErrScopesMissing) || !errors.As(err, &me) {
		t.Fatalf("an empty ring: %v, want a ScopesMissingError", err)
	}
	if me.Tenant != store.DefaultTenant || me.Missing != len(scopes) || me.Runs != len(scopes) || !slices.Equal(me.Scopes, scopes[:sealed.MaxMissingListed]) {
		t.Errorf("an empty ring: %+v, want tenant %s, %d missing, listing %v", me, store.DefaultTenant, len(scopes), scopes[:sealed.MaxMissingListed])
	}

	err = sealed.New(inner, failingRing{ring}, sealed.Options{}).CheckRing(ctx, 64)
	if err == nil || errors.Is(err, sealed.ErrScopesMissing) {
		t.Errorf("a ring that cannot answer: %v, want its own error", err)
	}
}
