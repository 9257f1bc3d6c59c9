package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/runseal/runseal/store"
)

type leaseRow struct {
	exists   bool
	owner    string
	epoch    store.Epoch
	expires  int64
	released bool
}

func (s *Store) loadLease(ctx context.Context, q querier, run store.RunID) (leaseRow, error) {
	var l leaseRow
	var epoch, released int64
	err := q.QueryRowContext(ctx, `SELECT owner, epoch, expires_at, released FROM leases WHERE tenant=? AND run=?`, s.tenant, run.String()).
		Scan(&l.owner, &epoch, &l.expires, &released)
	if errors.Is(err, sql.ErrNoRows) {
		return l, nil
	}
	if err != nil {
		return l, fmt.Errorf("read lease of run %s: %w", run, err)
	}
	l.exists, l.epoch, l.released = true, store.Epoch(epoch), released != 0
	return l, nil
}

// live reports whether the lease is held at now (whole seconds).
func (l leaseRow) live(now int64) bool { return l.exists && !l.released && l.expires > now }

// Acquire implements store.Journal: a pure claim that always bumps the epoch.
func (s *Store) Acquire(ctx context.Context, run store.RunID, owner string, ttl time.Duration) (store.Lease, error) {
	if run.IsZero() {
		return store.Lease{}, &store.InvalidArgumentError{Field: "run", Detail: "is missing"}
	}
	if err := store.ValidateOwner(owner); err != nil {
		return store.Lease{}, err
	}
	secs, err := store.TTLSeconds(ttl)
	if err != nil {
		return store.Lease{}, err
	}
	var out store.Lease
	err = s.write(ctx, func(tx *sql.Tx) error {
		bg := context.Background()
		l, err := s.loadLease(bg, tx, run)
		if err != nil {
			return err
		}
		now := s.now().Unix()
		if l.live(now) {
			return &store.LeaseHeldError{Run: run, Owner: l.owner, Epoch: l.epoch, Remaining: time.Duration(l.expires-now) * time.Second}
		}
		epoch := l.epoch + 1
		if !l.exists {
			// The first lease moves past every epoch the run's unleased
			// writers used, so that none of them passes its fence. Once a
			// lease row exists every append is fenced to it, so later
			// acquires need not look.
			top, err := s.chainEpoch(bg, tx, run)
			if err != nil {
				return err
			}
			epoch = top + 1
		}
		if err := store.ValidateEpoch(epoch); err != nil {
			return err
		}
		expires := now + secs
		_, err = tx.ExecContext(bg, `INSERT INTO leases(tenant, run, owner, epoch, expires_at, released) VALUES(?,?,?,?,?,0)
			ON CONFLICT(tenant, run) DO UPDATE SET owner=excluded.owner, epoch=excluded.epoch, expires_at=excluded.expires_at, released=0`,
			s.tenant, run.String(), owner, int64(epoch), expires)
		if err != nil {
			return fmt.Errorf("write lease of run %s: %w", run, err)
		}
		out = store.Lease{Run: run, Owner: owner, Epoch: epoch, Expires: time.Unix(expires, 0).UTC()}
		return nil
	})
	return out, err
}

// qRunEpochs lists the epoch of each of a run's records.
var qRunEpochs = keyedRecords(`json_extract(CAST(r.raw AS TEXT), '$.epoch') AS e`, `k.tenant=? AND k.run=?`)

// qChainEpoch is the highest of them, 0 for a run without records.
var qChainEpoch = `SELECT coalesce(max(e), 0) FROM (` + qRunEpochs + `)`

// chainEpoch returns the highest epoch among the run's records (0 for a
// run with none), read from their canonical bodies.
func (s *Store) chainEpoch(ctx context.Context, q querier, run store.RunID) (store.Epoch, error) {
	var top int64
	err := s.queryRow(ctx, q, qChainEpoch, twice(s.tenant, run.String())...).Scan(&top)
	if err != nil {
		return 0, fmt.Errorf("read the epochs of run %s: %w", run, err)
	}
	if top < 0 {
		return 0, &store.CorruptError{Run: run, Detail: fmt.Sprintf("a record carries epoch %d", top)}
	}
	return store.Epoch(top), nil
}

// Renew implements store.Journal: only the exact live holder extends, and
// the epoch is kept.
func (s *Store) Renew(ctx context.Context, run store.RunID, owner string, epoch store.Epoch, ttl time.Duration) (store.Lease, error) {
	if err := store.ValidateOwner(owner); err != nil {
		return store.Lease{}, err
	}
	if err := store.ValidateEpoch(epoch); err != nil {
		return store.Lease{}, err
	}
	secs, err := store.TTLSeconds(ttl)
	if err != nil {
		return store.Lease{}, err
	}
	var out store.Lease
	err = s.write(ctx, func(tx *sql.Tx) error {
		bg := context.Background()
		l, err := s.loadLease(bg, tx, run)
		if err != nil {
			return err
		}
		now := s.now().Unix()
		if !l.live(now) || l.owner != owner || l.epoch != epoch {
			return &store.LeaseNotHeldError{Run: run, Owner: owner, Epoch: epoch}
		}
		expires := now + secs
		if _, err := tx.ExecContext(bg, `UPDATE leases SET expires_at=? WHERE tenant=? AND run=?`, expires, s.tenant, run.String()); err != nil {
			return fmt.Errorf("renew lease of run %s: %w", run, err)
		}
		out = store.Lease{Run: run, Owner: owner, Epoch: epoch, Expires: time.Unix(expires, 0).UTC()}
		return nil
	})
	return out, err
}

// ReleaseLease implements store.Journal.
func (s *Store) ReleaseLease(ctx context.Context, run store.RunID, epoch store.Epoch) error {
	if err := store.ValidateEpoch(epoch); err != nil {
		return err
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(context.Background(), `UPDATE leases SET released=1, owner='' WHERE tenant=? AND run=? AND epoch=? AND released=0`,
			s.tenant, run.String(), int64(epoch))
		if err != nil {
			return fmt.Errorf("release lease of run %s: %w", run, err)
		}
		return nil
	})
}

// AbandonedRuns implements store.Journal. Sealed runs are finished, not
// stranded, even when their holder died before releasing.
func (s *Store) AbandonedRuns(ctx context.Context, limit int) ([]store.RunID, error) {
	if err := store.ValidateLimit(limit); err != nil {
		return nil, err
	}
	return s.listRuns(ctx, `SELECT l.run FROM leases l LEFT JOIN runs r ON r.tenant=l.tenant AND r.run=l.run
		WHERE l.tenant=? AND l.released=0 AND l.expires_at <= ? AND r.sealed_outcome IS NULL
		ORDER BY l.expires_at, l.run LIMIT ?`, s.tenant, s.now().Unix(), limit)
}

// RequestCancel implements store.Journal: unfenced, beside the chain, and
// the first asker is kept.
func (s *Store) RequestCancel(ctx context.Context, run store.RunID, actor store.Operator, reason string) (bool, error) {
	if err := actor.Validate(); err != nil {
		return false, err
	}
	if reason == "" || len(reason) > 4096 || !utf8.ValidString(reason) {
		return false, &store.InvalidArgumentError{Field: "reason", Detail: "must be 1 to 4096 bytes of UTF-8"}
	}
	var created bool
	err := s.write(ctx, func(tx *sql.Tx) error {
		bg := context.Background()
		st, err := s.loadRun(bg, tx, run)
		if err != nil {
			return err
		}
		if !st.exists {
			return &store.NotFoundError{What: "run " + run.String()}
		}
		res, err := tx.ExecContext(bg, `INSERT INTO cancellations(tenant, run, actor, basis, reason, at) VALUES(?,?,?,?,?,?) ON CONFLICT DO NOTHING`,
			s.tenant, run.String(), actor.Actor, string(actor.Basis), reason, s.now().UnixNano())
		if err != nil {
			return fmt.Errorf("record cancellation of run %s: %w", run, err)
		}
		n, err := res.RowsAffected()
		created = n == 1
		return err
	})
	return created, err
}

// Cancellation implements store.Journal.
func (s *Store) Cancellation(ctx context.Context, run store.RunID) (*store.Cancellation, error) {
	var c store.Cancellation
	var basis string
	var at int64
	err := s.rdb.QueryRowContext(ctx, `SELECT actor, basis, reason, at FROM cancellations WHERE tenant=? AND run=?`, s.tenant, run.String()).
		Scan(&c.Actor.Actor, &basis, &c.Reason, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read cancellation of run %s: %w", run, err)
	}
	c.Actor.Basis = store.Basis(basis)
	c.At = time.Unix(0, at).UTC()
	return &c, nil
}
