package storetest

// Auth: API tokens are kept hashed.

import (
	"crypto/sha256"
	"github.com/runseal/runseal/store"
)

// checkTokens exercises store.TokenStore, for backends that offer it.
func checkTokens(t *T) {
	j, _ := t.Open()
	ts, ok := j.(store.TokenStore)
	if !ok {
		return // optional interface
	}
	h := sha256.Sum256([]byte("secret"))
	// Tokens are server-wide rows; a fresh id keeps handles that share one
	// database (each on its own tenant) from colliding.
	id := store.NewRunID().String()
	tok := store.Token{ID: id, Tenant: "default", Role: store.RoleWriter, Name: "ci", Hash: h}
	if err := ts.CreateToken(t.ctx, tok); err != nil {
		t.Fatalf("CreateToken: %v", err)
	}
	expect[*store.InvalidArgumentError](t, ts.CreateToken(t.ctx, tok), "creating a token id twice")
	expect[*store.InvalidArgumentError](t, ts.CreateToken(t.ctx, store.Token{ID: id + "x", Tenant: "default", Role: "admin"}), "a token with an unknown role")
	got, err := ts.TokenByID(t.ctx, id)
	if err != nil || got == nil || got.Hash != store.Digest(h) || got.Role != store.RoleWriter || got.Revoked != nil {
		t.Fatalf("TokenByID = %+v, %v", got, err)
	}
	if got, err := ts.TokenByID(t.ctx, "nope"); err != nil || got != nil {
		t.Errorf("TokenByID(unknown) = %+v, %v", got, err)
	}
	if ok, err := ts.RevokeToken(t.ctx, id); err != nil || !ok {
		t.Errorf("RevokeToken = %v, %v", ok, err)
	}
	if ok, err := ts.RevokeToken(t.ctx, id); err != nil || ok {
		t.Errorf("RevokeToken twice = %v, %v; want false", ok, err)
	}
	list, err := ts.Tokens(t.ctx)
	found := false
	for _, l := range list {
		if l.ID == id {
			found = l.Revoked != nil && l.Hash == store.Digest(h)
		}
	}
	if err != nil || !found {
		t.Errorf("Tokens = %+v, %v; want token %s listed, revoked", list, err, id)
	}
}
