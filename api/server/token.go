package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"strings"

	"github.com/runseal/runseal/store"
)

// Token format: "rs_" + 16 hex id + "_" + 43 base64url secret characters.
// The id finds the row; the SHA-256 of the whole token is what is stored
// and compared, so a leaked database holds no usable token.
const tokenPrefix = "rs_"

// NewToken mints a bearer token: its id (the row's key), the secret to hand
// to its holder once, and the hash to store.
func NewToken() (id, secret string, hash store.Digest, err error) {
	var b [8 + 32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", hash, err
	}
	id = hex.EncodeToString(b[:8])
	secret = tokenPrefix + id + "_" + base64.RawURLEncoding.EncodeToString(b[8:])
	return id, secret, sha256.Sum256([]byte(secret)), nil
}

// TokenID returns the id part of a well-formed token.
func TokenID(tok string) (string, bool) {
	rest, ok := strings.CutPrefix(tok, tokenPrefix)
	if !ok || len(rest) != 16+1+43 || rest[16] != '_' {
		return "", false
	}
	if _, err := hex.DecodeString(rest[:16]); err != nil {
		return "", false
	}
	return rest[:16], true
}

// Authenticate returns the live token whose secret is tok, or an
// *Error wrapping ErrUnauthorized. The comparison is constant-time and made
// even when the id is unknown, so timing does not tell a guessed id from a
// guessed secret.
func Authenticate(ctx context.Context, ts store.TokenStore, tok string) (*store.Token, error) {
	id, ok := TokenID(tok)
	if !ok {
		return nil, errUnauthorized
	}
	t, err := ts.TokenByID(ctx, id)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(tok))
	var want store.Digest
	if t != nil {
		want = t.Hash
	}
	if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 || t == nil || t.Revoked != nil {
		return nil, errUnauthorized
	}
	return t, nil
}
