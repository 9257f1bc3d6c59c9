package server

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/store"
)

// memTokens is a TokenStore in memory that counts its lookups.
type memTokens struct {
	mu      sync.Mutex
	tokens  map[string]store.Token
	lookups int
}

func (m *memTokens) CreateToken(_ context.Context, t store.Token) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tokens == nil {
		m.tokens = map[string]store.Token{}
	}
	m.tokens[t.ID] = t
	return nil
}

func (m *memTokens) Tokens(context.Context) ([]store.Token, error) { return nil, nil }

func (m *memTokens) RevokeToken(_ context.Context, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tokens[id]
	if !ok || t.Revoked != nil {
		return false, nil
	}
	now := time.Now()
	t.Revoked = &now
	m.tokens[id] = t
	return true, nil
}

func (m *memTokens) TokenByID(_ context.Context, id string) (*store.Token, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lookups++
	t, ok := m.tokens[id]
	if !ok {
		return nil, nil
	}
	return &t, nil
}

func (m *memTokens) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lookups
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func newMemToken(t *testing.T, ts *memTokens) (id, secret string) {
	t.Helper()
	id, secret, hash, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.CreateToken(context.Background(), store.Token{ID: id, Tenant: "default", Role: store.RoleWriter, Hash: hash}); err != nil {
		t.Fatal(err)
	}
	return id, secret
}

// TestTokenCache_RevokedTokenRefusedAfterTTL: a revoked token keeps
// working from the cache for less than the TTL, never longer; and within
// the TTL the store is asked once, not per request.
func TestTokenCache_RevokedTokenRefusedAfterTTL(t *testing.T) {
	ctx := context.Background()
	ts := &memTokens{}
	id, secret := newMemToken(t, ts)
	clk := &fakeClock{t: time.Unix(1000, 0)}
	c := newTokenCache(time.Second, clk.now)
	for range 10 {
		if _, err := c.authenticate(ctx, ts, secret); err != nil {
			t.Fatal(err)
		}
	}
	if n := ts.count(); n != 1 {
		t.Errorf("10 checks within the TTL asked the store %d times, want 1", n)
	}
	if ok, _ := ts.RevokeToken(ctx, id); !ok {
		t.Fatal("revoke failed")
	}
	clk.t = clk.t.Add(999 * time.Millisecond)
	if _, err := c.authenticate(ctx, ts, secret); err != nil {
		t.Fatalf("within the TTL: %v (the cache may still answer)", err)
	}
	clk.t = clk.t.Add(time.Millisecond)
	if _, err := c.authenticate(ctx, ts, secret); !errors.Is(err, api.ErrUnauthorized) {
		t.Fatalf("a revoked token one TTL after its check: %v, want ErrUnauthorized", err)
	}
	// A clock that steps back does not extend an entry's life.
	id2, secret2 := newMemToken(t, ts)
	if _, err := c.authenticate(ctx, ts, secret2); err != nil {
		t.Fatal(err)
	}
	ts.RevokeToken(ctx, id2)
	clk.t = clk.t.Add(-time.Hour)
	if _, err := c.authenticate(ctx, ts, secret2); !errors.Is(err, api.ErrUnauthorized) {
		t.Fatalf("revoked token after the clock stepped back: %v, want ErrUnauthorized", err)
	}
}

// TestTokenCache_WrongSecretOfCachedIDRefused: a cached check answers only
// the exact token that passed it, never another secret with the same id;
// failures are not cached.
func TestTokenCache_WrongSecretOfCachedIDRefused(t *testing.T) {
	ctx := context.Background()
	ts := &memTokens{}
	_, secret := newMemToken(t, ts)
	c := newTokenCache(time.Hour, nil)
	if _, err := c.authenticate(ctx, ts, secret); err != nil {
		t.Fatal(err)
	}
	alt := "A"
	if secret[len(secret)-1] == 'A' {
		alt = "B"
	}
	forged := secret[:len(secret)-1] + alt
	for range 2 {
		if _, err := c.authenticate(ctx, ts, forged); !errors.Is(err, api.ErrUnauthorized) {
			t.Fatalf("a forged secret of a cached id: %v, want ErrUnauthorized", err)
		}
	}
	if n := ts.count(); n != 3 {
		t.Errorf("store asked %d times, want 3 (the first check and both forgeries)", n)
	}
}

// TestTokenCache_Bounded: more live tokens than the bound never grow the
// cache past it.
func TestTokenCache_Bounded(t *testing.T) {
	ctx := context.Background()
	ts := &memTokens{}
	c := newTokenCache(time.Hour, nil)
	for range maxCachedTokens + 10 {
		_, secret := newMemToken(t, ts)
		if _, err := c.authenticate(ctx, ts, secret); err != nil {
			t.Fatal(err)
		}
		if len(c.entries) > maxCachedTokens {
			t.Fatalf("cache holds %d entries, bound %d", len(c.entries), maxCachedTokens)
		}
	}
}

// TestTokenCache_Off: a TTL below zero asks the store every time, so a
// revocation is seen by the very next request.
func TestTokenCache_Off(t *testing.T) {
	ctx := context.Background()
	ts := &memTokens{}
	id, secret := newMemToken(t, ts)
	c := newTokenCache(-1, nil)
	if _, err := c.authenticate(ctx, ts, secret); err != nil {
		t.Fatal(err)
	}
	ts.RevokeToken(ctx, id)
	if _, err := c.authenticate(ctx, ts, secret); !errors.Is(err, api.ErrUnauthorized) {
		t.Fatalf("with the cache off a revoked token: %v, want ErrUnauthorized", err)
	}
}

// blockingTokens holds every TokenByID until release is closed, and says
// when one has started.
type blockingTokens struct {
	*memTokens
	entered chan struct{}
	release chan struct{}
}

func (b *blockingTokens) TokenByID(ctx context.Context, id string) (*store.Token, error) {
	b.entered <- struct{}{}
	<-b.release
	if err := ctx.Err(); err != nil {
		return nil, err // as a database read would fail
	}
	return b.memTokens.TokenByID(ctx, id)
}

// TestTokenCache_ExpiryUnderLoadIsOneStoreRead: when a busy client's
// entry expires, the requests in flight share one store read instead of
// each reading the store (a stampede of one read per connection, every
// TTL); a caller whose own request goes away is not held, whether it
// started the read or joined it, and its going away fails no one else.
func TestTokenCache_ExpiryUnderLoadIsOneStoreRead(t *testing.T) {
	mem := &memTokens{}
	_, secret := newMemToken(t, mem)
	bt := &blockingTokens{memTokens: mem, entered: make(chan struct{}, 100), release: make(chan struct{})}
	clock := &fakeClock{t: time.Unix(1000, 0)}
	c := newTokenCache(time.Second, clock.now)
	const n = 16
	joined := make(chan struct{}, n)
	c.joined = func() { joined <- struct{}{} }

	leaderCtx, cancelLeader := context.WithCancel(context.Background())
	errs := make(chan error, n)
	go func() {
		_, err := c.authenticate(leaderCtx, bt, secret)
		errs <- err
	}()
	<-bt.entered
	cancelLeader() // the first caller goes away while its read is in flight
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller that started the read and went away: %v, want context.Canceled", err)
	}
	goneCtx, cancelGone := context.WithCancel(context.Background())
	for i := 1; i < n; i++ {
		ctx := context.Background()
		if i == 1 {
			ctx = goneCtx
		}
		go func() {
			_, err := c.authenticate(ctx, bt, secret)
			errs <- err
		}()
	}
	for i := 1; i < n; i++ {
		<-joined
	}
	cancelGone()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("a waiter whose request went away: %v, want context.Canceled", err)
	}
	close(bt.release)
	for i := 2; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatalf("a caller sharing the read: %v", err)
		}
	}
	if got := mem.count(); got != 1 {
		t.Fatalf("%d concurrent checks of one expired token read the store %d times, want 1", n, got)
	}
	select {
	case <-bt.entered:
		t.Fatal("a second store read started")
	default:
	}
}
