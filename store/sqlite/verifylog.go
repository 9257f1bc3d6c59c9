package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/runseal/runseal/store"
)

// Store is a whole backend: the journal and the stores beside it.
var _ store.Backend = (*Store)(nil)

// VerifyLog implements store.LogVerifier in one read snapshot.
func (s *Store) VerifyLog(ctx context.Context) (store.LogReport, error) {
	var rep store.LogReport
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		var err error
		rep, err = s.verifyLogTx(ctx, tx)
		return err
	})
	return rep, err
}

// verifyLogTx is VerifyLog in the caller's read transaction.
func (s *Store) verifyLogTx(ctx context.Context, tx *sql.Tx) (store.LogReport, error) {
	return store.AuditLog(ctx, logSource{nodes: s.reader(tx), s: s, tx: tx}, s.Origin())
}

// logSource is store.LogSource over one read transaction.
type logSource struct {
	nodes
	s  *Store
	tx *sql.Tx
}

func (l logSource) LogSize(ctx context.Context) (uint64, error) { return l.s.logSize(ctx, l.tx) }

// each runs query and calls fn with each row's scanner, closing the rows
// before it returns.
func (l logSource) each(ctx context.Context, query string, args []any, fn func(*sql.Rows) error) error {
	rows, err := l.tx.QueryContext(ctx, query, args...)
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
		FROM runs r LEFT JOIN log_nodes n ON n.tenant = r.tenant AND n.level = 0 AND n.idx = r.log_index
		WHERE r.tenant = ? AND r.log_index IS NOT NULL ORDER BY r.log_index`, []any{l.tenant}, func(rows *sql.Rows) error {
		var r store.LeafRow
		if err := rows.Scan(&r.Index, &r.Run, &r.Sealed, &r.Leaf, &r.Head, &r.Node); err != nil {
			return fmt.Errorf("verify log: %w", err)
		}
		return fn(r)
	})
}

func (l logSource) Unlogged(ctx context.Context, fn func(string) error) error {
	return l.each(ctx, `SELECT run FROM runs WHERE tenant = ? AND sealed_outcome IS NOT NULL AND log_index IS NULL ORDER BY run`,
		[]any{l.tenant}, func(rows *sql.Rows) error {
			var run string
			if err := rows.Scan(&run); err != nil {
				return fmt.Errorf("verify log: %w", err)
			}
			return fn(run)
		})
}

// Unlisted also refuses a record key stored twice. A second key that
// points at no record escapes every chain check as an unlisted run's
// records do (readers join a key only to the records it agrees with), and
// it stops every later merge of the hot keys, so every append: "verified"
// must not be said of such a file (TestMerge_DuplicateKeyIsCorrupt).
func (l logSource) Unlisted(ctx context.Context, fn func(string) error) error {
	var run string
	var seq int64
	switch err := l.tx.QueryRowContext(ctx, qTenantDuplicateKey, l.tenant).Scan(new(string), &run, &seq); {
	case err == nil:
		return duplicateKeyError(l.tenant, run, seq, "the next merge of the hot keys, and so every append after it, will be refused")
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("verify log: %w", err)
	}
	return l.each(ctx, `SELECT run FROM (SELECT DISTINCT run FROM record_keys WHERE tenant = ? UNION SELECT DISTINCT run FROM record_keys_hot WHERE tenant = ?) k
		WHERE NOT EXISTS (SELECT 1 FROM runs u WHERE u.tenant = ? AND u.run = k.run) ORDER BY run`,
		[]any{l.tenant, l.tenant, l.tenant}, func(rows *sql.Rows) error {
			var run string
			if err := rows.Scan(&run); err != nil {
				return fmt.Errorf("verify log: %w", err)
			}
			return fn(run)
		})
}

func (l logSource) LevelCounts(ctx context.Context, fn func(level, count int64) error) error {
	return l.each(ctx, `SELECT level, count(*) FROM log_nodes WHERE tenant = ? GROUP BY level ORDER BY level`,
		[]any{l.tenant}, func(rows *sql.Rows) error {
			var level, n int64
			if err := rows.Scan(&level, &n); err != nil {
				return fmt.Errorf("verify log: %w", err)
			}
			return fn(level, n)
		})
}

func (l logSource) Level(ctx context.Context, level int, fn func(store.NodeRow) error) error {
	return l.each(ctx, `SELECT p.idx, p.hash, a.hash, b.hash FROM log_nodes p
		LEFT JOIN log_nodes a ON a.tenant = p.tenant AND a.level = p.level - 1 AND a.idx = 2 * p.idx
		LEFT JOIN log_nodes b ON b.tenant = p.tenant AND b.level = p.level - 1 AND b.idx = 2 * p.idx + 1
		WHERE p.tenant = ? AND p.level = ? ORDER BY p.idx`, []any{l.tenant, level}, func(rows *sql.Rows) error {
		var n store.NodeRow
		if err := rows.Scan(&n.Index, &n.Hash, &n.Left, &n.Right); err != nil {
			return fmt.Errorf("verify log: %w", err)
		}
		return fn(n)
	})
}

func (l logSource) SignedCheckpoints(ctx context.Context, after int64, limit int) ([]store.SignedRow, error) {
	var out []store.SignedRow
	err := l.each(ctx, `SELECT size, root, note FROM signed_checkpoints WHERE tenant = ? AND size > ? ORDER BY size LIMIT ?`,
		[]any{l.tenant, after, limit}, func(rows *sql.Rows) error {
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
	err := l.each(ctx, `SELECT w.size, c.root, w.note FROM witnessed w
		LEFT JOIN signed_checkpoints c ON c.tenant = w.tenant AND c.size = w.size
		WHERE w.tenant = ? AND w.size > ? ORDER BY w.size LIMIT ?`,
		[]any{l.tenant, after, limit}, func(rows *sql.Rows) error {
			var r store.SignedRow
			if err := rows.Scan(&r.Size, &r.Root, &r.Note); err != nil {
				return fmt.Errorf("verify log: %w", err)
			}
			out = append(out, r)
			return nil
		})
	return out, err
}
