package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runseal/runseal/store"
)

var (
	_ store.PublicationStore = (*Store)(nil)
	_ store.TokenStore       = (*Store)(nil)
)

func (s *Store) table(name string) string { return pgx.Identifier{s.schema}.Sanitize() + "." + name }

// inTx runs fn in a transaction and commits; a lost COMMIT acknowledgement
// is CommitUnknownError, as for every write of this store.
func (s *Store) inTx(ctx context.Context, what string, fn func(tx pgx.Tx) error) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return &store.CommitUnknownError{Detail: err.Error(), Err: err}
	}
	return nil
}

func (s *Store) needSigned(ctx context.Context, tx pgx.Tx, size uint64) error {
	have, err := s.signedAt(ctx, tx, size)
	if err != nil {
		return err
	}
	if have == nil {
		return &store.InvalidArgumentError{Field: "size", Detail: fmt.Sprintf("no signed checkpoint is kept for size %d", size)}
	}
	return nil
}

// EnqueuePublication implements store.PublicationStore.
func (s *Store) EnqueuePublication(ctx context.Context, size uint64, witnesses []string) error {
	for _, w := range witnesses {
		if w == "" {
			return &store.InvalidArgumentError{Field: "witness", Detail: "is empty"}
		}
	}
	return s.inTx(ctx, "enqueue publication", func(tx pgx.Tx) error {
		if err := s.needSigned(ctx, tx, size); err != nil {
			return err
		}
		for _, w := range witnesses {
			_, err := tx.Exec(ctx, `INSERT INTO `+s.table("publications")+`(tenant, witness, size, attempts, next_at, last_error)
				SELECT $1, $2, $3,
					COALESCE((SELECT attempts FROM `+s.table("publications")+` WHERE tenant=$1 AND witness=$2 ORDER BY size DESC LIMIT 1), 0),
					GREATEST(now(), (SELECT next_at FROM `+s.table("publications")+` WHERE tenant=$1 AND witness=$2 ORDER BY size DESC LIMIT 1)),
					COALESCE((SELECT last_error FROM `+s.table("publications")+` WHERE tenant=$1 AND witness=$2 ORDER BY size DESC LIMIT 1), '')
				WHERE NOT EXISTS (SELECT 1 FROM `+s.table("witness_state")+` WHERE tenant=$1 AND witness=$2 AND cosigned_size >= $3)
				ON CONFLICT DO NOTHING`, s.tenant, w, int64(size))
			if err != nil {
				return fmt.Errorf("enqueue publication %d for %s: %w", size, w, err)
			}
		}
		return nil
	})
}

// NextPublication implements store.PublicationStore.
func (s *Store) NextPublication(ctx context.Context, witness string) (*store.Publication, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	var p store.Publication
	var size int64
	err := s.pool.QueryRow(ctx, `SELECT size, attempts, next_at, last_error FROM `+s.table("publications")+`
		WHERE tenant=$1 AND witness=$2 ORDER BY size DESC LIMIT 1`, s.tenant, witness).Scan(&size, &p.Attempts, &p.NextAttempt, &p.LastError)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("next publication for %s: %w", witness, err)
	}
	p.Witness, p.Size, p.NextAttempt = witness, uint64(size), p.NextAttempt.UTC()
	return &p, nil
}

// DeferPublication implements store.PublicationStore.
func (s *Store) DeferPublication(ctx context.Context, witness string, size uint64, next time.Time, lastErr string) error {
	return s.inTx(ctx, "defer publication", func(tx pgx.Tx) error {
		// Newer sizes queued while the attempt ran share its failure.
		_, err := tx.Exec(ctx, `UPDATE `+s.table("publications")+` SET next_at = $4, last_error = $5,
				attempts = (SELECT attempts FROM `+s.table("publications")+` WHERE tenant=$1 AND witness=$2 AND size=$3) + 1
			WHERE tenant=$1 AND witness=$2 AND size>=$3
			AND EXISTS (SELECT 1 FROM `+s.table("publications")+` WHERE tenant=$1 AND witness=$2 AND size=$3)`, s.tenant, witness, int64(size), next, lastErr)
		if err != nil {
			return fmt.Errorf("defer publication %d for %s: %w", size, witness, err)
		}
		return nil
	})
}

// RecordCosignature implements store.PublicationStore.
func (s *Store) RecordCosignature(ctx context.Context, witness string, size uint64, lines []byte) error {
	if witness == "" || len(lines) == 0 {
		return &store.InvalidArgumentError{Field: "cosignature", Detail: "witness and lines are required"}
	}
	return s.inTx(ctx, "record cosignature", func(tx pgx.Tx) error {
		if err := s.needSigned(ctx, tx, size); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+s.table("cosignatures")+`(tenant, witness, size, lines, at) VALUES($1,$2,$3,$4,now())
			ON CONFLICT (tenant, size, witness) DO UPDATE SET lines=excluded.lines, at=excluded.at`,
			s.tenant, witness, int64(size), lines); err != nil {
			return fmt.Errorf("record cosignature %d by %s: %w", size, witness, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+s.table("witness_state")+`(tenant, witness, cosigned_size) VALUES($1,$2,$3)
			ON CONFLICT (tenant, witness) DO UPDATE SET cosigned_size = GREATEST(`+s.table("witness_state")+`.cosigned_size, excluded.cosigned_size)`,
			s.tenant, witness, int64(size)); err != nil {
			return fmt.Errorf("record cosigned size %d for %s: %w", size, witness, err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM `+s.table("publications")+` WHERE tenant=$1 AND witness=$2 AND size <= $3`,
			s.tenant, witness, int64(size)); err != nil {
			return fmt.Errorf("settle publications for %s: %w", witness, err)
		}
		return nil
	})
}

// LastCosigned implements store.PublicationStore.
func (s *Store) LastCosigned(ctx context.Context, witness string) (uint64, bool, error) {
	if err := s.check(ctx); err != nil {
		return 0, false, err
	}
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT cosigned_size FROM `+s.table("witness_state")+` WHERE tenant=$1 AND witness=$2`, s.tenant, witness).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("last cosigned size for %s: %w", witness, err)
	}
	return uint64(n), true, nil
}

// Cosignatures implements store.PublicationStore.
func (s *Store) Cosignatures(ctx context.Context, size uint64) (map[string][]byte, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT witness, lines FROM `+s.table("cosignatures")+` WHERE tenant=$1 AND size=$2 ORDER BY witness`, s.tenant, int64(size))
	if err != nil {
		return nil, fmt.Errorf("cosignatures at %d: %w", size, err)
	}
	defer rows.Close()
	out, err := store.CollectCosignatures(rows)
	if err != nil {
		return nil, fmt.Errorf("cosignatures at %d: %w", size, err)
	}
	return out, nil
}

// MarkWitnessed implements store.PublicationStore.
func (s *Store) MarkWitnessed(ctx context.Context, size uint64, note []byte) error {
	if len(note) == 0 {
		return &store.InvalidArgumentError{Field: "note", Detail: "is empty"}
	}
	return s.inTx(ctx, "mark witnessed", func(tx pgx.Tx) error {
		if err := s.needSigned(ctx, tx, size); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+s.table("witnessed")+`(tenant, size, note, at) VALUES($1,$2,$3,now()) ON CONFLICT DO NOTHING`,
			s.tenant, int64(size), note); err != nil {
			return fmt.Errorf("mark %d witnessed: %w", size, err)
		}
		return nil
	})
}

// LatestWitnessed implements store.PublicationStore.
func (s *Store) LatestWitnessed(ctx context.Context) (*store.SignedCheckpoint, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	return scanSigned(s.pool.QueryRow(ctx, `SELECT w.size, c.root, w.note, w.at FROM `+s.table("witnessed")+` w
		JOIN `+s.table("signed_checkpoints")+` c ON c.tenant = w.tenant AND c.size = w.size
		WHERE w.tenant=$1 ORDER BY w.size DESC LIMIT 1`, s.tenant))
}

// CreateToken implements store.TokenStore.
func (s *Store) CreateToken(ctx context.Context, t store.Token) error {
	if t.ID == "" || t.Tenant == "" || (t.Role != store.RoleReader && t.Role != store.RoleWriter) {
		return &store.InvalidArgumentError{Field: "token", Detail: "needs an id, a tenant and the role reader or writer"}
	}
	if t.Created.IsZero() {
		t.Created = time.Now().UTC()
	}
	return s.inTx(ctx, "create token", func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO `+s.table("tokens")+`(id, tenant, role, name, hash, created) VALUES($1,$2,$3,$4,$5,$6) ON CONFLICT DO NOTHING`,
			t.ID, t.Tenant, t.Role, t.Name, t.Hash[:], t.Created)
		if err != nil {
			return fmt.Errorf("create token: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return &store.InvalidArgumentError{Field: "id", Detail: fmt.Sprintf("token %q exists", t.ID)}
		}
		return nil
	})
}

const tokenCols = `id, tenant, role, name, hash, created, revoked`

func scanToken(row pgx.Row) (store.Token, error) {
	var t store.Token
	var hash []byte
	var revoked *time.Time
	if err := row.Scan(&t.ID, &t.Tenant, &t.Role, &t.Name, &hash, &t.Created, &revoked); err != nil {
		return t, err
	}
	if len(hash) != 32 {
		return t, &store.CorruptError{Detail: "malformed token hash"}
	}
	t.Hash, t.Created = store.Digest(hash), t.Created.UTC()
	if revoked != nil {
		r := revoked.UTC()
		t.Revoked = &r
	}
	return t, nil
}

// Tokens implements store.TokenStore.
func (s *Store) Tokens(ctx context.Context) ([]store.Token, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+tokenCols+` FROM `+s.table("tokens")+` ORDER BY created, id`)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	var out []store.Token
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// RevokeToken implements store.TokenStore.
func (s *Store) RevokeToken(ctx context.Context, id string) (bool, error) {
	var ok bool
	err := s.inTx(ctx, "revoke token", func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE `+s.table("tokens")+` SET revoked=now() WHERE id=$1 AND revoked IS NULL`, id)
		if err != nil {
			return fmt.Errorf("revoke token: %w", err)
		}
		ok = tag.RowsAffected() == 1
		return nil
	})
	return ok, err
}

// TokenByID implements store.TokenStore.
func (s *Store) TokenByID(ctx context.Context, id string) (*store.Token, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	t, err := scanToken(s.pool.QueryRow(ctx, `SELECT `+tokenCols+` FROM `+s.table("tokens")+` WHERE id=$1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("token %q: %w", id, err)
	}
	return &t, nil
}
