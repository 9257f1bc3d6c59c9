package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runseal/runseal/store"
)

// A Store opened on an existing log warms the pages its proofs read, in
// the background, so that a server just started (its shared_buffers
// empty, the kernel's page cache perhaps too) answers proofs as fast as
// one that has run a while. An inclusion proof reads one leaf page of each
// of the two covering indexes runs_proof and log_leaves (proofindex.go)
// and the node cache (proofread.go); at 10^6 sealed runs the indexes are
// 107 and 74 MB, more than PostgreSQL's default 128 MB of shared_buffers,
// and after a restart with the page cache cold each proof read its pages
// from the disk: a p99 of 7-9 ms on the first 2,000 proofs, where it is
// 0.2 ms once they are cached.
//
// The warm reads both indexes whole, sequentially, with pg_prewarm when
// the extension is installed in the database (CREATE EXTENSION
// pg_prewarm, once, by a user allowed to): into shared_buffers while they
// fit in half of them, into the kernel's page cache ("read") beyond. The
// store does not install the extension itself. Without it (or without the
// right to run it), the warm reads the tenant's part of each index with an
// index-only scan, which loads the same pages through shared_buffers.
// Then it fills the node cache (WarmNodeCache). Proofs are served all the
// while, from what is warm so far; Store.WaitWarm waits for the end.
//
// A warm that fails (the server went away, a statement refused) stops,
// logs why and leaves the rest to the proofs, which read what they need as
// they would have without it: a warm never fails Open or a proof.
// Options.NoWarm turns it off, for a process that serves no proofs (a
// writer of a shared database, a one-shot command: the journal CLI warms
// only under "journal serve") or a server whose buffers already hold the
// log (pg_prewarm's autoprewarm, or a shared_buffers larger than the
// indexes). Close stops a warm under way (pg_prewarm and the scans stop at
// the statement's cancellation).

// WarmReport is what a Store's warm at open did.
type WarmReport struct {
	// Method is how the indexes were read: "pg_prewarm", "index scans"
	// (the extension was not installed or could not be used), or "" when
	// nothing was warmed (Options.NoWarm, or an empty log).
	Method string
	// Pages is how many index pages were read: into shared_buffers
	// (Buffered) or only into the kernel's page cache (the rest, pg_prewarm
	// "read"). Both are -1 after index scans, which go through
	// shared_buffers and do not count their pages.
	Pages, Buffered int64
	// NodeCache is whether the node cache was filled for the log's size.
	NodeCache bool
	// Took is how long the warm ran, Indexes how long of that it read the
	// indexes and tables before the node cache's fill.
	Took, Indexes time.Duration
	// Fallback is why pg_prewarm was not used (nil: it was, or the warm
	// did not get that far).
	Fallback error
	// Err is why the warm stopped short (nil: it finished).
	Err error
}

// warmState is a Store's warm: its report, once done is closed.
type warmState struct {
	done chan struct{}
	rep  WarmReport
	// fill is whether the node cache keeps nodes, so that the warm reads
	// what its fill reads and fills it.
	fill bool
	// reading is set while the warm reads the indexes and tables: proofs
	// then leave the node cache's fill to it (proofReader), which starts
	// it once what the fill reads is in memory, rather than a first proof
	// starting it on pages still on the disk (a fill from a cold page
	// cache took 6.8 s at 10^6, one page read per node of its top levels).
	reading atomic.Bool
}

// ErrWarm is the class of a warm that stopped short (WarmReport.Err); a
// proof never returns it.
var ErrWarm = errors.New("postgres journal: warm")

// WarmError is why a Store's warm stopped short, at which step.
type WarmError struct {
	Step string // "log size", "pg_prewarm", "index scan of <index>", "node cache"
	Err  error
}

func (e *WarmError) Error() string {
	return fmt.Sprintf("postgres journal: warm: %s: %v", e.Step, e.Err)
}

// Unwrap leads to ErrWarm and to the cause.
func (e *WarmError) Unwrap() []error { return []error{ErrWarm, e.Err} }

// proofIndexes are the indexes an inclusion proof reads one leaf page of
// each, in the order the warm reads them, with the statement that reads
// the tenant's part of each with an index-only scan when pg_prewarm
// cannot (the column outside the key is what makes the planner take the
// covering index rather than a smaller one without it).
var proofIndexes = []warmScan{
	{"runs_proof", `SELECT count(leaf) FROM {S}.runs WHERE tenant = $1 AND log_index IS NOT NULL`, true},
	{"log_leaves", `SELECT count(hash) FROM {S}.log_nodes WHERE tenant = $1 AND level = 0`, true},
}

// warmScan is a statement of the warm without pg_prewarm: name is what it
// reads, and indexOnly says to turn off the plans that would not read that
// index.
type warmScan struct {
	name, scan string
	indexOnly  bool
}

// fillScan reads the log's nodes above the leaves, which the node cache's
// fill then reads level by level (a page of the table holds nodes of every
// level): one sequential scan of the table, through the kernel's page
// cache (a scan of a large table takes a small ring of shared_buffers), in
// place of a fill whose first levels read one page from the disk per node.
var fillScan = warmScan{"log_nodes", `SELECT count(*) FROM {S}.log_nodes WHERE tenant = $1 AND level > 0`, false}

// startWarm starts the warm in the background under s.fills, which Close
// cancels before it waits for the warm to end.
func (s *Store) startWarm(opts Options) {
	s.warm.done = make(chan struct{})
	s.warm.fill = cmp.Or(opts.NodeCacheBytes, DefaultNodeCacheBytes) >= 8<<10
	if opts.NoWarm {
		close(s.warm.done)
		return
	}
	s.warm.reading.Store(true)
	go func() {
		defer s.warm.reading.Store(false)
		defer close(s.warm.done)
		t0 := time.Now()
		s.warm.rep = s.runWarm(s.fills)
		s.warm.rep.Took = time.Since(t0)
		r := s.warm.rep
		switch {
		case r.Err != nil && !errors.Is(r.Err, context.Canceled) && !errors.Is(r.Err, store.ErrClosed): // Close stopped it
			s.log.Warn("postgres journal: warming the proofs' pages stopped short; proofs read the rest as they need it",
				"tenant", s.tenant, "err", r.Err)
		case r.Method != "":
			s.log.Info("postgres journal: proofs' pages warmed", "tenant", s.tenant, "method", r.Method,
				"pages", r.Pages, "buffered", r.Buffered, "took", r.Took, "fallback", errText(r.Fallback))
		}
	}()
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// WaitWarm waits for the warm the Store started when it opened to end, and
// returns what it did (a WarmReport with no Method when it was off). Proofs
// need not wait for it; a caller that wants its first proofs as fast as the
// later ones (a benchmark, a server that answers only when warm) does.
func (s *Store) WaitWarm(ctx context.Context) (WarmReport, error) {
	select {
	case <-s.warm.done:
		return s.warm.rep, nil
	case <-ctx.Done():
		return WarmReport{}, ctx.Err()
	}
}

// runWarm reads the proof indexes and fills the node cache; see above.
func (s *Store) runWarm(ctx context.Context) (rep WarmReport) {
	size, err := s.committedSize(ctx)
	if err != nil {
		rep.Err = &WarmError{Step: "log size", Err: err}
		return rep
	}
	if size == 0 {
		return rep // nothing to prove yet; the first proof fills the cache
	}
	t0 := time.Now()
	rep.Pages, rep.Buffered, rep.Fallback = s.prewarm(ctx)
	if rep.Fallback == nil {
		rep.Method = "pg_prewarm"
	} else {
		if ctx.Err() != nil {
			rep.Err = &WarmError{Step: "pg_prewarm", Err: ctx.Err()}
			return rep
		}
		rep.Method = "index scans"
		rep.Pages, rep.Buffered = 0, 0
		scans := proofIndexes
		if s.warm.fill {
			scans = append(scans[:len(scans):len(scans)], fillScan)
		}
		for _, ix := range scans {
			if err := s.scan(ctx, ix); err != nil {
				rep.Err = &WarmError{Step: "index scan of " + ix.name, Err: err}
				return rep
			}
		}
		rep.Pages, rep.Buffered = -1, -1 // the scans do not say
	}
	rep.Indexes = time.Since(t0)
	s.warm.reading.Store(false)
	if !s.warm.fill {
		return rep
	}
	if err := s.WarmNodeCache(ctx); err != nil {
		rep.Err = &WarmError{Step: "node cache", Err: err}
		return rep
	}
	rep.NodeCache = true
	return rep
}

// errNoPrewarm is the fallback's reason when the extension is not installed
// in the database.
var errNoPrewarm = errors.New("extension pg_prewarm is not installed in this database (CREATE EXTENSION pg_prewarm)")

// prewarm reads the proof indexes whole with pg_prewarm: into
// shared_buffers while the indexes so far fit in half of them, into the
// kernel's page cache beyond, and the visibility maps of both tables into
// shared_buffers (an index-only scan reads one page of the map per heap
// page it would otherwise visit). Any error is the reason to fall back.
func (s *Store) prewarm(ctx context.Context) (pages, buffered int64, err error) {
	var ext string
	err = s.pool.QueryRow(ctx, `SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_prewarm'`).Scan(&ext)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, errNoPrewarm
	}
	if err != nil {
		return 0, 0, err
	}
	fn := pgx.Identifier{ext, "pg_prewarm"}.Sanitize()
	var budget int64
	if err := s.pool.QueryRow(ctx, `SELECT pg_size_bytes(current_setting('shared_buffers')) / 2`).Scan(&budget); err != nil {
		return 0, 0, err
	}
	for _, ix := range proofIndexes {
		rel := pgx.Identifier{s.schema, ix.name}.Sanitize()
		var size int64
		if err := s.pool.QueryRow(ctx, `SELECT pg_relation_size($1::regclass)`, rel).Scan(&size); err != nil {
			return pages, buffered, err
		}
		mode := "read"
		if size <= budget {
			mode, budget = "buffer", budget-size
		}
		var n int64
		if err := s.pool.QueryRow(ctx, `SELECT `+fn+`($1::regclass, $2)`, rel, mode).Scan(&n); err != nil {
			return pages, buffered, fmt.Errorf("%s of %s: %w", fn, ix.name, err)
		}
		pages += n
		if mode == "buffer" {
			buffered += n
		}
	}
	for _, t := range []string{"runs", "log_nodes"} {
		rel := pgx.Identifier{s.schema, t}.Sanitize()
		var n int64
		if err := s.pool.QueryRow(ctx, `SELECT `+fn+`($1::regclass, 'buffer', 'vm')`, rel).Scan(&n); err != nil {
			return pages, buffered, fmt.Errorf("%s of %s's visibility map: %w", fn, t, err)
		}
	}
	// What the node cache's fill reads next (see fillScan), into the
	// kernel's page cache only: the fill reads it once.
	for _, t := range []string{"log_nodes", "log_nodes_pkey"} {
		if !s.warm.fill {
			break
		}
		rel := pgx.Identifier{s.schema, t}.Sanitize()
		var n int64
		if err := s.pool.QueryRow(ctx, `SELECT `+fn+`($1::regclass, 'read')`, rel).Scan(&n); err != nil {
			return pages, buffered, fmt.Errorf("%s of %s: %w", fn, t, err)
		}
		pages += n
	}
	return pages, buffered, nil
}

// scan runs one of the warm's scans, with the plans that would not read
// its index turned off for its transaction if it reads one.
func (s *Store) scan(ctx context.Context, w warmScan) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if w.indexOnly {
			if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off`); err != nil {
				return err
			}
		}
		var n int64
		q := strings.ReplaceAll(w.scan, "{S}", pgx.Identifier{s.schema}.Sanitize())
		return tx.QueryRow(ctx, q, s.tenant).Scan(&n)
	})
}
