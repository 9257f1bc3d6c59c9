package lifecycletest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runseal/runseal/lifecycle"
)

var raceChecks = []check{
	{"race.claimers-one-winner", checkRaceClaimers},
	{"race.sweepers-one-winner", checkRaceSweepers},
	{"race.renew-or-sweep", checkRaceRenewOrSweep},
	{"race.terminal-or-sweep", checkRaceTerminalOrSweep},
	{"race.abandon-or-claim", checkRaceAbandonOrClaim},
	{"race.reservations-within-budget", checkRaceReservations},
	{"race.finalizers-one-acquirer", checkRaceFinalizers},
	{"race.displaced-finalizer-fenced", checkRaceDisplacedFinalizer},
	{"race.replacement-once", checkRaceReplacement},
	{"race.effect-completion-once", checkRaceCompletion},
}

const (
	racers = 8
	rounds = 20
)

// race runs n functions at once, released together to maximize overlap.
func (c *checker) race(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		c.spawn(&wg, func() {
			<-start
			f(i)
		})
	}
	close(start)
	wg.Wait()
}

// spawn runs f on a new goroutine of wg, reporting a panic as a violation
// rather than letting a broken implementation crash the suite.
func (c *checker) spawn(wg *sync.WaitGroup, f func()) {
	wg.Go(func() {
		defer func() {
			if r := recover(); r != nil {
				c.Errorf("panic: %v", r)
			}
		}()
		f()
	})
}

// unexpected reports an error that a racer should never see: any error
// when allowed is 0, any but the allowed kind otherwise.
func (c *checker) unexpected(err error, allowed lifecycle.Kind, what string) {
	if err != nil && (allowed == 0 || lifecycle.KindOf(err) != allowed) {
		c.Errorf("%s: want success or a %v error, got %v", what, allowed, err)
	}
}

func checkRaceClaimers(c *checker) {
	s := c.study(defaultSpec)
	for round := range rounds {
		tr := c.waiting(s)
		prev := uint64(0)
		for attempt := range 2 {
			var wins atomic.Int32
			var winner atomic.Value
			c.race(racers, func(i int) {
				tok, err := c.b.Claim(c.ctx, lifecycle.ClaimRequest{Trial: tr, Owner: fmt.Sprintf("w%d", i)})
				c.unexpected(err, lifecycle.KindLeaseLost, "racing claim")
				if err == nil {
					wins.Add(1)
					winner.Store(tok)
				}
			})
			if n := wins.Load(); n != 1 {
				c.Fatalf("round %d attempt %d: %d claimers won one trial", round, attempt, n)
			}
			tok := winner.Load().(lifecycle.TrialOwnerToken)
			if obs := c.observe(tr); obs.Owner != tok.Owner || obs.Epoch != tok.Epoch || tok.Epoch <= prev {
				c.Errorf("round %d: winner %+v, observed %+v, previous epoch %d", round, tok, obs, prev)
			}
			prev = tok.Epoch
			c.pause(tok)
		}
	}
}

func checkRaceSweepers(c *checker) {
	s := c.study(defaultSpec)
	for round := range rounds {
		tok := c.running(s, "owner")
		obs := c.observe(tok.Trial)
		var wins atomic.Int32
		c.race(racers, func(i int) {
			won, err := c.b.FailStale(c.ctx, lifecycle.FailStaleRequest{Observed: obs, Grace: time.Second, Intent: testIntent})
			c.unexpected(err, 0, "racing fail_stale")
			if won {
				wins.Add(1)
			}
		})
		if n := wins.Load(); n != 1 {
			c.Errorf("round %d: %d sweepers won one stale trial", round, n)
		}
		c.oneRecord(tok.Trial)
	}
}

// oneRecord reports unless exactly one outbox record names the trial.
func (c *checker) oneRecord(trial lifecycle.TrialID) {
	list, err := c.b.ListOutbox(c.ctx)
	c.ok(err, "list outbox")
	n := 0
	for _, r := range list {
		if r.Key.Trial == trial {
			n++
		}
	}
	if n != 1 {
		c.Errorf("trial %s ended with %d outbox records, want 1", trial, n)
	}
}

func checkRaceRenewOrSweep(c *checker) {
	s := c.study(defaultSpec)
	for round := range rounds {
		tok := c.running(s, "owner")
		obs := c.observe(tok.Trial)
		var wins, renewed atomic.Int32
		c.race(racers+1, func(i int) {
			if i == racers {
				_, err := c.b.Renew(c.ctx, lifecycle.RenewRequest{Owner: tok})
				c.unexpected(err, lifecycle.KindLeaseLost, "renew racing sweepers")
				if err == nil {
					renewed.Add(1)
				}
				return
			}
			won, err := c.b.FailStale(c.ctx, lifecycle.FailStaleRequest{Observed: obs, Grace: time.Second, Intent: testIntent})
			c.unexpected(err, 0, "fail_stale racing a renewal")
			if won {
				wins.Add(1)
			}
		})
		if w, r := wins.Load(), renewed.Load(); w+r != 1 {
			c.Errorf("round %d: %d sweepers won and %d renewals succeeded; exactly one of them must", round, w, r)
		}
	}
}

func checkRaceTerminalOrSweep(c *checker) {
	s := c.study(defaultSpec)
	for round := range rounds {
		tok := c.running(s, "owner")
		obs := c.observe(tok.Trial)
		var wins, told atomic.Int32
		c.race(racers+1, func(i int) {
			if i == racers {
				_, err := c.b.TerminalWithIntent(c.ctx, complete(tok, 1), testIntent)
				c.unexpected(err, lifecycle.KindLeaseLost, "terminal racing sweepers")
				if err == nil {
					told.Add(1)
				}
				return
			}
			won, err := c.b.FailStale(c.ctx, lifecycle.FailStaleRequest{Observed: obs, Grace: time.Second, Intent: testIntent})
			c.unexpected(err, 0, "fail_stale racing the owner's terminal")
			if won {
				wins.Add(1)
			}
		})
		if w, t := wins.Load(), told.Load(); w+t != 1 {
			c.Errorf("round %d: %d sweepers won and %d terminal outcomes committed; exactly one may end the trial", round, w, t)
		}
		c.oneRecord(tok.Trial)
	}
}

func checkRaceAbandonOrClaim(c *checker) {
	s := c.study(defaultSpec)
	for round := range rounds {
		tr := c.waiting(s)
		var abandoned, claimed atomic.Int32
		c.race(4, func(i int) {
			if i%2 == 0 {
				won, err := c.b.Abandon(c.ctx, lifecycle.AbandonRequest{Trial: tr})
				c.unexpected(err, 0, "racing abandon")
				if won {
					abandoned.Add(1)
				}
				return
			}
			_, err := c.b.Claim(c.ctx, lifecycle.ClaimRequest{Trial: tr, Owner: fmt.Sprintf("w%d", i)})
			c.unexpected(err, lifecycle.KindLeaseLost, "claim racing abandon")
			if err == nil {
				claimed.Add(1)
			}
		})
		a, cl := abandoned.Load(), claimed.Load()
		if a+cl != 1 {
			c.Errorf("round %d: %d abandons and %d claims won one reservation", round, a, cl)
			continue
		}
		want := lifecycle.TrialRunning
		if a == 1 {
			want = lifecycle.TrialFailed
		}
		if got := c.observe(tr).State; got != want {
			c.Errorf("round %d: trial is %s, want %s", round, got, want)
		}
	}
}

func checkRaceReservations(c *checker) {
	s := c.study(defaultSpec)
	const budget = 10
	var mu sync.Mutex
	numbers := map[uint64]int{}
	c.race(16, func(int) {
		for range 3 {
			out, err := c.b.ReserveAndCreateIfBudget(c.ctx, lifecycle.ReserveAndCreateRequest{Study: s, MaxTrials: budget})
			c.unexpected(err, 0, "racing reservation")
			if err == nil && out.Status == lifecycle.ReservationCreated {
				mu.Lock()
				numbers[out.Number]++
				mu.Unlock()
			}
		}
	})
	if len(numbers) != budget {
		c.Errorf("48 racing reservations under budget %d created %d distinct numbers", budget, len(numbers))
	}
	for n, times := range numbers {
		if n >= budget || times != 1 {
			c.Errorf("number %d was handed out %d times", n, times)
		}
	}
	if got := c.inspectStudy(s).Trials; got != budget {
		c.Errorf("study counts %d records, want %d", got, budget)
	}
}

func checkRaceFinalizers(c *checker) {
	s := c.study(defaultSpec)
	for round := range rounds {
		obs, err := c.b.ObserveFinalization(c.ctx, s)
		c.ok(err, "observe finalization")
		var wins atomic.Int32
		c.race(racers, func(i int) {
			_, err := c.b.AcquireFinalization(c.ctx, lifecycle.FinalizationAcquireRequest{Study: s, Holder: fmt.Sprintf("f%d", i), Observed: obs})
			c.unexpected(err, lifecycle.KindConflict, "racing acquire")
			if err == nil {
				wins.Add(1)
			}
		})
		if n := wins.Load(); n != 1 {
			c.Errorf("round %d: %d finalizers acquired one claim from one observation", round, n)
		}
	}
}

// checkRaceDisplacedFinalizer lets a finalizer work while another reclaims
// the study. Every owned write the first one starts after the reclaim
// returned must be refused.
func checkRaceDisplacedFinalizer(c *checker) {
	s := c.study(defaultSpec)
	var keys []lifecycle.OutboxKey
	for range 40 {
		keys = append(keys, c.told(s))
	}
	a := c.acquire(s, "a")
	var displaced atomic.Bool
	working := make(chan struct{})
	var started sync.Once
	var wg sync.WaitGroup
	c.spawn(&wg, func() {
		defer started.Do(func() { close(working) }) // never leave the reclaimer waiting
		late := 0
		for i := 0; late < 20 && i < 1_000_000; i++ {
			if i == 5 {
				started.Do(func() { close(working) })
			}
			after := displaced.Load()
			_, err := c.b.AdvanceOutboxOwned(c.ctx, a, lifecycle.OutboxAdvanceRequest{
				Key: keys[i%len(keys)], Phase: lifecycle.PhaseCallbacks,
				States: []lifecycle.StateBlob{studyBlob("sampler", "tpe", 1, fmt.Sprintf("a%d", i))},
			})
			c.unexpected(err, lifecycle.KindLeaseLost, "displaced finalizer's advance")
			if after {
				late++
				if err == nil {
					c.Errorf("attempt %d: an owned advance started after the reclaim returned was accepted", i)
				}
			}
		}
	})
	<-working
	obs, err := c.b.ObserveFinalization(c.ctx, s)
	c.ok(err, "observe finalization")
	b, err := c.b.AcquireFinalization(c.ctx, lifecycle.FinalizationAcquireRequest{Study: s, Holder: "b", Observed: obs})
	displaced.Store(true)
	wg.Wait()
	c.ok(err, "reclaim")
	for _, key := range keys {
		_, err := c.b.AdvanceOutboxOwned(c.ctx, b, lifecycle.OutboxAdvanceRequest{Key: key, Phase: lifecycle.PhaseCallbacks})
		c.ok(err, "current finalizer's advance")
		if rec := c.outbox(key); rec.Phase != lifecycle.PhaseCallbacks {
			c.Errorf("record %v at %s after both finalizers", key, rec.Phase)
		}
	}
}

func checkRaceReplacement(c *checker) {
	s := c.study(defaultSpec)
	key := c.atEffects(s, replacement("retry", bigBudget))
	before := c.inspectStudy(s).Trials
	outs := make([]lifecycle.ReplacementOutcome, racers)
	c.race(racers, func(i int) {
		out, err := c.b.CreateReplacement(c.ctx, lifecycle.OutboxEffectKey{Outbox: key, Name: "retry"})
		c.unexpected(err, 0, "racing create_replacement")
		outs[i] = out
	})
	for i, out := range outs {
		if out != outs[0] || out.Status != lifecycle.ReplacementCreated {
			c.Errorf("racer %d got %+v, racer 0 got %+v", i, out, outs[0])
		}
	}
	if n := c.inspectStudy(s).Trials; n != before+1 {
		c.Errorf("%d racing replays of one replacement created %d trials", racers, n-before)
	}
}

func checkRaceCompletion(c *checker) {
	s := c.study(defaultSpec)
	key := c.atEffects(s, external("a", `1`))
	c.race(racers, func(int) {
		err := c.b.CompleteOutboxEffect(c.ctx, lifecycle.OutboxEffectCompletion{Effect: lifecycle.OutboxEffectKey{Outbox: key, Name: "a"}})
		c.unexpected(err, 0, "racing completion")
	})
	if rec := c.outbox(key); len(rec.Completed) != 1 {
		c.Errorf("%d racing completions of one effect recorded %d completions", racers, len(rec.Completed))
	}
}
