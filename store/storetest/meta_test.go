package storetest_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sqlite"
	"github.com/runseal/runseal/store/storetest"
)

// broken wraps a sound store and breaks one guarantee, to prove the suite
// can fail: a battery that cannot fail proves nothing.
type broken struct {
	store.Journal
	mode string
}

func (b *broken) Append(ctx context.Context, epoch store.Epoch, batch []store.Append) ([]store.Record, error) {
	recs, err := b.Journal.Append(ctx, epoch, batch)
	switch b.mode {
	case "drops exactly-once":
		var d *store.DuplicateEffectError
		if errors.As(err, &d) {
			return make([]store.Record, len(batch)), nil // pretends the duplicate was written
		}
	case "accepts a future epoch":
		var f *store.FencedError
		if errors.As(err, &f) && f.Held > f.Current {
			return b.Journal.Append(ctx, f.Current, batch)
		}
	}
	return recs, err
}

func (b *broken) RunsByOutcome(ctx context.Context, outcome string, limit int) ([]store.RunID, error) {
	if b.mode != "lists outcomes oldest first" {
		return b.Journal.RunsByOutcome(ctx, outcome, limit)
	}
	all, err := b.Journal.RunsByOutcome(ctx, outcome, store.MaxLimit)
	slices.Reverse(all)
	if len(all) > limit {
		all = all[:limit]
	}
	return all, err
}

func harness(mode string) storetest.Harness {
	return storetest.Harness{Open: func(tb testing.TB) (store.Journal, storetest.Clock) {
		clk := storetest.NewFakeClock()
		s, err := sqlite.Open(context.Background(), filepath.Join(tb.TempDir(), "j.db"), sqlite.Options{Now: clk.Now})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { s.Close() })
		if mode == "" {
			return s, clk
		}
		return &broken{Journal: s, mode: mode}, clk
	}}
}

func TestSuiteCatchesBrokenStores(t *testing.T) {
	for _, tc := range []struct{ mode, invariant string }{
		{"drops exactly-once", "exactly-once"},
		{"accepts a future epoch", "fencing"},
		{"lists outcomes oldest first", "outcome-index"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			r := storetest.Check(t, harness(tc.mode))
			if !slices.Contains(r.Invariants(), tc.invariant) {
				t.Fatalf("a store that %s passed the %q checks; violations: %v", tc.mode, tc.invariant, r.Violations)
			}
			for _, v := range r.Violations {
				t.Logf("caught: %s", v)
			}
		})
	}
}

func TestSoundStoreHasNoViolations(t *testing.T) {
	r := storetest.Check(t, harness(""))
	if len(r.Violations) != 0 {
		t.Fatalf("violations on a sound store: %v", r.Violations)
	}
	if len(r.Checked) < 35 {
		t.Fatalf("only %d checks ran, want at least 35", len(r.Checked))
	}
}

func TestRunFailsWhenNothingRan(t *testing.T) {
	skip := map[string]string{}
	for _, c := range storetest.Checks() {
		skip[c] = "meta-test"
	}
	r := storetest.Check(t, storetest.Harness{Open: harness("").Open, Skip: skip})
	if len(r.Checked) != 0 || len(r.Skipped) != len(storetest.Checks()) {
		t.Fatalf("skip map not honoured: checked %d", len(r.Checked))
	}
}
