package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/runseal/runseal/store"
)

// Store is a whole backend: the journal and the stores beside it.
var _ store.Backend = (*Store)(nil)

// VerifyLog implements store.LogVerifier in one REPEATABLE READ snapshot.
func (s *Store) VerifyLog(ctx context.Context) (store.LogReport, error) {
	var rep store.LogReport
	err := s.logSnapshot(ctx, func(tx pgx.Tx, r nodes, _ uint64) error {
		var err error
		rep, err = store.AuditLog(ctx, logSource{nodes: r, s: s, tx: tx}, s.Origin())
		return err
	})
	return rep, s.readErr("verify log", err)
}

// logSource is store.LogSource over one read-only transaction. pgx runs one
// query at a time on a connection, so every stream is read to its end (or
// closed) before the next query.
type logSource struct {
	nodes
	s  *Store
	tx pgx.Tx
}

func (l logSource) sql(q string) string {
	return strings.ReplaceAll(q, "{S}", pgx.Identifier{l.s.schema}.Sanitize())
}

func (l logSource) LogSize(ctx context.Context) (uint64, error) {
	var n int64
	if err := l.tx.QueryRow(ctx, l.s.q.logSize, l.tenant).Scan(&n); err != nil {
		return 0, fmt.Errorf("read log size: %w", err)
	}
	if n < 0 {
		return 0, &store.CorruptError{Detail: "negative log size"}
	}
	return uint64(n), nil
}

func (l logSource) each(ctx context.Context, query string, args []any, fn func(pgx.Rows) error) error {
	rows, err := l.tx.Query(ctx, l.sql(query), args...)
	if err != nil {
		return fmt.Errorf("verify log: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("verify log: %w", err)
	}
	return nil
}

func (l logSource) Leaves(ctx context.Context, fn func(store.LeafRow) error) error {
	return l.each(ctx, `SELECT r.log_index, r.run, r.sealed_outcome IS NOT NULL, r.leaf, r.head_hash, n.hash
		FROM {S}.runs r LEFT JOIN {S}.log_nodes n ON n.tenant = r.tenant AND n.level = 0 AND n.idx = r.log_index
		WHERE r.tenant = $1 AND r.log_index IS NOT NULL ORDER BY r.log_index`, []any{l.tenant}, func(rows pgx.Rows) error {
		var r store.LeafRow
		if err := rows.Scan(&r.Index, &r.Run, &r.Sealed, &r.Leaf, &r.Head, &r.Node); err != nil {
			return fmt.Errorf("verify log: %w", err)
		}
		return fn(r)
	})
}

func (l logSource) Unlisted(ctx context.Context, fn func(string) error) error {
	return l.each(ctx, `SELECT DISTINCT r.run FROM {S}.records r WHERE r.tenant = $1
		AND NOT EXISTS (SELECT 1 FROM {S}.runs u WHERE u.tenant = r.tenant AND u.run = r.run) ORDER BY r.run`,
		[]any{l.tenant}, func(rows pgx.Rows) error {
			var run string
			if err := rows.Scan(&run); err != nil {
				return fmt.Errorf("verify log: %w", err)
			}
			return fn(run)
		})
}

func (l logSource) Unlogged(ctx context.Context, fn func(string) error) error {
	return l.each(ctx, `SELECT run FROM {S}.runs WHERE tenant = $1 AND sealed_outcome IS NOT NULL AND log_index IS NULL ORDER BY run`,
		[]any{l.tenant}, func(rows pgx.Rows) error {
			var run string
			if err := rows.Scan(&run); err != nil {
				return fmt.Errorf("verify log: %w", err)
			}
			return fn(run)
		})
}

func (l logSource) LevelCounts(ctx context.Context, fn func(level, count int64) error) error {
	return l.each(ctx, `SELECT level::bigint, count(*) FROM {S}.log_nodes WHERE tenant = $1 GROUP BY level ORDER BY level`,
		[]any{l.tenant}, func(rows pgx.Rows) error {
			var level, n int64
			if err := rows.Scan(&level, &n); err != nil {
				return fmt.Errorf("verify log: %w", err)
			}
			return fn(level, n)
		})
}

func (l logSource) Level(ctx context.Context, level int, fn func(store.NodeRow) error) error {
	return l.each(ctx, `SELECT p.idx, p.hash, a.hash, b.hash FROM {S}.log_nodes p
		LEFT JOIN {S}.log_nodes a ON a.tenant = p.tenant AND a.level = p.level - 1 AND a.idx = 2 * p.idx
		LEFT JOIN {S}.log_nodes b ON b.tenant = p.tenant AND b.level = p.level - 1 AND b.idx = 2 * p.idx + 1
		WHERE p.tenant = $1 AND p.level = $2 ORDER BY p.idx`, []any{l.tenant, int32(level)}, func(rows pgx.Rows) error {
		var n store.NodeRow
		if err := rows.Scan(&n.Index, &n.Hash, &n.Left, &n.Right); err != nil {
			return fmt.Errorf("verify log: %w", err)
		}
		return fn(n)
	})
}

func (l logSource) SignedCheckpoints(ctx context.Context, after int64, limit int) ([]store.SignedRow, error) {
	var out []store.SignedRow
	err := l.each(ctx, `SELECT size, root, note FROM {S}.signed_checkpoints WHERE tenant = $1 AND size > $2 ORDER BY size LIMIT $3`,
		[]any{l.tenant, after, int64(limit)}, func(rows pgx.Rows) error {
			var r store.SignedRow
			if err := rows.Scan(&r.Size, &r.Root, &r.Note); err != nil {
				return fmt.Errorf("verify log: %w", err)
			}
			out = append(out, r)
			return nil
		})
	return out, err
}

func (l logSource) Witnessed(ctx context.Context, after int64, limit int) ([]store.SignedRow, error) {
	var out []store.SignedRow
	err := l.each(ctx, `SELECT w.size, c.root, w.note FROM {S}.witnessed w
		LEFT JOIN {S}.signed_checkpoints c ON c.tenant = w.tenant AND c.size = w.size
		WHERE w.tenant = $1 AND w.size > $2 ORDER BY w.size LIMIT $3`,
		[]any{l.tenant, after, int64(limit)}, func(rows pgx.Rows) error {
			var r store.SignedRow
			if err := rows.Scan(&r.Size, &r.Root, &r.Note); err != nil {
				return fmt.Errorf("verify log: %w", err)
			}
			out = append(out, r)
			return nil
		})
	return out, err
}
