package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// SaveCheckpoint implements store.CheckpointStore.
func (s *Store) SaveCheckpoint(ctx context.Context, sc store.SignedCheckpoint) (store.SignedCheckpoint, error) {
	if len(sc.Note) == 0 {
		return store.SignedCheckpoint{}, &store.InvalidArgumentError{Field: "note", Detail: "is empty"}
	}
	if sc.SignedAt.IsZero() {
		sc.SignedAt = s.now()
	}
	out := sc
	err := s.write(ctx, func(tx *sql.Tx) error {
		bg := context.Background()
		if have, err := s.signedAt(bg, tx, sc.Size); err != nil || have != nil {
			if have != nil {
				out = *have
			}
			return err
		}
		size, err := s.logSize(bg, tx)
		if err != nil {
			return err
		}
		if sc.Size > size {
			return store.BeyondLog("size", sc.Size, size)
		}
		root, err := log.Root(bg, s.reader(tx), sc.Size)
		if err != nil {
			return fmt.Errorf("log root at %d: %w", sc.Size, err)
		}
		if store.Digest(root) != sc.Root {
			return &store.InvalidArgumentError{Field: "root", Detail: fmt.Sprintf("is not the log's root at size %d", sc.Size)}
		}
		_, err = tx.ExecContext(bg, `INSERT INTO signed_checkpoints(tenant, size, root, note, signed_at) VALUES(?,?,?,?,?)`,
			s.tenant, int64(sc.Size), sc.Root[:], sc.Note, sc.SignedAt.UnixNano())
		if err != nil {
			return fmt.Errorf("save checkpoint %d: %w", sc.Size, err)
		}
		out = sc
		return nil
	})
	return out, err
}

func scanSigned(row *sql.Row) (*store.SignedCheckpoint, error) {
	var sc store.SignedCheckpoint
	var size, at int64
	var root []byte
	err := row.Scan(&size, &root, &sc.Note, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read signed checkpoint: %w", err)
	}
	if len(root) != 32 || size < 0 {
		return nil, &store.CorruptError{Detail: "malformed signed checkpoint row"}
	}
	sc.Size, sc.Root, sc.SignedAt = uint64(size), store.Digest(root), time.Unix(0, at).UTC()
	return &sc, nil
}

func (s *Store) signedAt(ctx context.Context, q querier, size uint64) (*store.SignedCheckpoint, error) {
	return scanSigned(q.QueryRowContext(ctx, `SELECT size, root, note, signed_at FROM signed_checkpoints WHERE tenant=? AND size=?`, s.tenant, int64(size)))
}

// LatestCheckpoint implements store.CheckpointStore.
func (s *Store) LatestCheckpoint(ctx context.Context) (*store.SignedCheckpoint, error) {
	return scanSigned(s.rdb.QueryRowContext(ctx, `SELECT size, root, note, signed_at FROM signed_checkpoints WHERE tenant=? ORDER BY size DESC LIMIT 1`, s.tenant))
}

// SignedCheckpointAt implements store.CheckpointStore.
func (s *Store) SignedCheckpointAt(ctx context.Context, size uint64) (*store.SignedCheckpoint, error) {
	return s.signedAt(ctx, s.rdb, size)
}

// CheckpointAt implements store.CheckpointStore.
func (s *Store) CheckpointAt(ctx context.Context, size uint64) (store.Checkpoint, error) {
	n, err := s.committedSize(ctx)
	if err != nil {
		return store.Checkpoint{}, err
	}
	if size > n {
		return store.Checkpoint{}, store.BeyondLog("size", size, n)
	}
	root, err := log.Root(ctx, s.proofNodes(n), size)
	if err != nil {
		return store.Checkpoint{}, fmt.Errorf("log root at %d: %w", size, err)
	}
	return store.Checkpoint{Origin: s.Origin(), Size: size, Root: store.Digest(root)}, nil
}
