package postgres

import (
	"context"
	"fmt"
	"time"
)

// ServerBuffers returns what the server's buffer manager has counted, since
// its statistics were last reset, on the tables a proof reads (runs and
// log_nodes with their indexes), over every tenant and session: hits found
// in shared_buffers, and reads that were not and came from the kernel (its
// page cache or the disk). The server publishes a session's counts only
// now and then (at most once a second, or once the session has idled a
// while), so it first makes every idle connection of the pool publish its
// own (pg_stat_force_next_flush, PostgreSQL 15 and later; an older server
// is an error, rather than counts that lag). A benchmark takes the difference across a
// pass of proofs it alone runs: the pages one proof touches, and how many
// of them the server had to read.
func (s *Store) ServerBuffers(ctx context.Context) (hits, reads uint64, err error) {
	if err := s.check(ctx); err != nil {
		return 0, 0, err
	}
	var version int
	if err := s.pool.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		return 0, 0, fmt.Errorf("buffer counts: %w", err)
	}
	if version < 150000 {
		return 0, 0, fmt.Errorf("buffer counts: server version %d cannot be made to publish a session's counts at once; PostgreSQL 15 or later can", version)
	}
	var ferr error
	for _, c := range s.pool.AcquireAllIdle(ctx) {
		if ferr == nil {
			_, ferr = c.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
		}
		c.Release()
	}
	if ferr != nil {
		return 0, 0, fmt.Errorf("buffer counts: %w", ferr)
	}
	// Read in a transaction of its own, after the flushes: a session's
	// statistics snapshot lasts its transaction.
	var h, r int64
	err = s.pool.QueryRow(ctx, `SELECT
		coalesce(sum(coalesce(heap_blks_hit, 0) + coalesce(idx_blks_hit, 0)), 0)::bigint,
		coalesce(sum(coalesce(heap_blks_read, 0) + coalesce(idx_blks_read, 0)), 0)::bigint
		FROM pg_statio_all_tables WHERE schemaname = $1 AND relname IN ('runs', 'log_nodes')`, s.schema).Scan(&h, &r)
	if err != nil {
		return 0, 0, fmt.Errorf("buffer counts: %w", err)
	}
	if h < 0 || r < 0 {
		return 0, 0, fmt.Errorf("buffer counts: negative (%d, %d)", h, r)
	}
	return uint64(h), uint64(r), nil
}

// ServerReadTime returns the time the server has spent reading data pages
// from outside shared_buffers (the kernel's page cache or the disk) in
// this database, over every session, since its statistics were last
// reset: pg_stat_database.blk_read_time, which the server counts only
// with track_io_timing on (ok false when it is off). Taken across a pass
// of proofs beside ServerBuffers (which makes the sessions publish their
// counts first), it says what a page from outside the buffers cost: some
// microseconds from the kernel's cache, a disk read's worth from the disk.
func (s *Store) ServerReadTime(ctx context.Context) (total time.Duration, ok bool, err error) {
	if err := s.check(ctx); err != nil {
		return 0, false, err
	}
	var on string
	var ms float64
	err = s.pool.QueryRow(ctx, `SELECT current_setting('track_io_timing'),
		coalesce((SELECT blk_read_time FROM pg_stat_database WHERE datname = current_database()), 0)`).Scan(&on, &ms)
	if err != nil {
		return 0, false, fmt.Errorf("read time: %w", err)
	}
	if on != "on" {
		return 0, false, nil
	}
	if ms < 0 {
		return 0, false, fmt.Errorf("read time: negative (%f ms)", ms)
	}
	return time.Duration(ms * float64(time.Millisecond)), true, nil
}
