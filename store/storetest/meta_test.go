package storetest_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"slices"
	"strings"
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

// blind vouches for what it never looked at: its Verify returns the head
// without reading the chain, and its VerifyLog reports a sound log of the
// integrity checks' fixture without reading a node, and its inclusion
// proofs come from the run's position alone, without reading its leaf node.
type blind struct{ *sqlite.Store }

func (b blind) InclusionProof(ctx context.Context, run store.RunID) (*store.Inclusion, error) {
	return b.InclusionProofAt(ctx, run, 5)
}

func (b blind) InclusionProofAt(ctx context.Context, run store.RunID, size uint64) (*store.Inclusion, error) {
	ps, err := b.LogPositions(ctx, []store.RunID{run})
	if err != nil || ps[0] == nil {
		return nil, err
	}
	return &store.Inclusion{Index: ps[0].Index, Size: size, Leaf: ps[0].Leaf}, nil
}

func (b blind) Verify(ctx context.Context, run store.RunID) (store.Digest, error) {
	h, err := b.Head(ctx, run)
	return h.Hash, err
}

func (b blind) VerifyLog(context.Context) (store.LogReport, error) {
	return store.LogReport{Size: 5, Sealed: 5, Nodes: 8, Checkpoints: 2, Witnessed: 1}, nil
}

// TestSuiteCatchesBlindVerifiers: a store whose checks vouch for what they
// did not check fails the integrity checks, and a harness without Tamper
// reports them skipped rather than passed.
func TestSuiteCatchesBlindVerifiers(t *testing.T) {
	paths := map[store.Journal]string{}
	others := map[string]string{}
	for _, c := range storetest.Checks() {
		if !strings.HasPrefix(c, "integrity/") {
			others[c] = "not an integrity check"
		}
	}
	h := storetest.Harness{
		Skip: others,
		Open: func(tb testing.TB) (store.Journal, storetest.Clock) {
			clk := storetest.NewFakeClock()
			path := filepath.Join(tb.TempDir(), "j.db")
			s, err := sqlite.Open(context.Background(), path, sqlite.Options{Now: clk.Now})
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { s.Close() })
			j := blind{s}
			paths[j] = path
			return j, clk
		},
		Tamper: func(tb testing.TB, j store.Journal, query string, args ...any) {
			db, err := sql.Open("sqlite", "file:"+paths[j]+"?_pragma=busy_timeout(5000)")
			if err != nil {
				tb.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec(query, args...); err != nil {
				tb.Fatalf("tamper: %v", err)
			}
		},
	}
	r := storetest.Check(t, h)
	caught := map[string]bool{}
	for _, v := range r.Violations {
		if v.Invariant == "integrity" {
			caught[v.Check] = true
		}
	}
	for _, c := range storetest.Checks() {
		if strings.HasPrefix(c, "integrity/") && c != "integrity/sound-store-verifies" && c != "integrity/unreadable-outcome-row-refused" && !caught[c] {
			t.Errorf("a blind verifier passed %s", c)
		}
	}
	h.Tamper = nil
	r = storetest.Check(t, h)
	for _, c := range r.Checked {
		if strings.HasPrefix(c, "integrity/") {
			t.Errorf("%s ran without a Tamper", c)
		}
	}
}
