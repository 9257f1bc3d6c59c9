package api

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"

	"github.com/runseal/runseal/store"
)

// DefaultTokenCacheTTL is how long a server trusts a successful token check
// before asking the token store again: the longest a revoked token keeps
// working on a running server (spec/http.md §1).
const DefaultTokenCacheTTL = time.Second

// maxCachedTokens bounds the cache: live tokens are few, and when more than
// this many are in use at once the cache starts over rather than grow.
const maxCachedTokens = 4096

// tokenCache remembers successful token checks for a short time, so that a
// busy client does not cost a store read per request. It is keyed by the
// SHA-256 of the whole presented token, never by its id alone, so a cached
// entry only ever answers the exact secret that passed the full check; a
// failed check is never cached. Revocation is honoured by the entry's age:
// an entry older than ttl is checked against the store again.
type tokenCache struct {
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	entries map[store.Digest]cachedToken
}

type cachedToken struct {
	tok     *store.Token
	checked time.Time
}

func newTokenCache(ttl time.Duration, now func() time.Time) *tokenCache {
	if now == nil {
		now = time.Now
	}
	return &tokenCache{ttl: ttl, now: now, entries: map[store.Digest]cachedToken{}}
}

// authenticate is Authenticate with the cache in front of it. A nil cache
// or a ttl of zero or less checks the store every time.
func (c *tokenCache) authenticate(ctx context.Context, ts store.TokenStore, tok string) (*store.Token, error) {
	if c == nil || c.ttl <= 0 {
		return Authenticate(ctx, ts, tok)
	}
	key := store.Digest(sha256.Sum256([]byte(tok)))
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok && now.Sub(e.checked) < c.ttl && !now.Before(e.checked) {
		return e.tok, nil
	}
	t, err := Authenticate(ctx, ts, tok)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		delete(c.entries, key)
		return nil, err
	}
	if len(c.entries) >= maxCachedTokens {
		clear(c.entries)
	}
	c.entries[key] = cachedToken{tok: t, checked: now}
	return t, nil
}
