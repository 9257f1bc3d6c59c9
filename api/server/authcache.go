package server

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
//
// Concurrent checks of one token share one store read: when a busy
// client's entry expires, every request in flight would otherwise miss at
// once and each read the store (512 reads for 512 connections, every
// second, in bench --http). Those that join a check in flight get its
// answer, which was read after the entry expired, so revocation is still
// honoured within ttl.
type tokenCache struct {
	ttl time.Duration
	now func() time.Time

	mu       sync.Mutex
	entries  map[store.Digest]cachedToken
	inflight map[store.Digest]*tokenCheck
	joined   func() // test hook: a caller joined a check in flight
}

// tokenCheck is one store read of a token that others may wait for.
type tokenCheck struct {
	done chan struct{} // closed once tok and err are set
	tok  *store.Token
	err  error
}

type cachedToken struct {
	tok     *store.Token
	checked time.Time
}

func newTokenCache(ttl time.Duration, now func() time.Time) *tokenCache {
	if now == nil {
		now = time.Now
	}
	return &tokenCache{ttl: ttl, now: now, entries: map[store.Digest]cachedToken{}, inflight: map[store.Digest]*tokenCheck{}}
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
	if e, ok := c.entries[key]; ok && now.Sub(e.checked) < c.ttl && !now.Before(e.checked) {
		c.mu.Unlock()
		return e.tok, nil
	}
	ch, ok := c.inflight[key]
	if ok {
		if c.joined != nil {
			c.joined()
		}
	} else {
		ch = &tokenCheck{done: make(chan struct{})}
		c.inflight[key] = ch
		// The read is shared, so it runs apart from the caller that
		// started it: that caller's going away must not fail the others,
		// and it may go away as they may.
		go c.check(context.WithoutCancel(ctx), ts, tok, key, now, ch)
	}
	c.mu.Unlock()
	select {
	case <-ch.done:
		return ch.tok, ch.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// check reads tok from the store for ch and keeps a success as of now.
func (c *tokenCache) check(ctx context.Context, ts store.TokenStore, tok string, key store.Digest, now time.Time, ch *tokenCheck) {
	ch.tok, ch.err = Authenticate(ctx, ts, tok)
	c.mu.Lock()
	delete(c.inflight, key)
	if ch.err != nil {
		delete(c.entries, key)
	} else {
		if len(c.entries) >= maxCachedTokens {
			clear(c.entries)
		}
		c.entries[key] = cachedToken{tok: ch.tok, checked: now}
	}
	c.mu.Unlock()
	close(ch.done)
}
