// Package storetest is the conformance suite for store.Journal. Every
// backend and every decorator runs it unchanged; a violation is reported by
// the invariant it breaks ("fencing", "exactly-once", "chaining", ...), and
// a run in which no check ran is itself a failure.
//
// The suite is shipped as a package, not as _test files, so that embedders
// can prove their own stores with it. Each invariant's checks live in the
// file named for it (chaining.go, fencing.go, lease.go, log.go,
// integrity.go, ...); checks.go lists them in the order they run. The
// integrity checks edit the database behind the store's back and run only
// with a Harness that can (Harness.Tamper).
package storetest

import (
	"context"
	"fmt"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runseal/runseal/store"
)

// Clock moves a store's clock forward. A backend with an injectable clock
// passes a FakeClock; one that judges time by a server clock sleeps.
type Clock interface {
	Advance(d time.Duration)
}

// Harness opens fresh, empty journals for the suite.
type Harness struct {
	// Open returns a new, empty journal (a fresh file, or a fresh tenant of
	// a shared database) and the clock its leases are judged by. Cleanup is
	// registered on tb.
	Open func(tb testing.TB) (store.Journal, Clock)
	// Skip lists checks (by full name) the harness cannot run, with the
	// reason in the map value; skipped checks are reported, never silent.
	Skip map[string]string
	// Tamper, if set, runs one SQL statement against the journal's
	// database behind the store's back, as an attacker with write access to
	// the file or the server would. Statements name the tables unqualified
	// (runs, log_nodes, logs, signed_checkpoints, witnessed) and use ?
	// placeholders. The integrity checks need it, and the journal to be a
	// store.LogVerifier, CheckpointStore and PublicationStore; without it
	// they are reported skipped.
	Tamper func(tb testing.TB, j store.Journal, query string, args ...any)
}

// Violation is one broken guarantee.
type Violation struct {
	Invariant string // e.g. "fencing"
	Check     string // e.g. "fencing/future-epoch"
	Detail    string
}

func (v Violation) String() string { return fmt.Sprintf("[%s] %s: %s", v.Invariant, v.Check, v.Detail) }

// Report is the outcome of a suite run.
type Report struct {
	Checked    []string
	Skipped    []string
	Violations []Violation
}

// T is what a check uses to open journals and report violations.
type T struct {
	tb       testing.TB
	h        Harness
	name     string
	failures []string
	ctx      context.Context
}

type stop struct{}

// Ctx is the context for store calls.
func (t *T) Ctx() context.Context { return t.ctx }

// Open opens a fresh journal.
func (t *T) Open() (store.Journal, Clock) { return t.h.Open(t.tb) }

// Errorf records a violation and continues.
func (t *T) Errorf(format string, args ...any) {
	t.failures = append(t.failures, fmt.Sprintf(format, args...))
}

// Fatalf records a violation and ends the check.
func (t *T) Fatalf(format string, args ...any) {
	t.Errorf(format, args...)
	panic(stop{})
}

type check struct {
	name string
	fn   func(t *T)
}

// tamperPrefix names the checks that need Harness.Tamper; tamperOthers
// lists the ones outside it that edit the database too.
const tamperPrefix = "integrity/"

var tamperOthers = map[string]bool{"bulk/scan-without-run-row-refused": true}

// skipped returns why h cannot run c, or "".
func (h Harness) skipped(c check) string {
	if why, ok := h.Skip[c.name]; ok {
		if why == "" {
			why = "skipped by the harness"
		}
		return why
	}
	if (strings.HasPrefix(c.name, tamperPrefix) || tamperOthers[c.name]) && h.Tamper == nil {
		return "the harness has no Tamper"
	}
	return ""
}

// Checks lists the suite's check names, in the order they run.
func Checks() []string {
	out := make([]string, len(checks))
	for i, c := range checks {
		out[i] = c.name
	}
	return out
}

func runOne(tb testing.TB, h Harness, c check) (failures []string) {
	t := &T{tb: tb, h: h, name: c.name, ctx: context.Background()}
	func() {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(stop); !ok {
					t.failures = append(t.failures, fmt.Sprintf("panic: %v\n%s", r, debug.Stack()))
				}
			}
		}()
		c.fn(t)
	}()
	return t.failures
}

// Check runs every check against h and returns what it found, without
// failing tb; the meta-tests use it to prove the suite can fail.
func Check(tb testing.TB, h Harness) Report {
	var r Report
	for _, c := range checks {
		if h.skipped(c) != "" {
			r.Skipped = append(r.Skipped, c.name)
			continue
		}
		for _, f := range runOne(tb, h, c) {
			r.Violations = append(r.Violations, Violation{Invariant: invariant(c.name), Check: c.name, Detail: f})
		}
		r.Checked = append(r.Checked, c.name)
	}
	return r
}

// Run runs every check as a subtest of t and fails t for each violation,
// and if no check ran at all.
func Run(t *testing.T, h Harness) {
	ran := 0
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if why := h.skipped(c); why != "" {
				t.Skip(why)
			}
			ran++
			for _, f := range runOne(t, h, c) {
				t.Errorf("[%s] %s", invariant(c.name), f)
			}
		})
	}
	if ran == 0 {
		t.Fatal("storetest: no conformance check ran")
	}
}

// Invariants returns the distinct invariants of the violations, sorted.
func (r Report) Invariants() []string {
	seen := map[string]bool{}
	for _, v := range r.Violations {
		seen[v.Invariant] = true
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func invariant(check string) string {
	if i := strings.IndexByte(check, '/'); i >= 0 {
		return check[:i]
	}
	return check
}

// FakeClock is a settable clock for backends that take one.
type FakeClock struct {
	mu sync.Mutex
	t  time.Time
}

// NewFakeClock starts at a fixed instant, so runs are reproducible.
func NewFakeClock() *FakeClock {
	return &FakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

// Now returns the clock's time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// SleepClock advances by sleeping, for stores judged by a server's clock.
type SleepClock struct{}

// Advance sleeps for d.
func (SleepClock) Advance(d time.Duration) { time.Sleep(d) }
