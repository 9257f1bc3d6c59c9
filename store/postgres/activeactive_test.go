package postgres

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runseal/runseal/internal/pgtest"
	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// The active-active test runs this test binary again as worker processes
// (TestMain hands them to activeActiveWorker). Each worker is a small plane:
// a few actors racing every other process's actors to acquire, append,
// seal and cancel one shared set of runs, sometimes stalling past their
// lease or dying without releasing it. Every acknowledged operation is
// logged; afterwards the parent checks the logs against the database.
const (
	workerEnv     = "RUNSEAL_PG_AA_WORKER"
	aaDSNEnv      = "RUNSEAL_PG_AA_DSN"
	aaTenantEnv   = "RUNSEAL_PG_AA_TENANT"
	aaRunsEnv     = "RUNSEAL_PG_AA_RUNS"
	aaDurationEnv = "RUNSEAL_PG_AA_DURATION"
	aaOutEnv      = "RUNSEAL_PG_AA_OUT"
	// RUNSEAL_PG_AA_ROUNDS sets how many rounds the test runs (default 2).
	aaRoundsEnv = "RUNSEAL_PG_AA_ROUNDS"
)

// aaEvent is one acknowledged (or refused) operation of a worker.
type aaEvent struct {
	Op      string   `json:"op"` // acquire, append, fenced, dup, sealed-refusal, seal, cancel, error
	Run     string   `json:"run,omitempty"`
	Owner   string   `json:"owner,omitempty"`
	Epoch   uint64   `json:"epoch,omitempty"`
	Seqs    []uint64 `json:"seqs,omitempty"`
	Hashes  []string `json:"hashes,omitempty"`
	Effects []string `json:"effects,omitempty"`
	Leaf    string   `json:"leaf,omitempty"`
	Created bool     `json:"created,omitempty"`
	Msg     string   `json:"msg,omitempty"`
}

func activeActiveWorker() int {
	ctx := context.Background()
	id := os.Getenv(workerEnv)
	dur, _ := time.ParseDuration(os.Getenv(aaDurationEnv))
	var runs []store.RunID
	for _, r := range strings.Split(os.Getenv(aaRunsEnv), ",") {
		run, err := store.ParseRunID(r)
		if err != nil {
			fmt.Fprintln(os.Stderr, "worker: bad run list:", err)
			return 2
		}
		runs = append(runs, run)
	}
	out, err := os.Create(os.Getenv(aaOutEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	defer out.Close()
	s, err := Open(ctx, os.Getenv(aaDSNEnv), Options{Tenant: os.Getenv(aaTenantEnv), Schema: "runseal_test", MaxConns: 6})
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker: open:", err)
		return 2
	}
	defer s.Close()
	var mu sync.Mutex
	enc := json.NewEncoder(out)
	emit := func(e aaEvent) {
		mu.Lock()
		defer mu.Unlock()
		enc.Encode(e)
	}
	deadline := time.Now().Add(dur)
	var wg sync.WaitGroup
	for a := 0; a < 3; a++ {
		wg.Add(1)
		go func(owner string) {
			defer wg.Done()
			actor(ctx, s, owner, runs, deadline, emit)
		}(fmt.Sprintf("w%s-a%d-%d", id, a, os.Getpid()))
	}
	wg.Wait()
	return 0
}

// actor is one plane instance's loop over the shared runs.
func actor(ctx context.Context, s *Store, owner string, runs []store.RunID, deadline time.Time, emit func(aaEvent)) {
	fail := func(run store.RunID, what string, err error) {
		emit(aaEvent{Op: "error", Run: run.String(), Owner: owner, Msg: what + ": " + err.Error()})
	}
	sealedRuns := map[store.RunID]bool{}
	for time.Now().Before(deadline) {
		run := runs[rand.IntN(len(runs))]
		if sealedRuns[run] && rand.IntN(10) != 0 {
			continue // mostly leave finished runs alone, but keep poking them
		}
		if rand.IntN(25) == 0 {
			created, err := s.RequestCancel(ctx, run, store.Operator{Actor: owner, Basis: store.Asserted}, "operator stop")
			var nf *store.NotFoundError
			switch {
			case err == nil:
				emit(aaEvent{Op: "cancel", Run: run.String(), Owner: owner, Created: created})
			case !errors.As(err, &nf):
				fail(run, "request cancel", err)
			}
			continue
		}
		l, err := s.Acquire(ctx, run, owner, time.Second)
		var held *store.LeaseHeldError
		if errors.As(err, &held) {
			time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
			continue
		}
		if err != nil {
			fail(run, "acquire", err)
			continue
		}
		emit(aaEvent{Op: "acquire", Run: run.String(), Owner: owner, Epoch: uint64(l.Epoch)})
		// A fabricated future epoch is always refused.
		if _, err := s.Append(ctx, l.Epoch+1000, []store.Append{note(run, "forged")}); err == nil {
			emit(aaEvent{Op: "error", Run: run.String(), Owner: owner, Msg: "append under a future epoch accepted"})
		}
		stall := rand.IntN(4) == 0
		crash := rand.IntN(6) == 0
		sealed := false
		for i, n := 0, 1+rand.IntN(3); i < n && !sealed; i++ {
			if stall && i == n-1 {
				// A GC pause or a partition: the lease lapses, and somebody
				// may take the run before this append is tried.
				time.Sleep(1100 * time.Millisecond)
			}
			batch := []store.Append{note(run, owner)}
			var effects []string
			if rand.IntN(2) == 0 {
				k := fmt.Sprintf("effect-%d", rand.IntN(12))
				batch = append(batch, effect(run, k))
				effects = append(effects, k)
			}
			recs, err := s.Append(ctx, l.Epoch, batch)
			sealed = logAppend(emit, run, owner, l.Epoch, effects, recs, err, fail)
		}
		if sealed {
			sealedRuns[run] = true
		}
		if !sealed && rand.IntN(10) == 0 {
			outcome := "succeeded"
			batch := []store.Append{conclude(run, outcome)}
			if c, err := s.Cancellation(ctx, run); err != nil {
				fail(run, "cancellation", err)
			} else if c != nil {
				outcome = "cancelled"
				fields, _ := json.Marshal(map[string]any{"actor": c.Actor, "reason": c.Reason})
				batch = []store.Append{{Run: run, Kind: store.KindRunCancelled, Fields: fields}, conclude(run, outcome)}
			}
			recs, err := s.Append(ctx, l.Epoch, batch)
			if !logAppend(emit, run, owner, l.Epoch, nil, recs, err, fail) && err == nil {
				leaf, err := s.Seal(ctx, run, l.Epoch, outcome)
				var f *store.FencedError
				switch {
				case err == nil:
					emit(aaEvent{Op: "seal", Run: run.String(), Owner: owner, Epoch: uint64(l.Epoch), Leaf: leaf.String()})
				case errors.As(err, &f):
					emit(aaEvent{Op: "fenced", Run: run.String(), Owner: owner, Epoch: uint64(l.Epoch)})
				default:
					fail(run, "seal", err)
				}
			}
		}
		if crash {
			continue // died holding the lease: it expires
		}
		if rand.IntN(3) == 0 {
			if _, err := s.Renew(ctx, run, owner, l.Epoch, time.Second); err != nil {
				var nh *store.LeaseNotHeldError
				if !errors.As(err, &nh) {
					fail(run, "renew", err)
				}
			}
		}
		if err := s.ReleaseLease(ctx, run, l.Epoch); err != nil {
			fail(run, "release", err)
		}
	}
}

// logAppend records an append's outcome and reports whether the run is
// sealed.
func logAppend(emit func(aaEvent), run store.RunID, owner string, epoch store.Epoch, effects []string, recs []store.Record, err error, fail func(store.RunID, string, error)) bool {
	var (
		f  *store.FencedError
		de *store.DuplicateEffectError
		rs *store.RunSealedError
	)
	switch {
	case err == nil:
		e := aaEvent{Op: "append", Run: run.String(), Owner: owner, Epoch: uint64(epoch), Effects: effects}
		for _, r := range recs {
			e.Seqs = append(e.Seqs, uint64(r.Seq))
			e.Hashes = append(e.Hashes, r.Hash.String())
		}
		emit(e)
	case errors.As(err, &f):
		emit(aaEvent{Op: "fenced", Run: run.String(), Owner: owner, Epoch: uint64(epoch)})
	case errors.As(err, &de):
		emit(aaEvent{Op: "dup", Run: run.String(), Owner: owner, Epoch: uint64(epoch), Effects: effects})
	case errors.As(err, &rs):
		emit(aaEvent{Op: "sealed-refusal", Run: run.String(), Owner: owner, Epoch: uint64(epoch)})
		return true
	default:
		fail(run, "append", err)
	}
	return false
}

func TestActiveActive(t *testing.T) {
	dsn := pgtest.DSN(t)
	rounds := 2
	if n, err := strconv.Atoi(os.Getenv(aaRoundsEnv)); err == nil && n > 0 {
		rounds = n
	}
	total := map[string]int{}
	for r := 0; r < rounds; r++ {
		t.Run(fmt.Sprintf("round-%d", r), func(t *testing.T) {
			for op, n := range activeActiveRound(t, dsn) {
				total[op] += n
			}
		})
	}
	// Fencing and sealing are left to chance in each round; across the
	// rounds a race that never fenced a writer or sealed a run proved too
	// little.
	if total["fenced"] == 0 || total["seal"] == 0 {
		t.Errorf("the race was too tame to prove anything: %v", total)
	}
}

func activeActiveRound(t *testing.T, dsn string) map[string]int {
	ctx := context.Background()
	const workers, nruns = 4, 24
	duration := 3 * time.Second
	tenant := freshTenant()
	runs := make([]store.RunID, nruns)
	ids := make([]string, nruns)
	for i := range runs {
		runs[i] = store.NewRunID()
		ids[i] = runs[i].String()
	}
	dir := t.TempDir()
	var procs []*exec.Cmd
	for w := 0; w < workers; w++ {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(),
			workerEnv+"="+strconv.Itoa(w), aaDSNEnv+"="+dsn, aaTenantEnv+"="+tenant,
			aaRunsEnv+"="+strings.Join(ids, ","), aaDurationEnv+"="+duration.String(),
			aaOutEnv+"="+filepath.Join(dir, fmt.Sprintf("w%d.jsonl", w)))
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatalf("start worker %d: %v", w, err)
		}
		procs = append(procs, cmd)
	}
	for w, cmd := range procs {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("worker %d: %v", w, err)
		}
	}
	var events []aaEvent
	for w := 0; w < workers; w++ {
		f, err := os.Open(filepath.Join(dir, fmt.Sprintf("w%d.jsonl", w)))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var e aaEvent
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Fatalf("worker %d log: %v", w, err)
			}
			events = append(events, e)
		}
		f.Close()
	}
	s := openStore(t, Options{Tenant: tenant})
	return checkActiveActive(t, ctx, s, runs, events)
}

// reporter is the part of testing.TB the checker uses, so that a
// meta-test can prove the checker fails on a broken history.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
}

func checkActiveActive(t reporter, ctx context.Context, s *Store, runs []store.RunID, events []aaEvent) map[string]int {
	type runKey struct {
		run   string
		epoch uint64
	}
	owners := map[runKey]string{}
	maxEpoch := map[string]uint64{}
	acked := map[string]map[uint64]string{} // run -> seq -> hash
	ackedEffects := map[string]map[string]int{}
	seals := map[string]string{}
	cancelWinners := map[string][]string{}
	counts := map[string]int{}
	for _, e := range events {
		counts[e.Op]++
		switch e.Op {
		case "error":
			t.Errorf("worker: %s run %s: %s", e.Owner, e.Run, e.Msg)
		case "acquire":
			k := runKey{e.Run, e.Epoch}
			if o, dup := owners[k]; dup {
				t.Errorf("run %s epoch %d granted to both %s and %s", e.Run, e.Epoch, o, e.Owner)
			}
			owners[k] = e.Owner
			maxEpoch[e.Run] = max(maxEpoch[e.Run], e.Epoch)
		case "append":
			if acked[e.Run] == nil {
				acked[e.Run] = map[uint64]string{}
				ackedEffects[e.Run] = map[string]int{}
			}
			for i, seq := range e.Seqs {
				if h, dup := acked[e.Run][seq]; dup {
					t.Errorf("run %s seq %d acknowledged twice (%s, %s)", e.Run, seq, h, e.Hashes[i])
				}
				acked[e.Run][seq] = e.Hashes[i]
			}
			for _, k := range e.Effects {
				ackedEffects[e.Run][k]++
			}
		case "seal":
			if l, ok := seals[e.Run]; ok && l != e.Leaf {
				t.Errorf("run %s sealed with two leaves %s and %s", e.Run, l, e.Leaf)
			}
			seals[e.Run] = e.Leaf
		case "cancel":
			if e.Created {
				cancelWinners[e.Run] = append(cancelWinners[e.Run], e.Owner)
			}
		}
	}
	// Exactly one owner per epoch, and the epochs granted are exactly 1..n:
	// no acquire committed without its caller hearing of it.
	for key, owner := range owners {
		_ = owner
		for e := uint64(1); e <= maxEpoch[key.run]; e++ {
			if _, ok := owners[runKey{key.run, e}]; !ok {
				t.Errorf("run %s: epoch %d was never acknowledged to anyone, yet epoch %d was", key.run, e, maxEpoch[key.run])
			}
		}
	}
	var sealedRuns []store.RunID
	totalRecords := 0
	for _, run := range runs {
		id := run.String()
		recs, err := s.Read(ctx, run, 1)
		if err != nil {
			t.Fatalf("read %s: %v", id, err)
		}
		if len(recs) == 0 {
			continue
		}
		totalRecords += len(recs)
		if _, err := s.Verify(ctx, run); err != nil {
			t.Errorf("verify %s: %v", id, err)
		}
		// Every stored record was acknowledged to exactly the owner of its
		// epoch, and every acknowledged record is stored.
		if len(recs) != len(acked[id]) {
			t.Errorf("run %s: %d records stored, %d acknowledged", id, len(recs), len(acked[id]))
		}
		var lastEpoch store.Epoch
		effects := map[store.Digest]int{}
		for _, r := range recs {
			if h := acked[id][uint64(r.Seq)]; h != r.Hash.String() {
				t.Errorf("run %s seq %d: stored %s, acknowledged %q", id, r.Seq, r.Hash, h)
			}
			if _, ok := owners[runKey{id, uint64(r.Epoch)}]; !ok {
				t.Errorf("run %s seq %d written under epoch %d, which nobody was granted", id, r.Seq, r.Epoch)
			}
			// A fenced writer's append would appear as an epoch going
			// backwards along the chain.
			if r.Epoch < lastEpoch {
				t.Errorf("run %s seq %d: epoch %d after epoch %d: a fenced writer's append was accepted", id, r.Seq, r.Epoch, lastEpoch)
			}
			lastEpoch = r.Epoch
			if r.Kind == store.KindEffectStarted {
				effects[*r.EffectKey]++
			}
		}
		for k, n := range effects {
			if n > 1 {
				t.Errorf("run %s: effect %s started %d times", id, k, n)
			}
		}
		for k, n := range ackedEffects[id] {
			if n > 1 {
				t.Errorf("run %s: effect %q acknowledged as started %d times", id, k, n)
			}
		}
		if len(cancelWinners[id]) > 1 {
			t.Errorf("run %s: %d cancellation requests each told they were first: %v", id, len(cancelWinners[id]), cancelWinners[id])
		}
		if c, err := s.Cancellation(ctx, run); err != nil {
			t.Fatalf("cancellation: %v", err)
		} else if len(cancelWinners[id]) == 1 && (c == nil || c.Actor.Actor != cancelWinners[id][0]) {
			t.Errorf("run %s: first asker %s, stored %+v", id, cancelWinners[id][0], c)
		}
		if leaf, ok := seals[id]; ok {
			sealedRuns = append(sealedRuns, run)
			if recs[len(recs)-1].Hash.String() != leaf {
				t.Errorf("run %s: records after its seal", id)
			}
		}
	}
	pos, err := s.LogPositions(ctx, runs)
	if err != nil {
		t.Fatalf("log positions: %v", err)
	}
	var idx []int
	for i, p := range pos {
		leaf, acks := seals[runs[i].String()]
		if (p != nil) != acks {
			t.Errorf("run %s: log position %+v, seal acknowledged %v", runs[i], p, acks)
			continue
		}
		if p != nil {
			if p.Leaf.String() != leaf {
				t.Errorf("run %s: log leaf %s, acknowledged %s", runs[i], p.Leaf, leaf)
			}
			idx = append(idx, int(p.Index))
		}
	}
	sort.Ints(idx)
	for i, x := range idx {
		if x != i {
			t.Errorf("log indexes %v: gap or duplicate", idx)
			break
		}
	}
	// Afterwards the log verifies: every sealed run is included under the
	// checkpoint, and the checkpoint is the tree of exactly those leaves.
	verifyLog(t, ctx, s, sealedRuns)
	t.Logf("%d records in %d runs, %d sealed; events: %v", totalRecords, len(runs), len(sealedRuns), counts)
	if counts["acquire"] == 0 || counts["append"] == 0 {
		t.Errorf("the workers did nothing: %v", counts)
	}
	return counts
}

// verifyLog checks the tenant's log against the sealed runs: the
// checkpoint's size is their number, each run's inclusion proof verifies
// against the checkpoint's root, and the log is consistent with its own
// earlier sizes.
func verifyLog(t reporter, ctx context.Context, s *Store, sealed []store.RunID) {
	t.Helper()
	cp, err := s.Checkpoint(ctx)
	if err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	if cp.Size != uint64(len(sealed)) {
		t.Fatalf("checkpoint size %d, %d runs sealed", cp.Size, len(sealed))
	}
	for _, r := range sealed {
		inc, err := s.InclusionProof(ctx, r)
		if err != nil || inc == nil {
			t.Fatalf("inclusion proof of %s: %+v %v", r, inc, err)
		}
		hs := make([]log.Hash, len(inc.Proof))
		for i, p := range inc.Proof {
			hs[i] = log.Hash(p)
		}
		if err := log.VerifyInclusion(log.Hash(inc.Leaf), inc.Index, cp.Size, hs, log.Hash(cp.Root)); err != nil {
			t.Fatalf("run %s is not in the log: %v", r, err)
		}
	}
	for old := uint64(0); old <= cp.Size; old++ {
		p, err := s.ConsistencyProof(ctx, old, cp.Size)
		if err != nil {
			t.Fatalf("consistency %d..%d: %v", old, cp.Size, err)
		}
		if old == 0 {
			continue
		}
		oldRoot, err := log.Root(ctx, nodes{q: s.pool, tenant: s.tenant, sql: &s.q}, old)
		if err != nil {
			t.Fatalf("root at %d: %v", old, err)
		}
		hs := make([]log.Hash, len(p))
		for i := range p {
			hs[i] = log.Hash(p[i])
		}
		if err := log.VerifyConsistency(old, cp.Size, oldRoot, log.Hash(cp.Root), hs); err != nil {
			t.Fatalf("log at %d is not consistent with %d: %v", old, cp.Size, err)
		}
	}
}

// recorder collects what the checker reports; Fatalf ends the check.
type recorder struct{ errs []string }

type stopCheck struct{}

func (r *recorder) Helper()                      {}
func (r *recorder) Logf(string, ...any)          {}
func (r *recorder) Errorf(f string, args ...any) { r.errs = append(r.errs, fmt.Sprintf(f, args...)) }
func (r *recorder) Fatalf(f string, args ...any) { r.Errorf(f, args...); panic(stopCheck{}) }
func (r *recorder) run(fn func(reporter)) (errs []string) {
	defer func() {
		if p := recover(); p != nil {
			if _, ok := p.(stopCheck); !ok {
				panic(p)
			}
		}
		errs = r.errs
	}()
	fn(r)
	return r.errs
}

// TestActiveActiveCheckerCatchesViolations proves the checker can fail:
// histories that break each invariant it guards are reported.
func TestActiveActiveCheckerCatchesViolations(t *testing.T) {
	ctx := context.Background()
	contains := func(errs []string, want string) bool {
		for _, e := range errs {
			if strings.Contains(e, want) {
				return true
			}
		}
		return false
	}
	check := func(s *Store, runs []store.RunID, events []aaEvent) []string {
		return (&recorder{}).run(func(r reporter) { checkActiveActive(r, ctx, s, runs, events) })
	}
	appendEvent := func(owner string, epoch store.Epoch, recs []store.Record) aaEvent {
		e := aaEvent{Op: "append", Run: recs[0].Run.String(), Owner: owner, Epoch: uint64(epoch)}
		for _, r := range recs {
			e.Seqs = append(e.Seqs, uint64(r.Seq))
			e.Hashes = append(e.Hashes, r.Hash.String())
		}
		return e
	}

	// One epoch granted to two owners.
	s := openStore(t, Options{})
	run := store.NewRunID()
	events := []aaEvent{
		{Op: "acquire", Run: run.String(), Owner: "a", Epoch: 1},
		{Op: "acquire", Run: run.String(), Owner: "b", Epoch: 1},
	}
	if errs := check(s, []store.RunID{run}, events); !contains(errs, "granted to both") {
		t.Errorf("two owners of one epoch not caught: %v", errs)
	}

	// A fenced writer's append: epoch 1 after epoch 2 along the chain
	// (written here without leases, which accept any epoch, to forge it).
	s = openStore(t, Options{})
	run = store.NewRunID()
	r2, err := s.Append(ctx, 2, []store.Append{note(run, "new owner")})
	if err != nil {
		t.Fatal(err)
	}
	r1, err := s.Append(ctx, 1, []store.Append{note(run, "stale owner")})
	if err != nil {
		t.Fatal(err)
	}
	events = []aaEvent{
		{Op: "acquire", Run: run.String(), Owner: "a", Epoch: 1},
		{Op: "acquire", Run: run.String(), Owner: "b", Epoch: 2},
		appendEvent("b", 2, r2), appendEvent("a", 1, r1),
	}
	if errs := check(s, []store.RunID{run}, events); !contains(errs, "fenced writer") {
		t.Errorf("an append after fencing not caught: %v", errs)
	}

	// A record nobody was acknowledged (a lost or phantom write), and an
	// acknowledged record that is missing.
	s = openStore(t, Options{})
	run = store.NewRunID()
	recs, err := s.Append(ctx, 1, []store.Append{note(run, "a"), note(run, "b")})
	if err != nil {
		t.Fatal(err)
	}
	events = []aaEvent{{Op: "acquire", Run: run.String(), Owner: "a", Epoch: 1}, appendEvent("a", 1, recs[:1])}
	if errs := check(s, []store.RunID{run}, events); !contains(errs, "acknowledged") {
		t.Errorf("an unacknowledged record not caught: %v", errs)
	}

	// A duplicated effect (acknowledged twice) and a second first asker.
	s = openStore(t, Options{})
	run = store.NewRunID()
	recs, err = s.Append(ctx, 1, []store.Append{note(run, "a")})
	if err != nil {
		t.Fatal(err)
	}
	e1, e2 := appendEvent("a", 1, recs), appendEvent("a", 1, recs)
	e1.Effects, e2.Effects, e2.Seqs, e2.Hashes = []string{"charge"}, []string{"charge"}, nil, nil
	events = []aaEvent{{Op: "acquire", Run: run.String(), Owner: "a", Epoch: 1}, e1, e2,
		{Op: "cancel", Run: run.String(), Owner: "x", Created: true}, {Op: "cancel", Run: run.String(), Owner: "y", Created: true}}
	errs := check(s, []store.RunID{run}, events)
	if !contains(errs, "acknowledged as started 2 times") || !contains(errs, "each told they were first") {
		t.Errorf("a duplicate effect or a second first asker not caught: %v", errs)
	}

	// A sealed run missing from the log.
	s = openStore(t, Options{})
	run = store.NewRunID()
	recs, err = s.Append(ctx, 1, []store.Append{conclude(run, "succeeded")})
	if err != nil {
		t.Fatal(err)
	}
	events = []aaEvent{{Op: "acquire", Run: run.String(), Owner: "a", Epoch: 1}, appendEvent("a", 1, recs),
		{Op: "seal", Run: run.String(), Owner: "a", Epoch: 1, Leaf: recs[0].Hash.String()}}
	if errs := check(s, []store.RunID{run}, events); !contains(errs, "log position") {
		t.Errorf("an acknowledged seal missing from the log not caught: %v", errs)
	}
}
