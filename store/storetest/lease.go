package storetest

// Leases: a live lease is never stolen, every claim bumps the epoch, and
// only the holder renews or releases.

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/runseal/runseal/store"
)

// checkFirstLeaseFences: appends to an unleased run pass at any epoch, so
// the first Acquire must grant an epoch above every one in the chain, or a
// writer still appending at an old epoch passes the new owner's fence and
// the chain shows epochs going backwards.
func checkFirstLeaseFences(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	t.append(j, 9, note(run, "unleased writer"))
	t.append(j, 2, note(run, "another unleased writer"))
	l := t.acquire(j, run, "owner", 30*time.Second)
	if l.Epoch <= 9 {
		t.Fatalf("first Acquire after appends at epoch 9 granted epoch %d, want above 9", l.Epoch)
	}
	for _, e := range []store.Epoch{1, 2, 9} {
		_, err := j.Append(t.ctx, e, []store.Append{note(run, "late")})
		expect[*store.FencedError](t, err, fmt.Sprintf("append at epoch %d after the first lease (epoch %d)", e, l.Epoch))
	}
	t.append(j, l.Epoch, note(run, "owner writes"))
	fresh := store.NewRunID()
	if l := t.acquire(j, fresh, "owner", 30*time.Second); l.Epoch != 1 {
		t.Errorf("first Acquire of a run with no records granted epoch %d, want 1", l.Epoch)
	}
}

func checkLeaseNotStolen(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	l := t.acquire(j, run, "a", 30*time.Second)
	_, err := j.Acquire(t.ctx, run, "b", 30*time.Second)
	h := expect[*store.LeaseHeldError](t, err, "acquiring a live lease held by another")
	if h.Owner != "a" || h.Epoch != l.Epoch || h.Remaining <= 0 || h.Remaining > 30*time.Second {
		t.Errorf("LeaseHeld = %+v, want owner a epoch %d and 0 < remaining <= 30s", h, l.Epoch)
	}
}

func checkTakeover(t *T) {
	j, clk := t.Open()
	run := store.NewRunID()
	l1 := t.acquire(j, run, "a", 2*time.Second)
	clk.Advance(3 * time.Second)
	l2 := t.acquire(j, run, "b", 30*time.Second)
	if l2.Epoch <= l1.Epoch {
		t.Fatalf("takeover epoch %d, want above %d", l2.Epoch, l1.Epoch)
	}
	t.append(j, l2.Epoch, note(run, "new owner writes"))
}

func checkAcquireNeverRenews(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	t.acquire(j, run, "a", 30*time.Second)
	_, err := j.Acquire(t.ctx, run, "a", 30*time.Second)
	expect[*store.LeaseHeldError](t, err, "the holder acquiring its own live lease")
}

func checkRenew(t *T) {
	j, clk := t.Open()
	run := store.NewRunID()
	l := t.acquire(j, run, "a", 5*time.Second)
	clk.Advance(3 * time.Second)
	r, err := j.Renew(t.ctx, run, "a", l.Epoch, 10*time.Second)
	if err != nil {
		t.Fatalf("renew by the holder: %v", err)
	}
	if r.Epoch != l.Epoch || !r.Expires.After(l.Expires) {
		t.Errorf("renewal = %+v, want epoch kept and expiry extended past %v", r, l.Expires)
	}
	for _, c := range []struct {
		owner string
		epoch store.Epoch
	}{{"b", l.Epoch}, {"a", l.Epoch + 1}} {
		_, err := j.Renew(t.ctx, run, c.owner, c.epoch, 10*time.Second)
		expect[*store.LeaseNotHeldError](t, err, fmt.Sprintf("renew by (%s, %d)", c.owner, c.epoch))
	}
	clk.Advance(12 * time.Second) // lapsed
	_, err = j.Renew(t.ctx, run, "a", l.Epoch, 10*time.Second)
	expect[*store.LeaseNotHeldError](t, err, "renewing a lapsed lease")
	// A renewal never claims: the lapsed lease is still free for anyone.
	l2 := t.acquire(j, run, "b", 10*time.Second)
	if l2.Epoch != l.Epoch+1 {
		t.Errorf("epoch after lapse = %d, want %d", l2.Epoch, l.Epoch+1)
	}
	if err := j.ReleaseLease(t.ctx, run, l2.Epoch); err != nil {
		t.Fatalf("release: %v", err)
	}
	_, err = j.Renew(t.ctx, run, "b", l2.Epoch, 10*time.Second)
	expect[*store.LeaseNotHeldError](t, err, "renewing a released lease")
}

func checkReleaseFree(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	l := t.acquire(j, run, "a", time.Hour)
	if err := j.ReleaseLease(t.ctx, run, l.Epoch); err != nil {
		t.Fatalf("release: %v", err)
	}
	if err := j.ReleaseLease(t.ctx, run, l.Epoch); err != nil {
		t.Fatalf("second release: %v", err)
	}
	l2 := t.acquire(j, run, "b", time.Hour)
	if l2.Epoch != l.Epoch+1 {
		t.Errorf("acquire after release: epoch %d, want %d", l2.Epoch, l.Epoch+1)
	}
}

func checkReleaseKeepsEpoch(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	l := t.acquire(j, run, "a", time.Hour)
	if err := j.ReleaseLease(t.ctx, run, l.Epoch); err != nil {
		t.Fatalf("release: %v", err)
	}
	// The released epoch still fences: a future epoch is refused.
	_, err := j.Append(t.ctx, l.Epoch+1, []store.Append{note(run, "x")})
	expect[*store.FencedError](t, err, "append with an epoch never granted after release")
	if abandoned, _ := j.AbandonedRuns(t.ctx, 10); contains(abandoned, run) {
		t.Errorf("a released lease is listed as abandoned")
	}
}

func checkFencedRelease(t *T) {
	j, clk := t.Open()
	run := store.NewRunID()
	l1 := t.acquire(j, run, "a", 2*time.Second)
	clk.Advance(3 * time.Second)
	l2 := t.acquire(j, run, "b", 30*time.Second)
	if err := j.ReleaseLease(t.ctx, run, l1.Epoch); err != nil {
		t.Errorf("release by a fenced caller is not an error, got %v", err)
	}
	_, err := j.Acquire(t.ctx, run, "c", 30*time.Second)
	expect[*store.LeaseHeldError](t, err, "acquire after a fenced caller released")
	if _, err := j.Renew(t.ctx, run, "b", l2.Epoch, 30*time.Second); err != nil {
		t.Errorf("the new owner lost its lease to a fenced release: %v", err)
	}
}

func checkTTL(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	for _, ttl := range []time.Duration{0, -time.Second, 999 * time.Millisecond, 1 << 62} {
		_, err := j.Acquire(t.ctx, run, "a", ttl)
		expect[*store.InvalidArgumentError](t, err, fmt.Sprintf("acquire with ttl %v", ttl))
	}
	l := t.acquire(j, run, "a", 1500*time.Millisecond)
	_, err := j.Renew(t.ctx, run, "a", l.Epoch, 500*time.Millisecond)
	expect[*store.InvalidArgumentError](t, err, "renew with a sub-second ttl")
	_, err = j.Acquire(t.ctx, run, "", time.Minute)
	expect[*store.InvalidArgumentError](t, err, "acquire with a blank owner")
}

func checkAcquireRace(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	const n = 16
	var wg sync.WaitGroup
	var mu sync.Mutex
	var won []store.Lease
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			l, err := j.Acquire(t.ctx, run, fmt.Sprintf("owner-%d", i), time.Minute)
			mu.Lock()
			defer mu.Unlock()
			var h *store.LeaseHeldError
			switch {
			case err == nil:
				won = append(won, l)
			case !errors.As(err, &h):
				t.Errorf("racing acquire: %v", err)
			}
		}(i)
	}
	wg.Wait()
	if len(won) != 1 {
		t.Fatalf("%d racing acquires won, want exactly 1", len(won))
	}
}
