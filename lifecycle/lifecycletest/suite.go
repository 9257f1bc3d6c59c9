// Package lifecycletest is the conformance suite of the trial lifecycle
// contract. Every implementation of lifecycle.Storage runs it:
//
//	func TestConformance(t *testing.T) {
//		lifecycletest.Run(t, func() (lifecycletest.Backend, error) {
//			return memstore.New(), nil
//		})
//	}
//
// Each check verifies one guarantee and is named after it (see
// [Invariants]); a violation is reported under that name. Each check gets a
// fresh backend from the factory. The race checks run goroutines against
// one backend and are meant to run under -race.
//
// [Verify] runs the same checks without a *testing.T and returns a
// [Report], which is how the suite's own meta-test proves that deliberately
// broken implementations fail the check they break.
package lifecycletest

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runseal/runseal/lifecycle"
)

// Backend is what the suite needs from an implementation: the contract,
// an inspector to see what each transition wrote, and a way to create
// studies, which the contract leaves to the surrounding study storage.
// If a Backend also implements io.Closer, it is closed after its check.
type Backend interface {
	lifecycle.Storage
	lifecycle.Inspector
	CreateStudy(ctx context.Context, spec lifecycle.StudySpec) (lifecycle.StudyID, error)
}

// UnmanagedTrialCreator is implemented by a Backend that can create a
// trial outside the lifecycle protocol, as plain study CRUD would. Without
// it the checks of the Unsupported answer for such trials are skipped.
type UnmanagedTrialCreator interface {
	CreateUnmanagedTrial(ctx context.Context, study lifecycle.StudyID, state lifecycle.TrialState) (lifecycle.TrialID, error)
}

// Factory returns a fresh, empty backend.
type Factory func() (Backend, error)

// CheckTimeout bounds one check, so that a deadlocked implementation fails
// its check instead of hanging the suite.
var CheckTimeout = 60 * time.Second

// Result is the outcome of one check.
type Result struct {
	// Invariant is the check's name.
	Invariant string
	// Violations describe each way the invariant was broken; empty when it
	// held.
	Violations []string
	// Skipped says why the check did not run; empty when it ran.
	Skipped string
}

// Report is the outcome of a suite run.
type Report struct {
	Results []Result
}

// Ran returns how many checks ran (were not skipped).
func (r Report) Ran() int {
	n := 0
	for _, res := range r.Results {
		if res.Skipped == "" {
			n++
		}
	}
	return n
}

// Violated returns the names of the invariants that were violated, in
// suite order.
func (r Report) Violated() []string {
	var out []string
	for _, res := range r.Results {
		if len(res.Violations) > 0 {
			out = append(out, res.Invariant)
		}
	}
	return out
}

// String lists each violation as "invariant: detail", one a line.
func (r Report) String() string {
	var b strings.Builder
	for _, res := range r.Results {
		for _, v := range res.Violations {
			fmt.Fprintf(&b, "%s: %s\n", res.Invariant, v)
		}
	}
	return b.String()
}

type check struct {
	name string
	fn   func(*checker)
}

// allChecks lists every check, in suite order.
func allChecks() []check {
	var all []check
	for _, group := range [][]check{coreChecks, finalizationChecks, outboxChecks, raceChecks} {
		all = append(all, group...)
	}
	return all
}

// Invariants returns the names of every check, in suite order.
func Invariants() []string {
	var names []string
	for _, c := range allChecks() {
		names = append(names, c.name)
	}
	return names
}

// Run runs every check as a subtest of t, named after its invariant, and
// fails t if no check ran at all: a suite that verified nothing must not
// read as a pass.
func Run(t *testing.T, f Factory) {
	t.Helper()
	ran := 0
	for _, ch := range allChecks() {
		t.Run(ch.name, func(t *testing.T) {
			res := runCheck(ch, f)
			if res.Skipped != "" {
				t.Skip(res.Skipped)
			}
			ran++
			for _, v := range res.Violations {
				t.Errorf("invariant %s violated: %s", ch.name, v)
			}
		})
	}
	if ran == 0 {
		t.Fatal("lifecycletest: no check ran")
	}
}

// Verify runs every check, or only those named in only, and returns the
// report. It is Run without a *testing.T.
func Verify(f Factory, only ...string) Report {
	want := map[string]bool{}
	for _, n := range only {
		want[n] = true
	}
	var rep Report
	for _, ch := range allChecks() {
		if len(want) > 0 && !want[ch.name] {
			continue
		}
		rep.Results = append(rep.Results, runCheck(ch, f))
	}
	return rep
}

// runCheck runs one check on a fresh backend in its own goroutine, so that
// fatal failures can end it with runtime.Goexit as testing.T.FailNow does,
// and so that a hung implementation cannot hang the suite.
func runCheck(ch check, f Factory) Result {
	res := Result{Invariant: ch.name}
	b, err := f()
	if err != nil {
		res.Violations = []string{fmt.Sprintf("factory: %v", err)}
		return res
	}
	if cl, ok := b.(io.Closer); ok {
		defer cl.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), CheckTimeout)
	defer cancel()
	c := &checker{ctx: ctx, b: b}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				c.Errorf("panic: %v", r)
			}
		}()
		ch.fn(c)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		c.Errorf("check did not finish within %v", CheckTimeout)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	res.Violations = append([]string(nil), c.violations...)
	res.Skipped = c.skipped
	return res
}

// checker is what a check reports to. Errorf may be called from any
// goroutine; Fatalf and Skipf only from the check's own.
type checker struct {
	ctx        context.Context
	b          Backend
	mu         sync.Mutex
	violations []string
	skipped    string
}

func (c *checker) Errorf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.violations = append(c.violations, fmt.Sprintf(format, args...))
}

func (c *checker) Fatalf(format string, args ...any) {
	c.Errorf(format, args...)
	runtime.Goexit()
}

func (c *checker) Skipf(format string, args ...any) {
	c.mu.Lock()
	c.skipped = fmt.Sprintf(format, args...)
	c.mu.Unlock()
	runtime.Goexit()
}
