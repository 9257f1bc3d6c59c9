package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runseal/runseal/internal/benchjournal"
	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// CreateSealedLog fills the store's tenant, whose log must be empty, with
// the log of n sealed runs of benchjournal.NewSealedLog: each run's row
// with its leaf and log position, and every log node, written with COPY in
// one transaction, but no records. It is the shape proofs are served from,
// built in seconds instead of the hours n appends and seals would take,
// for benchmarks of proofs ("journal bench --proofs N --postgres DSN").
//
// A tenant that already holds that log (same size, and the root its stored
// compact range gives is the log's: a cheap check, not of every node) is
// kept as it is, so a benchmark can build a large log once and measure it
// many times; any other non-empty log is refused. The in-memory log is
// returned either way, for the caller to check proofs against.
func (s *Store) CreateSealedLog(ctx context.Context, n int) (*benchjournal.SealedLog, error) {
	if n < 1 {
		return nil, &store.InvalidArgumentError{Field: "n", Detail: fmt.Sprintf("%d: must be at least 1", n)}
	}
	l, err := benchjournal.NewSealedLog(ctx, n)
	if err != nil {
		return nil, err
	}
	size, err := s.committedSize(ctx)
	if err != nil {
		return nil, err
	}
	if size == uint64(n) {
		root, err := log.Root(ctx, nodes{q: s.pool, tenant: s.tenant, sql: &s.q}, size)
		if err != nil {
			return nil, fmt.Errorf("tenant %q holds %d leaves: %w", s.tenant, size, err)
		}
		if root == l.Root {
			return l, nil
		}
	}
	if size != 0 {
		return nil, &store.InvalidArgumentError{Field: "tenant", Detail: fmt.Sprintf("%q holds a log of %d leaves that is not the benchmark's log of %d; CreateSealedLog writes only an empty tenant", s.tenant, size, n)}
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	i := 0
	runs := pgx.CopyFromFunc(func() ([]any, error) {
		if i == n {
			return nil, nil
		}
		r, leaf := l.Runs[i], l.Leaves[i][:]
		i++
		return []any{s.tenant, r.String(), int64(2), leaf, int64(0), "succeeded", int64(0), "succeeded", time.Unix(0, 0), int64(i - 1), leaf}, nil
	})
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{s.schema, "runs"},
		[]string{"tenant", "run", "head_seq", "head_hash", "active_at", "outcome", "outcome_ord", "sealed_outcome", "sealed_at", "log_index", "leaf"}, runs); err != nil {
		return nil, fmt.Errorf("copy runs: %w", err)
	}
	k := 0
	nodeRows := pgx.CopyFromFunc(func() ([]any, error) {
		if k == len(l.Nodes) {
			return nil, nil
		}
		nd := &l.Nodes[k]
		k++
		return []any{s.tenant, int32(nd.ID.Level), int64(nd.ID.Index), nd.Hash[:]}, nil
	})
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{s.schema, "log_nodes"}, []string{"tenant", "level", "idx", "hash"}, nodeRows); err != nil {
		return nil, fmt.Errorf("copy log nodes: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+pgx.Identifier{s.schema, "logs"}.Sanitize()+`(tenant, size) VALUES($1, $2)`, s.tenant, int64(n)); err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	// Fresh statistics, so the proofs' statements are planned for the
	// tables as they now are, and the rows' hint bits set once, as
	// autovacuum has long done to the tables of a log this size: otherwise
	// the proofs measured would each dirty the pages they read, and evict
	// dirty pages, writing them, on a server whose buffers are smaller
	// than the tables.
	if _, err := s.pool.Exec(ctx, `VACUUM (FREEZE, ANALYZE) `+pgx.Identifier{s.schema, "runs"}.Sanitize()+`, `+pgx.Identifier{s.schema, "log_nodes"}.Sanitize()); err != nil {
		return nil, err
	}
	return l, nil
}
