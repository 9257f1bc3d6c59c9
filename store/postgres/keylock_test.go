package postgres

import (
	"context"
	"testing"
	"time"
)

// TestAdvisoryKeyVector pins the advisory lock key of spec/lifecycle.md
// 14.2 (computed independently with Python's hashlib): processes built
// from different versions must lock the same study with the same key.
func TestAdvisoryKeyVector(t *testing.T) {
	const want = -116654348060921036
	if got := advisoryKey("runseal", "default", "lifecycle/study/01J9Z8Q4W5X6Y7Z8A9B0C1D2E3"); got != want {
		t.Fatalf("advisory key: got %d, want %d", got, want)
	}
}

// TestLockKeyExcludes: a second LockKey of the same key waits until the
// first is unlocked, across stores (as across processes), and a different
// key or tenant does not wait.
func TestLockKeyExcludes(t *testing.T) {
	ctx := context.Background()
	tenant := freshTenant()
	a, b := openStore(t, Options{Tenant: tenant}), openStore(t, Options{Tenant: tenant})
	l, err := a.LockKey(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	// Neither another key nor the same key of another tenant waits.
	for _, x := range []struct {
		s   *Store
		key string
	}{{b, "other"}, {openStore(t, Options{}), "k"}} {
		other, err := x.s.LockKey(ctx, x.key)
		if err != nil {
			t.Fatal(err)
		}
		other.Close()
	}
	got := make(chan error, 1)
	go func() {
		l2, err := b.LockKey(ctx, "k")
		if err == nil {
			err = l2.Close()
		}
		got <- err
	}()
	// A correct lock never grants this; a broken one grants it at once.
	wait, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	short, err := b.LockKey(wait, "k")
	if err == nil {
		short.Close()
		t.Fatal("a held key was granted to a second holder")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiting holder: %v", err)
	}
}
