package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

var _ store.CheckpointStore = (*Store)(nil)

// SaveCheckpoint implements store.CheckpointStore. Completed subtree nodes
// never change, so the root at sc.Size read in any snapshot that holds the
// log at that size is the root; the primary key keeps the first note.
func (s *Store) SaveCheckpoint(ctx context.Context, sc store.SignedCheckpoint) (store.SignedCheckpoint, error) {
	if len(sc.Note) == 0 {
		return store.SignedCheckpoint{}, &store.InvalidArgumentError{Field: "note", Detail: "is empty"}
	}
	if err := s.check(ctx); err != nil {
		return store.SignedCheckpoint{}, err
	}
	if sc.SignedAt.IsZero() {
		sc.SignedAt = time.Now().UTC()
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return store.SignedCheckpoint{}, fmt.Errorf("save checkpoint: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var size int64
	if err := tx.QueryRow(ctx, s.q.logSize, s.tenant).Scan(&size); err != nil {
		return store.SignedCheckpoint{}, fmt.Errorf("read log size: %w", err)
	}
	if sc.Size > uint64(size) {
		return store.SignedCheckpoint{}, store.BeyondLog("size", sc.Size, uint64(size))
	}
	root, err := log.Root(ctx, nodes{q: tx, tenant: s.tenant, sql: &s.q}, sc.Size)
	if err != nil {
		return store.SignedCheckpoint{}, fmt.Errorf("log root at %d: %w", sc.Size, err)
	}
	if store.Digest(root) != sc.Root {
		return store.SignedCheckpoint{}, &store.InvalidArgumentError{Field: "root", Detail: fmt.Sprintf("is not the log's root at size %d", sc.Size)}
	}
	tag, err := tx.Exec(ctx, `INSERT INTO `+pgx.Identifier{s.schema}.Sanitize()+`.signed_checkpoints(tenant, size, root, note, signed_at) VALUES($1,$2,$3,$4,$5) ON CONFLICT DO NOTHING`,
		s.tenant, int64(sc.Size), sc.Root[:], sc.Note, sc.SignedAt)
	if err != nil {
		return store.SignedCheckpoint{}, fmt.Errorf("save checkpoint %d: %w", sc.Size, err)
	}
	out := sc
	if tag.RowsAffected() == 0 {
		have, err := s.signedAt(ctx, tx, sc.Size)
		if err != nil {
			return store.SignedCheckpoint{}, err
		}
		if have == nil {
			return store.SignedCheckpoint{}, fmt.Errorf("save checkpoint %d: conflicting row vanished", sc.Size)
		}
		out = *have
	}
	if err := tx.Commit(ctx); err != nil {
		// A server answer or a COMMIT that never left means nothing was
		// kept; only a lost acknowledgement leaves it in doubt.
		var pe *pgconn.PgError
		if errors.As(err, &pe) || errors.Is(err, pgx.ErrTxCommitRollback) || pgconn.SafeToRetry(err) {
			return store.SignedCheckpoint{}, notWritten(fmt.Errorf("save checkpoint %d: %w", sc.Size, err))
		}
		return store.SignedCheckpoint{}, &store.CommitUnknownError{Detail: "save checkpoint: " + err.Error(), Err: err}
	}
	return out, nil
}

type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func scanSigned(row pgx.Row) (*store.SignedCheckpoint, error) {
	var sc store.SignedCheckpoint
	var size int64
	var root []byte
	err := row.Scan(&size, &root, &sc.Note, &sc.SignedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read signed checkpoint: %w", err)
	}
	if len(root) != 32 || size < 0 {
		return nil, &store.CorruptError{Detail: "malformed signed checkpoint row"}
	}
	sc.Size, sc.Root, sc.SignedAt = uint64(size), store.Digest(root), sc.SignedAt.UTC()
	return &sc, nil
}

func (s *Store) signedAt(ctx context.Context, q rowQuerier, size uint64) (*store.SignedCheckpoint, error) {
	return scanSigned(q.QueryRow(ctx, `SELECT size, root, note, signed_at FROM `+pgx.Identifier{s.schema}.Sanitize()+`.signed_checkpoints WHERE tenant=$1 AND size=$2`, s.tenant, int64(size)))
}

// LatestCheckpoint implements store.CheckpointStore.
func (s *Store) LatestCheckpoint(ctx context.Context) (*store.SignedCheckpoint, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	return scanSigned(s.pool.QueryRow(ctx, `SELECT size, root, note, signed_at FROM `+pgx.Identifier{s.schema}.Sanitize()+`.signed_checkpoints WHERE tenant=$1 ORDER BY size DESC LIMIT 1`, s.tenant))
}

// SignedCheckpointAt implements store.CheckpointStore.
func (s *Store) SignedCheckpointAt(ctx context.Context, size uint64) (*store.SignedCheckpoint, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	return s.signedAt(ctx, s.pool, size)
}

// CheckpointAt implements store.CheckpointStore.
func (s *Store) CheckpointAt(ctx context.Context, size uint64) (store.Checkpoint, error) {
	var cp store.Checkpoint
	err := s.logSnapshot(ctx, func(_ pgx.Tx, r nodes, n uint64) error {
		if size > n {
			return store.BeyondLog("size", size, n)
		}
		root, err := log.Root(ctx, r, size)
		if err != nil {
			return fmt.Errorf("log root at %d: %w", size, err)
		}
		cp = store.Checkpoint{Origin: s.Origin(), Size: size, Root: store.Digest(root)}
		return nil
	})
	return cp, s.readErr("checkpoint", err)
}
