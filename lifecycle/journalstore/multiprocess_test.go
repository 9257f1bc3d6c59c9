package journalstore_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/runseal/runseal/internal/pgtest"
	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/journalstore"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/postgres"
)

// workerEnv makes the test binary a worker process of the multi-process
// tests; its value is the worker's JSON config.
const workerEnv = "RUNSEAL_LIFECYCLE_WORKER"

// workerConfig tells a worker process what to do.
type workerConfig struct {
	DSN    string            `json:"dsn"`
	Tenant string            `json:"tenant"`
	Study  lifecycle.StudyID `json:"study"`
	Proc   int               `json:"proc"`
	Actors int               `json:"actors"`
	Rounds int               `json:"rounds"` // per actor; 0: until killed
	Budget uint64            `json:"budget"`
	Seed   uint64            `json:"seed"`
	// Grace is the unchanged-observation interval of sweeps and
	// finalization takeovers.
	Grace time.Duration `json:"grace"`
	// Bench, when set, makes the worker a benchmark process instead
	// (benchWorker).
	Bench *benchConfig `json:"bench,omitempty"`
}

// The finalization intent, effects and replacement every run uses.
var (
	mpIntent = lifecycle.FinalizationIntent{Kind: "mp.finalize", Data: json.RawMessage(`{"n":1}`)}
)

func mpEffects(budget uint64) []lifecycle.OutboxEffect {
	return []lifecycle.OutboxEffect{
		{Name: "notify", Kind: lifecycle.EffectExternal, Payload: json.RawMessage(`{"to":"ops"}`)},
		{Name: "retry", Kind: lifecycle.EffectReplacement, Replacement: &lifecycle.ReplacementSpec{MaxTrials: budget, Params: []lifecycle.Param{{Name: "x", Value: 0.5, Distribution: json.RawMessage(`{"low":0,"high":1}`)}}}},
	}
}

// worker runs cfg.Actors actors against one study: each round an actor
// does one of the lifecycle's jobs. It prints "ready" after its first
// round and "done N" at the end; an unexpected error is printed and fails
// the process with exit status 1.
func worker(arg string) int {
	var cfg workerConfig
	if err := json.Unmarshal([]byte(arg), &cfg); err != nil {
		fmt.Println("config:", err)
		return 2
	}
	ctx := context.Background()
	pg, err := postgres.Open(ctx, cfg.DSN, postgres.Options{Tenant: cfg.Tenant, MaxConns: 8})
	if err != nil {
		fmt.Println("open:", err)
		return 2
	}
	defer pg.Close()
	s, err := journalstore.New(pg)
	if err != nil {
		fmt.Println("new:", err)
		return 2
	}
	defer s.Close()
	if cfg.Bench != nil {
		return benchWorker(ctx, s, *cfg.Bench)
	}
	var failed atomic.Bool
	var ops atomic.Int64
	var ready sync.Once
	var wg sync.WaitGroup
	for a := range cfg.Actors {
		wg.Go(func() {
			ac := &actor{s: s, cfg: cfg, name: fmt.Sprintf("p%d.a%d", cfg.Proc, a), rng: rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.Proc*100+a)))}
			for round := 0; cfg.Rounds == 0 || round < cfg.Rounds; round++ {
				if err := ac.round(ctx); err != nil {
					fmt.Printf("error: %s: %v\n", ac.name, err)
					failed.Store(true)
					return
				}
				ops.Add(1)
				ready.Do(func() { fmt.Println("ready") })
			}
		})
	}
	wg.Wait()
	fmt.Println("done", ops.Load())
	if failed.Load() {
		return 1
	}
	return 0
}

// actor is one worker goroutine; it keeps the tokens it holds.
type actor struct {
	s    *journalstore.Storage
	cfg  workerConfig
	name string
	rng  *rand.Rand
	fin  *lifecycle.FinalizationToken
}

// expected reports whether err is an answer a racing actor may get.
func expected(err error) bool {
	switch lifecycle.KindOf(err) {
	case lifecycle.KindLeaseLost, lifecycle.KindConflict:
		return true
	}
	return false
}

func (a *actor) round(ctx context.Context) error {
	switch n := a.rng.IntN(10); {
	case n < 5:
		return a.work(ctx)
	case n < 7:
		return a.sweep(ctx)
	default:
		return a.finalize(ctx)
	}
}

// work reserves a trial (or picks a waiting or paused one), claims it,
// renews, mutates under the fence, and then ends it with an intent,
// pauses it, or walks away from it while it runs (an owner paused past
// its lease, for the sweepers).
func (a *actor) work(ctx context.Context) error {
	var trial lifecycle.TrialID
	out, err := a.s.ReserveAndCreateIfBudget(ctx, lifecycle.ReserveAndCreateRequest{Study: a.cfg.Study, MaxTrials: a.cfg.Budget})
	if err != nil {
		return fmt.Errorf("reserve: %w", err)
	}
	if out.Status == lifecycle.ReservationCreated {
		trial = out.Trial
	} else {
		v, err := a.s.StudyView(ctx, a.cfg.Study)
		if err != nil {
			return fmt.Errorf("study view: %w", err)
		}
		for _, t := range v.Trials {
			if t.Managed && (t.State == lifecycle.TrialWaiting || t.State == lifecycle.TrialPaused) {
				trial = t.Trial
				break
			}
		}
		if trial == "" {
			return nil
		}
	}
	tok, err := a.s.Claim(ctx, lifecycle.ClaimRequest{Trial: trial, Owner: a.name, HeartbeatAt: time.Now()})
	if expected(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	if _, err := a.s.Renew(ctx, lifecycle.RenewRequest{Owner: tok, HeartbeatAt: time.Now()}); err != nil {
		if expected(err) {
			return nil
		}
		return fmt.Errorf("renew: %w", err)
	}
	err = a.s.FencedMutate(ctx, lifecycle.FencedMutationRequest{Owner: tok, Intermediate: []lifecycle.IntermediateValue{{Step: tok.Epoch, Value: float64(tok.Epoch)}}})
	if expected(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mutate: %w", err)
	}
	switch n := a.rng.IntN(10); {
	case n < 6:
		_, err = a.s.TerminalWithIntent(ctx, lifecycle.TerminalRequest{Owner: tok, State: lifecycle.TrialComplete, Values: []float64{a.rng.Float64()}}, mpIntent)
	case n < 8:
		err = a.s.FencedMutate(ctx, lifecycle.FencedMutationRequest{Owner: tok, Pause: true})
	default:
		// Walk away: the owner stops heartbeating with its lease held.
	}
	if err != nil && !expected(err) {
		return fmt.Errorf("end: %w", err)
	}
	return nil
}

// sweep fails the running trials whose whole lease stayed unchanged over
// the grace interval.
func (a *actor) sweep(ctx context.Context) error {
	v, err := a.s.StudyView(ctx, a.cfg.Study)
	if err != nil {
		return fmt.Errorf("study view: %w", err)
	}
	var seen []lifecycle.LeaseObservation
	for _, t := range v.Trials {
		if t.State == lifecycle.TrialRunning {
			obs, err := a.s.Observe(ctx, t.Trial)
			if err != nil {
				return fmt.Errorf("observe: %w", err)
			}
			seen = append(seen, obs)
		}
	}
	if len(seen) == 0 {
		return nil
	}
	time.Sleep(a.cfg.Grace) // the grace interval is the point: owners that heartbeat in it survive
	for _, obs := range seen {
		now, err := a.s.Observe(ctx, obs.Trial)
		if err != nil {
			return fmt.Errorf("observe: %w", err)
		}
		if !now.Equal(obs) {
			continue
		}
		if _, err := a.s.FailStale(ctx, lifecycle.FailStaleRequest{Observed: obs, Grace: a.cfg.Grace, Intent: mpIntent}); err != nil && !expected(err) {
			return fmt.Errorf("fail stale: %w", err)
		}
	}
	return nil
}

// finalize takes the finalization claim (over a holder whose claim stayed
// unchanged over the grace interval) and moves a page of outbox records
// through their phases, completing each effect. Sometimes it keeps the
// claim without renewing, for another actor to take over.
func (a *actor) finalize(ctx context.Context) error {
	if a.fin == nil {
		obs, err := a.s.ObserveFinalization(ctx, a.cfg.Study)
		if err != nil {
			return fmt.Errorf("observe finalization: %w", err)
		}
		if obs.Held {
			time.Sleep(a.cfg.Grace)
			now, err := a.s.ObserveFinalization(ctx, a.cfg.Study)
			if err != nil {
				return fmt.Errorf("observe finalization: %w", err)
			}
			if now != obs {
				return nil
			}
		}
		tok, err := a.s.AcquireFinalization(ctx, lifecycle.FinalizationAcquireRequest{Study: a.cfg.Study, Holder: a.name, Observed: obs})
		if expected(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("acquire finalization: %w", err)
		}
		a.fin = &tok
	} else if _, err := a.s.RenewFinalization(ctx, *a.fin); err != nil {
		a.fin = nil
		if expected(err) {
			return nil
		}
		return fmt.Errorf("renew finalization: %w", err)
	}
	err := advanceAll(ctx, a.s, a.cfg.Study, *a.fin, a.cfg.Budget, 4)
	if expected(err) {
		a.fin = nil
		return nil
	}
	if err != nil {
		return err
	}
	if a.rng.IntN(3) == 0 {
		err := a.s.ReleaseFinalization(ctx, *a.fin)
		a.fin = nil
		if err != nil && !expected(err) {
			return fmt.Errorf("release finalization: %w", err)
		}
	}
	return nil
}

// advanceAll moves up to limit outbox records that are not done to done
// under the finalization owner fin; limit 0 is every record.
func advanceAll(ctx context.Context, s *journalstore.Storage, study lifecycle.StudyID, fin lifecycle.FinalizationToken, budget uint64, limit int) error {
	var cursor *lifecycle.OutboxCursor
	moved := 0
	for {
		page, err := s.ListOutboxPage(ctx, lifecycle.OutboxPageRequest{Study: study, MaxRecords: 16, MaxBytes: 1 << 20, Cursor: cursor})
		if err != nil {
			return fmt.Errorf("list outbox page: %w", err)
		}
		for _, rec := range page.Records {
			if rec.Phase == lifecycle.PhaseDone {
				continue
			}
			if err := finish(ctx, s, fin, rec, budget); err != nil {
				return err
			}
			if moved++; limit > 0 && moved >= limit {
				return nil
			}
		}
		if page.Next == nil {
			return nil
		}
		cursor = page.Next
	}
}

// finish moves one outbox record from wherever it stands to done.
func finish(ctx context.Context, s *journalstore.Storage, fin lifecycle.FinalizationToken, rec lifecycle.OutboxRecord, budget uint64) error {
	adv := func(p lifecycle.OutboxPhase, effects []lifecycle.OutboxEffect) error {
		_, err := s.AdvanceOutboxOwned(ctx, fin, lifecycle.OutboxAdvanceRequest{Key: rec.Key, Phase: p, Effects: effects})
		if err != nil {
			return fmt.Errorf("advance %v to %s: %w", rec.Key, p, err)
		}
		return nil
	}
	if rec.Phase.Rank() < lifecycle.PhaseCallbacks.Rank() {
		if err := adv(lifecycle.PhaseCallbacks, nil); err != nil {
			return err
		}
	}
	if rec.Phase.Rank() < lifecycle.PhaseEffects.Rank() {
		if err := adv(lifecycle.PhaseEffects, mpEffects(budget)); err != nil {
			return err
		}
	}
	key := lifecycle.OutboxEffectKey{Outbox: rec.Key, Name: "notify"}
	if err := s.CompleteOutboxEffect(ctx, lifecycle.OutboxEffectCompletion{Effect: key}); err != nil {
		return fmt.Errorf("complete %v: %w", key, err)
	}
	key.Name = "retry"
	if _, err := s.CreateReplacement(ctx, key); err != nil {
		return fmt.Errorf("create replacement %v: %w", key, err)
	}
	return adv(lifecycle.PhaseDone, nil)
}

// drain ends the study after the workers: it fails the running trials
// (their owners are gone), ends waiting and paused ones, and finalizes
// every outbox record, taking the finalization claim over from whoever
// held it; until nothing is left, since replacements add trials.
func drain(ctx context.Context, t *testing.T, s *journalstore.Storage, study lifecycle.StudyID, budget uint64) {
	t.Helper()
	for range 100 {
		v, err := s.StudyView(ctx, study)
		if err != nil {
			t.Fatalf("drain: study view: %v", err)
		}
		left := 0
		for _, tv := range v.Trials {
			if !tv.Managed || tv.State.Terminal() {
				continue
			}
			left++
			switch tv.State {
			case lifecycle.TrialRunning:
				obs, err := s.Observe(ctx, tv.Trial)
				if err == nil {
					_, err = s.FailStale(ctx, lifecycle.FailStaleRequest{Observed: obs, Grace: time.Second, Intent: mpIntent})
				}
				if err != nil {
					t.Fatalf("drain: fail stale %s: %v", tv.Trial, err)
				}
			default:
				tok, err := s.Claim(ctx, lifecycle.ClaimRequest{Trial: tv.Trial, Owner: "drain"})
				if err == nil {
					_, err = s.TerminalWithIntent(ctx, lifecycle.TerminalRequest{Owner: tok, State: lifecycle.TrialPruned}, mpIntent)
				}
				if err != nil {
					t.Fatalf("drain: end %s: %v", tv.Trial, err)
				}
			}
		}
		obs, err := s.ObserveFinalization(ctx, study)
		if err != nil {
			t.Fatalf("drain: observe finalization: %v", err)
		}
		fin, err := s.AcquireFinalization(ctx, lifecycle.FinalizationAcquireRequest{Study: study, Holder: "drain", Observed: obs})
		if err != nil {
			t.Fatalf("drain: acquire finalization over %+v: %v", obs, err)
		}
		if err := advanceAll(ctx, s, study, fin, budget, 0); err != nil {
			t.Fatalf("drain: %v", err)
		}
		if err := s.ReleaseFinalization(ctx, fin); err != nil {
			t.Fatalf("drain: release finalization: %v", err)
		}
		if left == 0 {
			return
		}
	}
	t.Fatal("drain: the study did not end")
}

// startWorker starts a worker process and returns it with its output.
func startWorker(t *testing.T, cfg workerConfig) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	raw, _ := json.Marshal(cfg)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), workerEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, bufio.NewScanner(out)
}

// mpSetup creates a study on a fresh tenant and returns a storage on it.
func mpSetup(t *testing.T) (dsn, tenant string, pg *postgres.Store, s *journalstore.Storage, study lifecycle.StudyID) {
	t.Helper()
	dsn = pgtest.DSN(t)
	tenant = "mp-" + strings.ToLower(store.NewRunID().String())
	ctx := context.Background()
	pg, err := postgres.Open(ctx, dsn, postgres.Options{Tenant: tenant, MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	s, err = journalstore.New(pg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	study, err = s.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1})
	if err != nil {
		t.Fatal(err)
	}
	return dsn, tenant, pg, s, study
}

// checkStudy proves the invariants on the journal: the history checker,
// every run's chain, and a view read straight from the journal with
// nothing pending that equals what a fresh storage shows.
func checkStudy(t *testing.T, pg *postgres.Store, s *journalstore.Storage, study lifecycle.StudyID, budget uint64) *history {
	t.Helper()
	ctx := context.Background()
	h, err := readHistory(ctx, pg, string(study), budget)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range h.check() {
		t.Errorf("violation: %s", v)
	}
	for run := range h.trials {
		if _, err := pg.Verify(ctx, run); err != nil {
			t.Errorf("verify %s: %v", run, err)
		}
	}
	v, err := journalstore.ReadStudyView(ctx, pg, study)
	if err != nil {
		t.Fatalf("read study view: %v", err)
	}
	if len(v.Pending) > 0 {
		t.Errorf("pending after the run: %v", v.Pending)
	}
	live, err := s.StudyView(ctx, study)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(v)
	b, _ := json.Marshal(live)
	if string(a) != string(b) {
		t.Errorf("the journal's view\n %s\ndiffers from the storage's\n %s", a, b)
	}
	return h
}

// TestMultiProcessLifecycle runs 4 OS processes of 3 actors each on one
// study on PostgreSQL (reserve within budget, claim, renew, fenced mutate,
// terminal with intent, pause, owners walking away while running, stale
// sweeps, finalization takeover, outbox advance with an external effect
// and a replacement), drains the study, and proves on the journal: no
// trial past the budget, no two owners of one epoch, every terminal trial
// ended and sealed once, every effect completed once, every replacement
// created once. RUNSEAL_LIFECYCLE_LONG=1 runs longer rounds.
func TestMultiProcessLifecycle(t *testing.T) {
	dsn, tenant, pg, s, study := mpSetup(t)
	rounds, budget := 12, uint64(40)
	if os.Getenv(envLong) != "" {
		rounds, budget = 200, 600
	}
	cmds := make([]*exec.Cmd, 4)
	outs := make([]*bufio.Scanner, 4)
	for p := range cmds {
		cmds[p], outs[p] = startWorker(t, workerConfig{DSN: dsn, Tenant: tenant, Study: study, Proc: p, Actors: 3, Rounds: rounds, Budget: budget, Seed: uint64(time.Now().UnixNano()), Grace: 20 * time.Millisecond})
	}
	for p, cmd := range cmds {
		var lines []string
		for outs[p].Scan() {
			lines = append(lines, outs[p].Text())
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("worker %d: %v: %s", p, err, strings.Join(lines, "\n"))
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	ctx := context.Background()
	drain(ctx, t, s, study, budget)
	h := checkStudy(t, pg, s, study, budget)
	stats := map[string]int{}
	for _, r := range h.study {
		stats[r.Kind]++
		if r.Kind == journalstore.RecordTrialTerminal && strings.Contains(string(r.Fields), `"cause":"stale"`) {
			stats["stale"]++
		}
	}
	t.Logf("study run records by kind: %v; trial runs: %d", stats, len(h.trials))
	if stats[journalstore.RecordReplacementCreated] == 0 || stats[journalstore.RecordFinalizationAcquired] < 2 || stats[journalstore.RecordTrialTerminal] == 0 {
		t.Errorf("the run did not exercise replacements, takeovers and terminals: %v", stats)
	}
}

// TestMultiProcessLifecycle_SIGKILL kills one of two worker processes
// with SIGKILL while it runs transitions, lets the other go on, and then
// shows the study recovers: it loads, a storage completes what the killed
// process left half-done, every transition is whole, and the invariants
// hold after a drain.
func TestMultiProcessLifecycle_SIGKILL(t *testing.T) {
	dsn, tenant, pg, s, study := mpSetup(t)
	const budget = 24
	cfg := workerConfig{DSN: dsn, Tenant: tenant, Study: study, Actors: 3, Budget: budget, Seed: uint64(time.Now().UnixNano()), Grace: 10 * time.Millisecond}
	victim, vout := startWorker(t, cfg) // Rounds 0: until killed
	cfg.Proc, cfg.Rounds = 1, 10
	other, oout := startWorker(t, cfg)
	if !vout.Scan() || vout.Text() != "ready" {
		t.Fatalf("victim: %q", vout.Text())
	}
	// Kill it while its actors are mid-operation: the ready line comes
	// after a first round, and the others are running.
	if err := victim.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := victim.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("victim: want killed by SIGKILL, got %v", err)
	}
	var lines []string
	for oout.Scan() {
		lines = append(lines, oout.Text())
	}
	if err := other.Wait(); err != nil {
		t.Fatalf("the surviving worker: %v: %s", err, strings.Join(lines, "\n"))
	}
	ctx := context.Background()
	// Loadable straight from the journal, whatever the kill cut.
	if _, err := journalstore.ReadStudyView(ctx, pg, study); err != nil {
		t.Fatalf("the study does not load after the kill: %v", err)
	}
	drain(ctx, t, s, study, budget)
	checkStudy(t, pg, s, study, budget)
}
