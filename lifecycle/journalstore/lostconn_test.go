package journalstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/runseal/runseal/internal/pgcut"
	"github.com/runseal/runseal/internal/pgtest"
	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/journalstore"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/postgres"
)

// splitJournal reads, locks and reads heads through a direct store and
// writes through one whose connections pass the commit-cutting proxy, so
// that the COMMIT the proxy cuts is a write's, never a read's.
type splitJournal struct {
	*postgres.Store                 // direct
	w               *postgres.Store // through the proxy
}

func (j splitJournal) Append(ctx context.Context, epoch store.Epoch, batch []store.Append) ([]store.Record, error) {
	return j.w.Append(ctx, epoch, batch)
}
func (j splitJournal) Acquire(ctx context.Context, run store.RunID, owner string, ttl time.Duration) (store.Lease, error) {
	return j.w.Acquire(ctx, run, owner, ttl)
}
func (j splitJournal) ReleaseLease(ctx context.Context, run store.RunID, epoch store.Epoch) error {
	return j.w.ReleaseLease(ctx, run, epoch)
}
func (j splitJournal) Seal(ctx context.Context, run store.RunID, epoch store.Epoch, outcome string) (store.Digest, error) {
	return j.w.Seal(ctx, run, epoch, outcome)
}
func (j splitJournal) Atomic() store.AtomicJournal { return j.w.Atomic() }

// trialState is what a lost-connection case compares: a trial's state and
// owner epoch, and its outbox record's phase.
func trialState(t *testing.T, s *journalstore.Storage, study lifecycle.StudyID, trial lifecycle.TrialID) string {
	t.Helper()
	v, err := s.StudyView(context.Background(), study)
	if err != nil {
		t.Fatalf("study view: %v", err)
	}
	out := fmt.Sprintf("%d trials", len(v.Trials))
	for _, tv := range v.Trials {
		if tv.Trial == trial {
			out += fmt.Sprintf("; %s epoch %d sealed %t", tv.State, tv.Epoch, tv.Sealed)
		}
	}
	for _, o := range v.Outbox {
		if o.Key.Trial == trial {
			out += "; outbox " + string(o.Phase)
		}
	}
	return out
}

// TestLostConnectionMidTransition cuts the connection of a transition's
// first write at its COMMIT, once after the server committed and once
// before, through the protocol-aware proxy: the caller hears
// store.ErrCommitUnknown (inside KindStorage), the study still loads from
// the journal, and once a storage has completed what the records call
// for, the transition is whole (the commit landed) or absent (it did
// not), never half, and the storage that lost its connection goes on.
func TestLostConnectionMidTransition(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cut, pcfg := pgcut.New(t, cfg)
	type fixture struct {
		sd    *journalstore.Storage // direct: prepares and checks
		sp    *journalstore.Storage // writes through the proxy
		study lifecycle.StudyID
		trial lifecycle.TrialID
		tok   lifecycle.TrialOwnerToken
		fin   lifecycle.FinalizationToken
	}
	cases := []struct {
		name string
		// prepare brings the trial to where the transition starts.
		prepare func(f *fixture)
		do      func(f *fixture) error
		// whole says whether the transition is whole after a cut in
		// mode; it is absent otherwise.
		whole func(mode int32) bool
	}{
		{"reserve", func(f *fixture) {}, func(f *fixture) error {
			_, err := f.sp.ReserveAndCreateIfBudget(ctx, lifecycle.ReserveAndCreateRequest{Study: f.study, MaxTrials: 10})
			return err
		}, func(mode int32) bool { return mode == pgcut.CutAfter }},
		{"claim", func(f *fixture) {
			out, err := f.sd.ReserveAndCreateIfBudget(ctx, lifecycle.ReserveAndCreateRequest{Study: f.study, MaxTrials: 10})
			must(t, err)
			f.trial = out.Trial
		}, func(f *fixture) error {
			_, err := f.sp.Claim(ctx, lifecycle.ClaimRequest{Trial: f.trial, Owner: "cut"})
			return err
		}, func(int32) bool { return false }}, // the cut write is the lease; TrialClaimed, the commit point, never went
		{"terminal-with-intent", func(f *fixture) {
			f.tok = running(t, f.sd, f.study)
			f.trial = f.tok.Trial
		}, func(f *fixture) error {
			_, err := f.sp.TerminalWithIntent(ctx, lifecycle.TerminalRequest{Owner: f.tok, State: lifecycle.TrialComplete, Values: []float64{1}}, mpIntent)
			return err
		}, func(mode int32) bool { return mode == pgcut.CutAfter }},
		{"fail-stale", func(f *fixture) {
			f.tok = running(t, f.sd, f.study)
			f.trial = f.tok.Trial
		}, func(f *fixture) error {
			obs, err := f.sp.Observe(ctx, f.trial)
			must(t, err)
			_, err = f.sp.FailStale(ctx, lifecycle.FailStaleRequest{Observed: obs, Grace: time.Second, Intent: mpIntent})
			return err
		}, func(mode int32) bool { return mode == pgcut.CutAfter }},
		{"advance-outbox-owned", func(f *fixture) {
			f.tok = running(t, f.sd, f.study)
			f.trial = f.tok.Trial
			_, err := f.sd.TerminalWithIntent(ctx, lifecycle.TerminalRequest{Owner: f.tok, State: lifecycle.TrialComplete, Values: []float64{1}}, mpIntent)
			must(t, err)
			obs, err := f.sd.ObserveFinalization(ctx, f.study)
			must(t, err)
			f.fin, err = f.sd.AcquireFinalization(ctx, lifecycle.FinalizationAcquireRequest{Study: f.study, Holder: "fin", Observed: obs})
			must(t, err)
		}, func(f *fixture) error {
			_, err := f.sp.AdvanceOutboxOwned(ctx, f.fin, lifecycle.OutboxAdvanceRequest{Key: lifecycle.OutboxKey{Trial: f.trial, Epoch: f.tok.Epoch}, Phase: lifecycle.PhaseCallbacks})
			return err
		}, func(mode int32) bool { return mode == pgcut.CutAfter }},
	}
	for _, tc := range cases {
		for _, mode := range []int32{pgcut.CutAfter, pgcut.CutBefore} {
			name := tc.name + map[int32]string{pgcut.CutAfter: "/commit-landed", pgcut.CutBefore: "/commit-lost"}[mode]
			t.Run(name, func(t *testing.T) {
				tenant := "cut-" + strings.ToLower(store.NewRunID().String())
				direct, err := postgres.Open(ctx, dsn, postgres.Options{Tenant: tenant, MaxConns: 8})
				must(t, err)
				defer direct.Close()
				pool, err := pgxpool.NewWithConfig(ctx, pcfg.Copy())
				must(t, err)
				defer pool.Close()
				proxied, err := postgres.New(ctx, pool, postgres.Options{Tenant: tenant})
				must(t, err)
				defer proxied.Close()
				f := &fixture{}
				f.sd, err = journalstore.New(direct)
				must(t, err)
				defer f.sd.Close()
				f.sp, err = journalstore.New(splitJournal{Store: direct, w: proxied})
				must(t, err)
				defer f.sp.Close()
				f.study, err = f.sd.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1})
				must(t, err)
				tc.prepare(f)
				before := trialState(t, f.sd, f.study, f.trial)
				cut.Cuts.Store(0)
				cut.Arm(mode)
				err = tc.do(f)
				cut.Arm(pgcut.CutOff)
				if cut.Cuts.Load() != 1 {
					t.Fatalf("the proxy cut %d commits, want 1 (err %v)", cut.Cuts.Load(), err)
				}
				if !errors.Is(err, store.ErrCommitUnknown) || lifecycle.KindOf(err) != lifecycle.KindStorage {
					t.Fatalf("want a storage error caused by store.ErrCommitUnknown, got %v", err)
				}
				if _, err := journalstore.ReadStudyView(ctx, direct, f.study); err != nil {
					t.Fatalf("the study does not load after the cut: %v", err)
				}
				// The study's derived rows committed with the cut
				// transaction or not at all.
				checkRowsAtHead(t, ctx, direct, f.study)
				// The direct storage completes what the records call for.
				after := trialState(t, f.sd, f.study, f.trial)
				if tc.whole(mode) == (after == before) {
					t.Fatalf("after a cut with the commit %s: before %q, after %q", map[bool]string{true: "landed", false: "lost"}[mode == pgcut.CutAfter], before, after)
				}
				h, err := readHistory(ctx, direct, string(f.study), 10)
				must(t, err)
				for _, v := range h.check() {
					t.Errorf("violation: %s", v)
				}
				v, err := journalstore.ReadStudyView(ctx, direct, f.study)
				must(t, err)
				if len(v.Pending) > 0 {
					t.Errorf("pending after recovery: %v", v.Pending)
				}
				checkListing(t, ctx, f.sd, direct, f.study)
				// The storage that lost its connection goes on, from the
				// journal's state.
				if got := trialState(t, f.sp, f.study, f.trial); got != after {
					t.Errorf("the cut storage shows %q, the journal %q", got, after)
				}
				if _, err := f.sp.ReserveAndCreateIfBudget(ctx, lifecycle.ReserveAndCreateRequest{Study: f.study, MaxTrials: 10}); err != nil {
					t.Errorf("the cut storage's next transition: %v", err)
				}
			})
		}
	}
}

func running(t *testing.T, s *journalstore.Storage, study lifecycle.StudyID) lifecycle.TrialOwnerToken {
	t.Helper()
	ctx := context.Background()
	out, err := s.ReserveAndCreateIfBudget(ctx, lifecycle.ReserveAndCreateRequest{Study: study, MaxTrials: 10})
	must(t, err)
	tok, err := s.Claim(ctx, lifecycle.ClaimRequest{Trial: out.Trial, Owner: "owner"})
	must(t, err)
	return tok
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
