package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/runseal/runseal/store"
)

// EnqueuePublication implements store.PublicationStore.
func (s *Store) EnqueuePublication(ctx context.Context, size uint64, witnesses []string) error {
	for _, w := range witnesses {
		if w == "" {
			return &store.InvalidArgumentError{Field: "witness", Detail: "is empty"}
		}
	}
	now := s.now().UnixNano()
	return s.write(ctx, func(tx *sql.Tx) error {
		bg := context.Background()
		have, err := s.signedAt(bg, tx, size)
		if err != nil {
			return err
		}
		if have == nil {
			return &store.InvalidArgumentError{Field: "size", Detail: fmt.Sprintf("no signed checkpoint is kept for size %d", size)}
		}
		for _, w := range witnesses {
			// A witness that already cosigned this size or a larger one
			// needs nothing: queuing would only make it answer 409. A
			// newer size takes over the backoff of the witness's pending
			// one (store.PublicationStore).
			_, err := tx.ExecContext(bg, `INSERT INTO publications(tenant, witness, size, attempts, next_at, last_error)
				SELECT ?1, ?2, ?3,
					COALESCE((SELECT attempts FROM publications WHERE tenant=?1 AND witness=?2 ORDER BY size DESC LIMIT 1), 0),
					MAX(?4, COALESCE((SELECT next_at FROM publications WHERE tenant=?1 AND witness=?2 ORDER BY size DESC LIMIT 1), 0)),
					COALESCE((SELECT last_error FROM publications WHERE tenant=?1 AND witness=?2 ORDER BY size DESC LIMIT 1), '')
				WHERE NOT EXISTS (SELECT 1 FROM witness_state WHERE tenant=?1 AND witness=?2 AND cosigned_size >= ?3)
				ON CONFLICT DO NOTHING`,
				s.tenant, w, int64(size), now)
			if err != nil {
				return fmt.Errorf("enqueue publication %d for %s: %w", size, w, err)
			}
		}
		return nil
	})
}

// NextPublication implements store.PublicationStore.
func (s *Store) NextPublication(ctx context.Context, witness string) (*store.Publication, error) {
	var p store.Publication
	var size, next int64
	err := s.rdb.QueryRowContext(ctx, `SELECT size, attempts, next_at, last_error FROM publications
		WHERE tenant=? AND witness=? ORDER BY size DESC LIMIT 1`, s.tenant, witness).Scan(&size, &p.Attempts, &next, &p.LastError)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("next publication for %s: %w", witness, err)
	}
	if size < 0 {
		return nil, &store.CorruptError{Detail: "negative publication size"}
	}
	p.Witness, p.Size, p.NextAttempt = witness, uint64(size), time.Unix(0, next).UTC()
	return &p, nil
}

// DeferPublication implements store.PublicationStore.
func (s *Store) DeferPublication(ctx context.Context, witness string, size uint64, next time.Time, lastErr string) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		// Newer sizes queued while the attempt ran share its failure.
		_, err := tx.ExecContext(context.Background(), `UPDATE publications SET next_at = ?4, last_error = ?5,
				attempts = (SELECT attempts FROM publications WHERE tenant=?1 AND witness=?2 AND size=?3) + 1
			WHERE tenant=?1 AND witness=?2 AND size>=?3
			AND EXISTS (SELECT 1 FROM publications WHERE tenant=?1 AND witness=?2 AND size=?3)`, s.tenant, witness, int64(size), next.UnixNano(), lastErr)
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
	now := s.now().UnixNano()
	return s.write(ctx, func(tx *sql.Tx) error {
		bg := context.Background()
		have, err := s.signedAt(bg, tx, size)
		if err != nil {
			return err
		}
		if have == nil {
			return &store.InvalidArgumentError{Field: "size", Detail: fmt.Sprintf("no signed checkpoint is kept for size %d", size)}
		}
		if _, err := tx.ExecContext(bg, `INSERT INTO cosignatures(tenant, witness, size, lines, at) VALUES(?,?,?,?,?)
			ON CONFLICT(tenant, size, witness) DO UPDATE SET lines=excluded.lines, at=excluded.at`,
			s.tenant, witness, int64(size), lines, now); err != nil {
			return fmt.Errorf("record cosignature %d by %s: %w", size, witness, err)
		}
		if _, err := tx.ExecContext(bg, `INSERT INTO witness_state(tenant, witness, cosigned_size) VALUES(?,?,?)
			ON CONFLICT(tenant, witness) DO UPDATE SET cosigned_size = max(cosigned_size, excluded.cosigned_size)`,
			s.tenant, witness, int64(size)); err != nil {
			return fmt.Errorf("record cosigned size %d for %s: %w", size, witness, err)
		}
		if _, err := tx.ExecContext(bg, `DELETE FROM publications WHERE tenant=? AND witness=? AND size <= ?`,
			s.tenant, witness, int64(size)); err != nil {
			return fmt.Errorf("settle publications for %s: %w", witness, err)
		}
		return nil
	})
}

// LastCosigned implements store.PublicationStore.
func (s *Store) LastCosigned(ctx context.Context, witness string) (uint64, bool, error) {
	var n int64
	err := s.rdb.QueryRowContext(ctx, `SELECT cosigned_size FROM witness_state WHERE tenant=? AND witness=?`, s.tenant, witness).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("last cosigned size for %s: %w", witness, err)
	}
	if n < 0 {
		return 0, false, &store.CorruptError{Detail: "negative cosigned size"}
	}
	return uint64(n), true, nil
}

// Cosignatures implements store.PublicationStore.
func (s *Store) Cosignatures(ctx context.Context, size uint64) (map[string][]byte, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT witness, lines FROM cosignatures WHERE tenant=? AND size=? ORDER BY witness`, s.tenant, int64(size))
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
	now := s.now().UnixNano()
	return s.write(ctx, func(tx *sql.Tx) error {
		bg := context.Background()
		have, err := s.signedAt(bg, tx, size)
		if err != nil {
			return err
		}
		if have == nil {
			return &store.InvalidArgumentError{Field: "size", Detail: fmt.Sprintf("no signed checkpoint is kept for size %d", size)}
		}
		_, err = tx.ExecContext(bg, `INSERT INTO witnessed(tenant, size, note, at) VALUES(?,?,?,?) ON CONFLICT DO NOTHING`,
			s.tenant, int64(size), note, now)
		if err != nil {
			return fmt.Errorf("mark %d witnessed: %w", size, err)
		}
		return nil
	})
}

// LatestWitnessed implements store.PublicationStore.
func (s *Store) LatestWitnessed(ctx context.Context) (*store.SignedCheckpoint, error) {
	return scanSigned(s.rdb.QueryRowContext(ctx, `SELECT w.size, c.root, w.note, w.at FROM witnessed w
		JOIN signed_checkpoints c ON c.tenant = w.tenant AND c.size = w.size
		WHERE w.tenant=? ORDER BY w.size DESC LIMIT 1`, s.tenant))
}

// CreateToken implements store.TokenStore.
func (s *Store) CreateToken(ctx context.Context, t store.Token) error {
	if t.ID == "" || t.Tenant == "" || (t.Role != store.RoleReader && t.Role != store.RoleWriter) {
		return &store.InvalidArgumentError{Field: "token", Detail: "needs an id, a tenant and the role reader or writer"}
	}
	if t.Created.IsZero() {
		t.Created = s.now()
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(context.Background(), `INSERT INTO tokens(id, tenant, role, name, hash, created) VALUES(?,?,?,?,?,?) ON CONFLICT DO NOTHING`,
			t.ID, t.Tenant, t.Role, t.Name, t.Hash[:], t.Created.UnixNano())
		if err != nil {
			return fmt.Errorf("create token: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return &store.InvalidArgumentError{Field: "id", Detail: fmt.Sprintf("token %q exists", t.ID)}
		}
		return nil
	})
}

const tokenCols = `id, tenant, role, name, hash, created, revoked`

func scanToken(sc interface{ Scan(...any) error }) (store.Token, error) {
	var t store.Token
	var hash []byte
	var created int64
	var revoked sql.NullInt64
	if err := sc.Scan(&t.ID, &t.Tenant, &t.Role, &t.Name, &hash, &created, &revoked); err != nil {
		return t, err
	}
	if len(hash) != 32 {
		return t, &store.CorruptError{Detail: "malformed token hash"}
	}
	t.Hash, t.Created = store.Digest(hash), time.Unix(0, created).UTC()
	if revoked.Valid {
		r := time.Unix(0, revoked.Int64).UTC()
		t.Revoked = &r
	}
	return t, nil
}

// Tokens implements store.TokenStore.
func (s *Store) Tokens(ctx context.Context) ([]store.Token, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+tokenCols+` FROM tokens ORDER BY created, id`)
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
	now := s.now().UnixNano()
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(context.Background(), `UPDATE tokens SET revoked=? WHERE id=? AND revoked IS NULL`, now, id)
		if err != nil {
			return fmt.Errorf("revoke token: %w", err)
		}
		n, _ := res.RowsAffected()
		ok = n == 1
		return nil
	})
	return ok, err
}

// TokenByID implements store.TokenStore.
func (s *Store) TokenByID(ctx context.Context, id string) (*store.Token, error) {
	// Every API request looks its token up: a prepared statement spares
	// SQLite parsing the query each time (a fifth of journal serve's CPU
	// under bench --http before).
	s.tokenOnce.Do(func() {
		s.tokenStmt, s.tokenErr = s.rdb.PrepareContext(context.Background(), `SELECT `+tokenCols+` FROM tokens WHERE id=?`)
	})
	if s.tokenErr != nil {
		return nil, fmt.Errorf("token %q: %w", id, s.tokenErr)
	}
	t, err := scanToken(s.tokenStmt.QueryRowContext(ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("token %q: %w", id, err)
	}
	return &t, nil
}
