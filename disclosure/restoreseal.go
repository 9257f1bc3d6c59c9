package disclosure

import (
	"context"
	"errors"
	"sync"

	"github.com/oklog/ulid/v2"

	"github.com/runseal/runseal/store"
)

// A restore into a store.BulkWriter seals beside its appends: the sealer
// walks the log in index order on a goroutine of its own and sends a bulk
// of seals once every run in it is committed, while the appends go on. A
// journal's log order follows its run ids closely (runs are sealed soon
// after they start, and ids are start times), so the seals trail the
// appends by a bulk or two instead of waiting for all of them, and the
// store's two halves of the work (on PostgreSQL, two server processes) run
// at once. The order of what commits is unchanged: appends in export order,
// seals in log-index order, each seal after its run's records, so a killed
// restore leaves a prefix of the appends' bulks and a prefix of the log,
// which Resume finishes. Each seal names the export's leaf
// (store.BulkSeal.Leaf), so a run whose replayed records are not the ones
// the log commits to (an export changed between the two readings) is
// refused before its seal commits.

// appendGate tells the sealer which runs are committed: the appends go in
// run-id order and commit one bulk at a time in that order, so "every run
// up to R" is one run id.
type appendGate struct {
	mu    sync.Mutex
	upto  store.RunID
	done  bool  // every run is appended, or err
	err   error // the appends failed
	moved chan struct{}
}

func newAppendGate() *appendGate { return &appendGate{moved: make(chan struct{})} }

// advance records that every run up to run is committed.
func (g *appendGate) advance(run store.RunID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ulid.ULID(run).Compare(ulid.ULID(g.upto)) > 0 {
		g.upto = run
		close(g.moved)
		g.moved = make(chan struct{})
	}
}

// end records that the appends ended: all of them (err nil), or failed.
func (g *appendGate) end(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done {
		return
	}
	g.done, g.err = true, err
	close(g.moved)
}

// errAppendsFailed stops the sealer when the appends fail; the restore
// reports the appends' own error.
var errAppendsFailed = errors.New("restore: the appends failed")

// wait returns once run's records are committed, or the appends failed.
func (g *appendGate) wait(ctx context.Context, run store.RunID) error {
	for {
		g.mu.Lock()
		switch {
		case g.err != nil:
			g.mu.Unlock()
			return errAppendsFailed
		case g.done || ulid.ULID(run).Compare(ulid.ULID(g.upto)) <= 0:
			g.mu.Unlock()
			return nil
		}
		moved := g.moved
		g.mu.Unlock()
		select {
		case <-moved:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// sealConcurrently is the sealer running beside the appends. Its progress
// is kept and handed to the caller's callback on the restore's own
// goroutine once the appends are done (finish).
type sealConcurrently struct {
	gate   *appendGate
	result chan error
	mu     sync.Mutex
	last   *RestoreProgress
	news   chan struct{}
}

// startSealing runs seal (which walks the log with sl) on a goroutine,
// gated on the appends; a failure of the seals cancels the restore's
// context with its error, which stops the appends.
func startSealing(ctx context.Context, cancel context.CancelCauseFunc, sl *sealer, seal func() error) *sealConcurrently {
	sc := &sealConcurrently{gate: newAppendGate(), result: make(chan error, 1), news: make(chan struct{}, 1)}
	sl.gate = sc.gate
	sl.progress = func(p RestoreProgress) {
		sc.mu.Lock()
		sc.last = &p
		sc.mu.Unlock()
		select {
		case sc.news <- struct{}{}:
		default:
		}
	}
	go func() {
		err := seal()
		if err != nil && !errors.Is(err, errAppendsFailed) {
			cancel(err)
		}
		sc.result <- err
	}()
	return sc
}

// stop ends the sealer after the appends failed with err, and waits for it.
func (sc *sealConcurrently) stop(err error) {
	sc.gate.end(err)
	<-sc.result
}

// finish lets the sealer seal what is left, relaying its progress to
// progress, and returns its error.
func (sc *sealConcurrently) finish(progress func(RestoreProgress)) error {
	sc.gate.end(nil)
	for {
		select {
		case err := <-sc.result:
			sc.relay(progress)
			return err
		case <-sc.news:
			sc.relay(progress)
		}
	}
}

func (sc *sealConcurrently) relay(progress func(RestoreProgress)) {
	sc.mu.Lock()
	p := sc.last
	sc.last = nil
	sc.mu.Unlock()
	if p != nil {
		progress(*p)
	}
}
