// Package ringtest is the contract every keyring.Ring keeps, as a test any
// ring implementation runs against a fresh, empty ring.
package ringtest

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/runseal/runseal/keyring"
)

// Run checks that r keeps the keyring.Ring contract. r must be empty.
func Run(t *testing.T, r keyring.Ring) {
	t.Helper()
	ctx := context.Background()
	const a, b = "default/case/01M8SNY25MTQ9VP1YG42CGNP5K", "default/run/01M8SNY25MTQ9VP1YG42CGNP5M"
	k1, w1, err := r.Wrap(ctx, a)
	if err != nil {
		t.Fatalf("Wrap: %v", err)
	}
	k2, w2, err := r.Wrap(ctx, a)
	if err != nil {
		t.Fatalf("Wrap: %v", err)
	}
	if len(k1) != keyring.DataKeySize || bytes.Equal(k1, k2) || bytes.Equal(w1, w2) {
		t.Fatalf("two wraps gave keys %x, %x: want fresh 32-byte keys", k1, k2)
	}
	got, err := r.Unwrap(ctx, a, w1)
	if err != nil || !bytes.Equal(got, k1) {
		t.Fatalf("Unwrap = %x, %v; want %x", got, err, k1)
	}
	if _, _, err := r.Wrap(ctx, b); err != nil {
		t.Fatal(err)
	}
	// A wrapping moved to another scope does not unwrap there.
	if _, err := r.Unwrap(ctx, b, w1); !errors.Is(err, keyring.ErrUnwrap) {
		t.Errorf("Unwrap of scope a's wrapping under scope b = %v, want keyring.ErrUnwrap", err)
	}
	damaged := bytes.Clone(w1)
	damaged[len(damaged)-1] ^= 1
	if _, err := r.Unwrap(ctx, a, damaged); !errors.Is(err, keyring.ErrUnwrap) {
		t.Errorf("Unwrap of damaged bytes = %v, want keyring.ErrUnwrap", err)
	}
	if _, err := r.Unwrap(ctx, "default/case/01M8SNY25MTQ9VP1YG42CGNP5Z", w1); !errors.Is(err, keyring.ErrUnknownScope) {
		t.Errorf("Unwrap under a scope never created = %v, want keyring.ErrUnknownScope", err)
	}
	var se *keyring.ScopeError
	if _, err := r.Unwrap(ctx, "default/case/01M8SNY25MTQ9VP1YG42CGNP5Z", w1); !errors.As(err, &se) || se.Scope == "" {
		t.Errorf("an unwrap failure does not name its scope: %v", err)
	}
	if _, err := r.Erase(ctx, "default/case/01M8SNY25MTQ9VP1YG42CGNP5Z"); !errors.Is(err, keyring.ErrUnknownScope) {
		t.Errorf("Erase of an unknown scope = %v, want keyring.ErrUnknownScope", err)
	}
	const never = "default/case/01M8SNY25MTQ9VP1YG42CGNP5Z"
	if erased, err := r.Erased(ctx, a); err != nil || erased {
		t.Errorf("Erased of a held scope = %v, %v; want false, no error", erased, err)
	}
	if _, err := r.Erased(ctx, never); !errors.Is(err, keyring.ErrUnknownScope) || !errors.As(err, &se) {
		t.Errorf("Erased of a scope never created = %v, want a *keyring.ScopeError of keyring.ErrUnknownScope", err)
	}
	done, err := r.Erase(ctx, a)
	if err != nil || !done {
		t.Fatalf("Erase = %v, %v; want true", done, err)
	}
	again, err := r.Erase(ctx, a)
	if err != nil || again {
		t.Errorf("second Erase = %v, %v; want false (already erased), no error", again, err)
	}
	if _, err := r.Unwrap(ctx, a, w1); !errors.Is(err, keyring.ErrErased) {
		t.Errorf("Unwrap after erasure = %v, want keyring.ErrErased", err)
	}
	if erased, err := r.Erased(ctx, a); err != nil || !erased {
		t.Errorf("Erased after Erase = %v, %v; want true, no error", erased, err)
	}
	if erased, err := r.Erased(ctx, b); err != nil || erased {
		t.Errorf("erasing scope a made Erased(b) = %v, %v", erased, err)
	}
	if _, _, err := r.Wrap(ctx, a); !errors.Is(err, keyring.ErrErased) {
		t.Errorf("Wrap under an erased scope = %v, want keyring.ErrErased (an erased case never gets a key again)", err)
	}
	if _, err := r.Unwrap(ctx, b, w2); errors.Is(err, keyring.ErrErased) {
		t.Errorf("erasing scope a erased scope b")
	}
	scopes, err := r.Scopes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []keyring.Scope{{Name: a, Erased: true}, {Name: b}}
	if len(scopes) != 2 || scopes[0] != want[0] || scopes[1] != want[1] {
		t.Errorf("Scopes = %+v, want %+v", scopes, want)
	}
	for _, bad := range []string{"", "../x", "a//b", "a/./b", "a b", "a/b/c/d/e"} {
		if _, _, err := r.Wrap(ctx, bad); !errors.Is(err, keyring.ErrInvalidScope) {
			t.Errorf("Wrap(%q) = %v, want keyring.ErrInvalidScope", bad, err)
		}
		if _, err := r.Erased(ctx, bad); !errors.Is(err, keyring.ErrInvalidScope) {
			t.Errorf("Erased(%q) = %v, want keyring.ErrInvalidScope", bad, err)
		}
	}
}
