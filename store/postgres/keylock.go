package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/runseal/runseal/store"
)

// KeyLock is a PostgreSQL session-level advisory lock held on a connection
// of its own: every process that takes the same key of the same schema and
// tenant waits until Unlock. If the holding connection dies, the server
// drops the lock, so a lock is a serialization aid and never, alone, a
// guarantee: a holder that writes must still check, in its writing
// transaction, that what it decided from has not moved (see
// HeadChecker). Package lifecycle/journalstore takes one per study.
type KeyLock struct {
	pc  *pgxpool.Conn
	key int64
}

// LockKey waits for the advisory lock of key in this store's schema and
// tenant and returns it held. The key is hashed to PostgreSQL's 64-bit
// advisory key space (SHA-256, first 8 bytes), so two keys may share a
// lock: that serializes more than needed and is never unsafe. The wait
// ends with ctx.
// It returns an io.Closer (a *KeyLock) so that a package can use it
// through an interface without importing this one.
func (s *Store) LockKey(ctx context.Context, key string) (io.Closer, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if key == "" {
		return nil, &store.InvalidArgumentError{Field: "key", Detail: "is empty"}
	}
	k := advisoryKey(s.schema, s.tenant, key)
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, s.wrap(func() string { return "lock key " + key }, notWritten(err))
	}
	if _, err := pc.Exec(ctx, "SELECT pg_advisory_lock($1)", k); err != nil {
		// A cancelled wait may leave the request queued server-side or the
		// lock granted as the cancel lands: the connection goes, and the
		// lock with it.
		destroy(pc)
		return nil, s.wrap(func() string { return "lock key " + key }, notWritten(err))
	}
	return &KeyLock{pc: pc, key: k}, nil
}

// advisoryKey is the PostgreSQL advisory lock key of key in a schema and
// tenant: the first 8 bytes of SHA-256("runseal/keylock" NUL schema NUL
// tenant NUL key), big-endian, as a signed 64-bit integer
// (spec/lifecycle.md 14.2).
func advisoryKey(schema, tenant, key string) int64 {
	sum := sha256.Sum256([]byte("runseal/keylock\x00" + schema + "\x00" + tenant + "\x00" + key))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// LockCapacity is how many KeyLocks a caller of this store should hold at
// once: each holds a pooled connection, and a holder needs at least one more
// to do its work, so holders are kept to half the pool.
func (s *Store) LockCapacity() int {
	return max(1, int(s.pool.Config().MaxConns)/2)
}

// Unlock releases the lock and hands its connection back. If the unlock
// cannot be confirmed the connection is closed, which releases the lock
// server-side. It is safe to call twice.
func (l *KeyLock) Unlock() error {
	if l == nil || l.pc == nil {
		return nil
	}
	pc := l.pc
	l.pc = nil
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var ok bool
	if err := pc.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", l.key).Scan(&ok); err != nil || !ok {
		destroy(pc)
		if err == nil {
			err = errors.New("the lock was not held: its connection was reset")
		}
		return fmt.Errorf("postgres journal: unlock key: %w", err)
	}
	pc.Release()
	return nil
}

// Close is Unlock, so that a KeyLock is an io.Closer.
func (l *KeyLock) Close() error { return l.Unlock() }

// destroy closes a pooled connection instead of returning it.
func destroy(pc *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = pc.Hijack().Close(ctx)
}

// Head reads the head of run inside the atomic transaction. For the run
// AppendAtomic locked, it is the head the records work returns will chain
// on, and no other writer can move it before the commit: so a member that
// compares it with the head it decided from commits only a decision made
// from the run's current state.
func (t *atomicTx) Head(ctx context.Context, run store.RunID) (store.Head, error) {
	if t.done {
		return store.Head{}, fmt.Errorf("atomic transaction used after its work returned")
	}
	h, _, err := t.s.readHead(t.conn.QueryRow(ctx, t.s.q.head, t.s.tenant, run.String()), run)
	return h, err
}

// Heads returns the heads of runs in the order asked, the zero head for a
// run with no records, in one query: a reader that keeps runs folded learns
// which moved without reading each.
func (s *Store) Heads(ctx context.Context, runs []store.RunID) ([]store.Head, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	ids := make([]string, len(runs))
	at := make(map[string]int, len(runs))
	for i, r := range runs {
		ids[i] = r.String()
		at[ids[i]] = i
	}
	out := make([]store.Head, len(runs))
	if len(runs) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, s.q.heads, s.tenant, ids)
	if err != nil {
		return nil, s.readErr("read heads", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var seq int64
		var hash []byte
		if err := rows.Scan(&id, &seq, &hash); err != nil {
			return nil, s.readErr("read heads", err)
		}
		i, ok := at[id]
		if !ok || len(hash) != 32 || seq < 1 {
			return nil, &store.CorruptError{Detail: fmt.Sprintf("run head row %q is malformed", id)}
		}
		out[i] = store.Head{Seq: store.Seq(seq), Hash: store.Digest(hash)}
	}
	if err := rows.Err(); err != nil {
		return nil, s.readErr("read heads", err)
	}
	return out, nil
}
