package journalstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runseal/runseal/internal/pgtest"
	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/journalstore"
	"github.com/runseal/runseal/lifecycle/lifecycletest"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/postgres"
)

// fleet is several JournalStorages on one PostgreSQL journal tenant, each
// with its own connection pool and its own views, as separate processes
// have: every call goes to the next one in turn, so the conformance
// suite's sequences and races cross storages at every step, and only the
// shared-store protocol (the study's advisory lock, the incremental
// refresh, the head-checked append) keeps them correct.
type fleet struct {
	members []*journalstore.Storage
	pgs     []*postgres.Store
	n       atomic.Uint64
	check   func(error)
}

func (f *fleet) next() *journalstore.Storage {
	return f.members[int(f.n.Add(1)%uint64(len(f.members)))]
}

// openFleet opens n storages on the tenant, each on its own store.
func openFleet(dsn, tenant string, n int, group int) (*fleet, error) {
	f := &fleet{}
	for range n {
		pg, err := postgres.Open(context.Background(), dsn, postgres.Options{Tenant: tenant, MaxGroup: group, MaxConns: 4})
		if err != nil {
			f.close()
			return nil, err
		}
		s, err := journalstore.New(pg)
		if err != nil {
			pg.Close()
			f.close()
			return nil, err
		}
		f.members = append(f.members, s)
		f.pgs = append(f.pgs, pg)
	}
	return f, nil
}

func (f *fleet) close() error {
	var errs []error
	for _, s := range f.members {
		errs = append(errs, s.Close())
	}
	for _, pg := range f.pgs {
		errs = append(errs, pg.Close())
	}
	return errors.Join(errs...)
}

// Close checks that every member's view, brought up to date, is the one
// the journal holds, then closes them.
func (f *fleet) Close() error {
	if f.check != nil {
		for i, s := range f.members {
			if err := checkRebuild(context.Background(), s, f.pgs[i]); err != nil {
				f.check(fmt.Errorf("member %d: %w", i, err))
			}
		}
	}
	return f.close()
}

func (f *fleet) CreateStudy(ctx context.Context, spec lifecycle.StudySpec) (lifecycle.StudyID, error) {
	return f.next().CreateStudy(ctx, spec)
}

func (f *fleet) CreateUnmanagedTrial(ctx context.Context, study lifecycle.StudyID, state lifecycle.TrialState) (lifecycle.TrialID, error) {
	return f.next().CreateUnmanagedTrial(ctx, study, state)
}

func (f *fleet) ReserveAndCreateIfBudget(ctx context.Context, req lifecycle.ReserveAndCreateRequest) (lifecycle.ReservationOutcome, error) {
	return f.next().ReserveAndCreateIfBudget(ctx, req)
}

func (f *fleet) Abandon(ctx context.Context, req lifecycle.AbandonRequest) (bool, error) {
	return f.next().Abandon(ctx, req)
}

func (f *fleet) Observe(ctx context.Context, trial lifecycle.TrialID) (lifecycle.LeaseObservation, error) {
	return f.next().Observe(ctx, trial)
}

func (f *fleet) Claim(ctx context.Context, req lifecycle.ClaimRequest) (lifecycle.TrialOwnerToken, error) {
	return f.next().Claim(ctx, req)
}

func (f *fleet) Renew(ctx context.Context, req lifecycle.RenewRequest) (lifecycle.LeaseObservation, error) {
	return f.next().Renew(ctx, req)
}

func (f *fleet) FailStale(ctx context.Context, req lifecycle.FailStaleRequest) (bool, error) {
	return f.next().FailStale(ctx, req)
}

func (f *fleet) FencedMutate(ctx context.Context, req lifecycle.FencedMutationRequest) error {
	return f.next().FencedMutate(ctx, req)
}

func (f *fleet) Terminal(ctx context.Context, req lifecycle.TerminalRequest) error {
	return f.next().Terminal(ctx, req)
}

func (f *fleet) ObserveFinalization(ctx context.Context, study lifecycle.StudyID) (lifecycle.FinalizationObservation, error) {
	return f.next().ObserveFinalization(ctx, study)
}

func (f *fleet) AcquireFinalization(ctx context.Context, req lifecycle.FinalizationAcquireRequest) (lifecycle.FinalizationToken, error) {
	return f.next().AcquireFinalization(ctx, req)
}

func (f *fleet) RenewFinalization(ctx context.Context, token lifecycle.FinalizationToken) (lifecycle.FinalizationObservation, error) {
	return f.next().RenewFinalization(ctx, token)
}

func (f *fleet) ReleaseFinalization(ctx context.Context, token lifecycle.FinalizationToken) error {
	return f.next().ReleaseFinalization(ctx, token)
}

func (f *fleet) TerminalWithIntent(ctx context.Context, req lifecycle.TerminalRequest, intent lifecycle.FinalizationIntent) (lifecycle.OutboxKey, error) {
	return f.next().TerminalWithIntent(ctx, req, intent)
}

func (f *fleet) TerminalWithIntentOwned(ctx context.Context, owner lifecycle.FinalizationToken, req lifecycle.TerminalRequest, intent lifecycle.FinalizationIntent) (lifecycle.OutboxKey, error) {
	return f.next().TerminalWithIntentOwned(ctx, owner, req, intent)
}

func (f *fleet) MutateOwned(ctx context.Context, owner lifecycle.FinalizationToken, req lifecycle.FencedMutationRequest) error {
	return f.next().MutateOwned(ctx, owner, req)
}

func (f *fleet) AdvanceOutbox(ctx context.Context, req lifecycle.OutboxAdvanceRequest) (lifecycle.OutboxPhase, error) {
	return f.next().AdvanceOutbox(ctx, req)
}

func (f *fleet) AdvanceOutboxOwned(ctx context.Context, owner lifecycle.FinalizationToken, req lifecycle.OutboxAdvanceRequest) (lifecycle.OutboxPhase, error) {
	return f.next().AdvanceOutboxOwned(ctx, owner, req)
}

func (f *fleet) GetOutbox(ctx context.Context, key lifecycle.OutboxKey) (lifecycle.OutboxRecord, bool, error) {
	return f.next().GetOutbox(ctx, key)
}

func (f *fleet) ListOutbox(ctx context.Context) ([]lifecycle.OutboxRecord, error) {
	return f.next().ListOutbox(ctx)
}

func (f *fleet) ListOutboxPage(ctx context.Context, req lifecycle.OutboxPageRequest) (lifecycle.OutboxPage, error) {
	return f.next().ListOutboxPage(ctx, req)
}

func (f *fleet) CompleteOutboxEffect(ctx context.Context, req lifecycle.OutboxEffectCompletion) error {
	return f.next().CompleteOutboxEffect(ctx, req)
}

func (f *fleet) CreateReplacement(ctx context.Context, effect lifecycle.OutboxEffectKey) (lifecycle.ReplacementOutcome, error) {
	return f.next().CreateReplacement(ctx, effect)
}

func (f *fleet) PutFinalizedState(ctx context.Context, req lifecycle.FinalizedStateRequest) error {
	return f.next().PutFinalizedState(ctx, req)
}

func (f *fleet) InspectStudy(ctx context.Context, study lifecycle.StudyID) (lifecycle.Study, error) {
	return f.next().InspectStudy(ctx, study)
}

func (f *fleet) InspectTrial(ctx context.Context, trial lifecycle.TrialID) (lifecycle.Trial, error) {
	return f.next().InspectTrial(ctx, trial)
}

// TestJournalStorageConformancePostgresShared runs five of the conformance
// suite's races against four JournalStorages on one PostgreSQL tenant, each call
// going to the next storage: what one storage writes another must see
// before it decides, and no two may both win a race. After each check
// every storage's view must equal the journal's. With
// RUNSEAL_LIFECYCLE_LONG=1 it runs the whole suite (minutes on a busy
// machine).
func TestJournalStorageConformancePostgresShared(t *testing.T) {
	dsn := pgtest.DSN(t)
	var n atomic.Int64
	var mu sync.Mutex
	var errs []error
	factory := func() (lifecycletest.Backend, error) {
		tenant := fmt.Sprintf("lcs%d-%s", n.Add(1), strings.ToLower(store.NewRunID().String()))
		f, err := openFleet(dsn, tenant, 4, 0)
		if err != nil {
			return nil, err
		}
		f.check = func(err error) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
		return f, nil
	}
	if os.Getenv(envLong) != "" {
		lifecycletest.Run(t, factory)
	} else {
		// One race of each authority: a trial's owner, its stale sweep,
		// the study's budget, the finalization claim, an outbox effect.
		// Without the shared-store protocol every race check fails;
		// these five keep the default run short.
		races := []string{"race.claimers-one-winner", "race.sweepers-one-winner", "race.reservations-within-budget", "race.finalizers-one-acquirer", "race.replacement-once"}
		for _, name := range races {
			if !slices.Contains(lifecycletest.Invariants(), name) {
				t.Fatalf("the suite has no check %s", name)
			}
		}
		rep := lifecycletest.Verify(factory, races...)
		if rep.Ran() != len(races) {
			t.Errorf("%d of %d race checks ran:\n%s", rep.Ran(), len(races), rep)
		}
		for _, v := range rep.Violated() {
			t.Errorf("violated: %s", v)
		}
		if t.Failed() {
			t.Logf("report:\n%s", rep)
		}
	}
	for _, err := range errs {
		t.Errorf("after a conformance check: %v", err)
	}
}

// envLong enables the long runs of this package's tests.
const envLong = "RUNSEAL_LIFECYCLE_LONG"

// TestSharedTypedErrors shows that on a shared store an unknown study, an
// incompatible state kind or version, and a stale token each get their
// typed error when the state that makes them so was written by another
// storage: the answer comes from the journal, not from a stale view.
func TestSharedTypedErrors(t *testing.T) {
	ctx := context.Background()
	f, err := openFleet(pgtest.DSN(t), "typed-"+strings.ToLower(store.NewRunID().String()), 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	a, b := f.members[0], f.members[1]
	want := func(err error, sentinel error, what string) {
		t.Helper()
		if !errors.Is(err, sentinel) {
			t.Errorf("%s: want %v, got %v", what, sentinel, err)
		}
	}
	_, err = a.ReserveAndCreateIfBudget(ctx, lifecycle.ReserveAndCreateRequest{Study: lifecycle.StudyID(store.NewCaseID().String()), MaxTrials: 1})
	want(err, lifecycle.ErrNotFound, "reserve in an unknown study")
	_, err = a.InspectStudy(ctx, "not-a-study")
	want(err, lifecycle.ErrNotFound, "inspect a malformed study id")

	study, err := a.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1})
	must(t, err)
	out, err := a.ReserveAndCreateIfBudget(ctx, lifecycle.ReserveAndCreateRequest{Study: study, MaxTrials: 5})
	must(t, err)
	blob := func(version uint32) lifecycle.StateBlob {
		return lifecycle.StateBlob{Scope: lifecycle.ScopeTrial, Name: "sampler", Kind: "tpe", Version: version, Data: []byte("x")}
	}
	tokA, err := a.Claim(ctx, lifecycle.ClaimRequest{Trial: out.Trial, Owner: "a", States: []lifecycle.StateBlob{blob(1)}})
	must(t, err)
	// b has never seen the trial; the blob a wrote decides.
	err = b.FencedMutate(ctx, lifecycle.FencedMutationRequest{Owner: tokA, States: []lifecycle.StateBlob{blob(2)}})
	want(err, lifecycle.ErrIncompatible, "a state of another version, by another storage")

	// b takes the trial over: a's token is stale, and a must learn it
	// from the journal.
	obs, err := b.Observe(ctx, out.Trial)
	must(t, err)
	won, err := b.FailStale(ctx, lifecycle.FailStaleRequest{Observed: obs, Grace: time.Second, Intent: mpIntent})
	if err != nil || !won {
		t.Fatalf("fail stale: %v %v", won, err)
	}
	_, err = a.Renew(ctx, lifecycle.RenewRequest{Owner: tokA})
	want(err, lifecycle.ErrLeaseLost, "renew of a token another storage failed")
	err = a.Terminal(ctx, lifecycle.TerminalRequest{Owner: tokA, State: lifecycle.TrialComplete, Values: []float64{1}})
	want(err, lifecycle.ErrLeaseLost, "terminal of a token another storage failed")
}

// lockLost is a shared journal whose study lock is lost: LockKey grants
// nothing, as when the lock's connection died, and before its next atomic
// append another storage writes the study (hook, once).
type lockLost struct {
	*postgres.Store
	hook *sync.Once
	do   func()
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

func (l lockLost) LockKey(context.Context, string) (io.Closer, error) { return nopCloser{}, nil }
func (l lockLost) Atomic() store.AtomicJournal                        { return hookedAtomic{l.Store.Atomic(), l} }

type hookedAtomic struct {
	store.AtomicJournal
	l lockLost
}

func (h hookedAtomic) AppendAtomic(ctx context.Context, run store.RunID, epoch store.Epoch, work func(context.Context, store.AtomicTx) ([]store.Append, error)) ([]store.Record, error) {
	h.l.hook.Do(h.l.do)
	return h.AtomicJournal.AppendAtomic(ctx, run, epoch, work)
}

// TestSharedLostLockAppendRefused: a storage that lost its study lock
// decided from a view another storage then moved (a reservation within a
// budget of one, after the other took the last place). Its append is
// refused inside its transaction (ErrMoved, KindStorage), nothing of it
// is written, the budget holds, and its next operation answers from the
// journal.
func TestSharedLostLockAppendRefused(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	tenant := "lost-" + strings.ToLower(store.NewRunID().String())
	f, err := openFleet(dsn, tenant, 1, 0)
	must(t, err)
	defer f.close()
	b := f.members[0]
	pg, err := postgres.Open(ctx, dsn, postgres.Options{Tenant: tenant, MaxConns: 4})
	must(t, err)
	defer pg.Close()
	study, err := b.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1})
	must(t, err)
	var other error
	j := lockLost{Store: pg, hook: &sync.Once{}, do: func() {
		_, other = b.ReserveAndCreateIfBudget(ctx, lifecycle.ReserveAndCreateRequest{Study: study, MaxTrials: 1})
	}}
	a, err := journalstore.New(j)
	must(t, err)
	defer a.Close()
	if _, err := a.InspectStudy(ctx, study); err != nil {
		t.Fatal(err)
	}
	_, err = a.ReserveAndCreateIfBudget(ctx, lifecycle.ReserveAndCreateRequest{Study: study, MaxTrials: 1})
	must(t, other)
	var me *journalstore.MovedError
	if !errors.Is(err, journalstore.ErrMoved) || !errors.As(err, &me) || lifecycle.KindOf(err) != lifecycle.KindStorage {
		t.Fatalf("want a storage error caused by ErrMoved, got %v", err)
	}
	if me.Folded.Seq+1 != me.Actual.Seq {
		t.Errorf("moved error: folded %d, actual %d; want the one record the other wrote", me.Folded.Seq, me.Actual.Seq)
	}
	h, err := readHistory(ctx, pg, string(study), 1)
	must(t, err)
	for _, v := range h.check() {
		t.Errorf("violation: %s", v)
	}
	out, err := a.ReserveAndCreateIfBudget(ctx, lifecycle.ReserveAndCreateRequest{Study: study, MaxTrials: 1})
	if err != nil || out.Status != lifecycle.ReservationExhausted {
		t.Errorf("after the refusal: want exhausted, got %+v, %v", out, err)
	}
}
