package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// A Store opened on a file where any tenant's log is not empty warms the pages its
// proofs read, in the background, so that a server just started on a
// cold page cache (after a reboot: the file's pages live only in the
// kernel's cache, read through the pool's memory map) answers proofs as
// fast as one that has run a while. An inclusion proof reads one leaf page
// of the runs table (a run's log_index and leaf, by its key; the table is
// WITHOUT ROWID, so that b-tree is the table) and of log_nodes (the nodes
// below the node cache's floor), and the node cache above (proofread.go).
// At 10^6 sealed runs, after the page cache was dropped, each first proof
// read its pages from the disk: a p99 of 10 ms, where it is 0.2 ms once
// they are cached.
//
// The warm reads those two b-trees whole, every tenant's part, and
// nothing else of the file (not the records, which a proof never reads),
// by walking them with SQLite's dbstat table on a connection of the read
// pool whose memory map is off (pageCacheConn): the pages land in the
// kernel's page cache, which the pool's map then serves, and do not stay
// resident in the process. Then it fills the opening tenant's node cache
// (WarmNodeCache; other tenants' views of the file fill theirs on their
// first proof, from pages now cached). Proofs are served all the while,
// from what is warm so far, and leave the node cache's fill to the warm
// until it has read the b-trees; Store.WaitWarm waits for the end.
//
// A warm that fails stops, logs why and leaves the rest to the proofs,
// which read what they need as they would have without it: a warm never
// fails Open or a proof. Options.NoWarm turns it off, for a process that
// serves no proofs (the journal CLI warms only under "journal serve").
// Close stops a warm under way (the statement stops at its context's
// cancellation) before it closes the file.

// WarmReport is what a Store's warm at open did.
type WarmReport struct {
	// Method is how the pages were read: "b-tree walk", or "" when
	// nothing was warmed (Options.NoWarm, or an empty log).
	Method string
	// Pages is how many pages of the proof b-trees were read.
	Pages int64
	// NodeCache is whether the node cache was filled for the log's size.
	NodeCache bool
	// Took is how long the warm ran, Indexes how long of that it read the
	// b-trees, before the node cache's fill.
	Took, Indexes time.Duration
	// Err is why the warm stopped short (nil: it finished).
	Err error
}

// ErrWarm is the class of a warm that stopped short (WarmReport.Err); a
// proof never returns it.
var ErrWarm = errors.New("sqlite journal: warm")

// WarmError is why a Store's warm stopped short, at which step.
type WarmError struct {
	Step string // "log size", "walk of runs", "walk of log_nodes", "node cache"
	Err  error
}

func (e *WarmError) Error() string {
	return fmt.Sprintf("sqlite journal: warm: %s: %v", e.Step, e.Err)
}

// Unwrap leads to ErrWarm and to the cause.
func (e *WarmError) Unwrap() []error { return []error{ErrWarm, e.Err} }

// proofBTrees are the b-trees an inclusion or consistency proof reads
// (qRunInLog, nodesQuery), beside the one-row logs table.
var proofBTrees = []string{"runs", "log_nodes"}

// warmState is a file's warm, started by Open: its report, once done is
// closed. Every tenant's view of the file shares it.
type warmState struct {
	done chan struct{}
	stop context.CancelFunc
	rep  WarmReport
	// reading is set while the warm reads the b-trees: proofs then leave
	// the node cache's fill to it, which starts once what the fill reads
	// is cached, rather than a first proof starting it on pages still on
	// the disk.
	reading atomic.Bool
	hold    func(ctx context.Context, conn *sql.Conn, btree string) // Options.warmHold
}

// startWarm starts the warm in the background; stopWarm ends it.
func (s *Store) startWarm(opts Options) {
	w := &s.warm
	w.done = make(chan struct{})
	if opts.NoWarm {
		w.stop = func() {}
		close(w.done)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	w.stop, w.hold = stop, opts.warmHold
	w.reading.Store(true)
	go func() {
		defer close(w.done)
		defer w.reading.Store(false)
		t0 := time.Now()
		w.rep = s.runWarm(ctx)
		w.rep.Took = time.Since(t0)
		r := w.rep
		switch {
		case r.Err != nil && !errors.Is(r.Err, context.Canceled):
			s.log.Warn("sqlite journal: warming the proofs' pages stopped short; proofs read the rest as they need it",
				"tenant", s.tenant, "err", r.Err)
		case r.Method != "" && r.Err == nil:
			s.log.Info("sqlite journal: proofs' pages warmed", "tenant", s.tenant, "method", r.Method,
				"pages", r.Pages, "took", r.Took)
		}
	}()
}

// stopWarm cancels a warm under way and waits for it to end, so that it
// reads nothing of the file after Close.
func (s *Store) stopWarm() {
	s.warm.stop()
	<-s.warm.done
}

// WaitWarm waits for the warm the file started when it opened to end, and
// returns what it did (a WarmReport with no Method when it was off or the
// log was empty). Proofs need not wait for it; a caller that wants its
// first proofs as fast as the later ones (a benchmark, a server that
// listens only when warm) does.
func (s *Store) WaitWarm(ctx context.Context) (WarmReport, error) {
	select {
	case <-s.warm.done:
		return s.warm.rep, nil
	case <-ctx.Done():
		return WarmReport{}, ctx.Err()
	}
}

// runWarm reads the proof b-trees and fills the node cache; see above.
func (s *Store) runWarm(ctx context.Context) (rep WarmReport) {
	// The walk serves every tenant of the file, so it runs when any log
	// holds a leaf, not only the opening tenant's (journal serve opens
	// --tenant first, which may have sealed nothing while --tenants did).
	var logged bool
	if err := s.rdb.QueryRowContext(ctx, `SELECT EXISTS(SELECT 1 FROM logs WHERE size > 0)`).Scan(&logged); err != nil {
		rep.Err = &WarmError{Step: "log size", Err: err}
		return rep
	}
	if !logged {
		return rep // nothing to prove yet
	}
	size, err := s.committedSize(ctx)
	if err != nil {
		rep.Err = &WarmError{Step: "log size", Err: err}
		return rep
	}
	t0 := time.Now()
	rep.Method = "b-tree walk"
	if rep.Pages, err = s.walkProofBTrees(ctx); err != nil {
		rep.Err = err
		return rep
	}
	rep.Indexes = time.Since(t0)
	s.warm.reading.Store(false)
	if size == 0 {
		return rep // the opening tenant's log is empty: no node cache to fill
	}
	if err := s.WarmNodeCache(ctx); err != nil {
		rep.Err = &WarmError{Step: "node cache", Err: err}
		return rep
	}
	rep.NodeCache = true
	return rep
}

// walkProofBTrees reads every page of the proof b-trees once, through a
// read connection without its memory map, and returns how many it read.
func (s *Store) walkProofBTrees(ctx context.Context) (int64, error) {
	conn, release, err := s.pageCacheConn(ctx)
	if err != nil {
		return 0, &WarmError{Step: "read connection", Err: err}
	}
	defer release()
	var pages int64
	for _, name := range proofBTrees {
		// dbstat walks the b-tree named, interior pages first, and yields
		// a row per page.
		if s.warm.hold != nil {
			s.warm.hold(ctx, conn, name)
		}
		var n int64
		if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM dbstat WHERE name = ?`, name).Scan(&n); err != nil {
			return pages, &WarmError{Step: "walk of " + name, Err: err}
		}
		pages += n
	}
	return pages, nil
}
