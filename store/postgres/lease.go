package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/runseal/runseal/store"
)

// Acquire implements store.Journal: a pure claim that always bumps the
// epoch. Liveness is judged by the database's clock, read under the lease
// row's lock, so the judgement cannot be overtaken before it is written.
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
	err = s.write(ctx, func() string { return "acquire run " + run.String() }, func(x *session) error {
		l, err := x.lockRun(ctx, run)
		if err != nil {
			return err
		}
		if l.lease.live() {
			return &store.LeaseHeldError{Run: run, Owner: l.lease.owner, Epoch: l.lease.epoch, Remaining: l.lease.expires.Sub(l.lease.now)}
		}
		epoch := l.lease.epoch + 1
		if l.lease.epoch == 0 {
			// The first lease moves past every epoch the run's unleased
			// writers used, so that none of them passes its fence. Appends
			// take the lease row's lock, so under it this read sees every
			// one committed; once leased, every append is fenced to the
			// lease, so later acquires need not look.
			var top int64
			if err := x.conn.QueryRow(ctx, s.q.chainEpoch, s.tenant, run.String()).Scan(&top); err != nil {
				return notWritten(fmt.Errorf("read the epochs of run %s: %w", run, err))
			}
			if top < 0 {
				return &store.CorruptError{Run: run, Detail: fmt.Sprintf("a record carries epoch %d", top)}
			}
			epoch = store.Epoch(top) + 1
		}
		if err := store.ValidateEpoch(epoch); err != nil {
			return err
		}
		expires := l.lease.now.Add(time.Duration(secs) * time.Second).UTC()
		b := &pgx.Batch{}
		b.Queue(s.q.updateLease, s.tenant, run.String(), owner, int64(epoch), expires)
		if err := x.commit(ctx, b, nil); err != nil {
			return err
		}
		out = store.Lease{Run: run, Owner: owner, Epoch: epoch, Expires: expires}
		return nil
	})
	return out, err
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
	err = s.write(ctx, func() string { return "renew lease of run " + run.String() }, func(x *session) error {
		l, err := x.lockRun(ctx, run)
		if err != nil {
			return err
		}
		if !l.lease.live() || l.lease.owner != owner || l.lease.epoch != epoch {
			return &store.LeaseNotHeldError{Run: run, Owner: owner, Epoch: epoch}
		}
		expires := l.lease.now.Add(time.Duration(secs) * time.Second).UTC()
		b := &pgx.Batch{}
		b.Queue(s.q.renewLease, s.tenant, run.String(), expires)
		if err := x.commit(ctx, b, nil); err != nil {
			return err
		}
		out = store.Lease{Run: run, Owner: owner, Epoch: epoch, Expires: expires}
		return nil
	})
	return out, err
}

// ReleaseLease implements store.Journal. It is one statement: the UPDATE
// takes the row lock itself, and matching on the epoch means a fenced
// caller's release matches nothing.
func (s *Store) ReleaseLease(ctx context.Context, run store.RunID, epoch store.Epoch) error {
	if err := store.ValidateEpoch(epoch); err != nil {
		return err
	}
	if err := s.check(ctx); err != nil {
		return err
	}
	var err error
	for i := 0; i < maxAttempts; i++ {
		// Idempotent, so a retry after any failure is harmless.
		if _, err = s.pool.Exec(ctx, s.q.releaseLease, s.tenant, run.String(), int64(epoch)); err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(1<<i) * time.Millisecond)
	}
	return s.readErr("release lease of run "+run.String(), err)
}

// AbandonedRuns implements store.Journal. Sealed runs are finished, not
// stranded, even when their holder died before releasing.
func (s *Store) AbandonedRuns(ctx context.Context, limit int) ([]store.RunID, error) {
	if err := store.ValidateLimit(limit); err != nil {
		return nil, err
	}
	out, err := s.listRuns(ctx, s.q.abandoned, s.tenant, limit)
	return out, s.readErr("abandoned runs", err)
}

// RequestCancel implements store.Journal: unfenced, beside the chain, and
// the first asker is kept (a primary key, so racing askers cannot both win).
func (s *Store) RequestCancel(ctx context.Context, run store.RunID, actor store.Operator, reason string) (bool, error) {
	if err := actor.Validate(); err != nil {
		return false, err
	}
	if reason == "" || len(reason) > 4096 || !utf8.ValidString(reason) {
		return false, &store.InvalidArgumentError{Field: "reason", Detail: "must be 1 to 4096 bytes of UTF-8"}
	}
	if err := s.check(ctx); err != nil {
		return false, err
	}
	var exists, created bool
	err := s.pool.QueryRow(ctx, s.q.requestCancel, s.tenant, run.String(), actor.Actor, string(actor.Basis), reason).Scan(&exists, &created)
	if err != nil {
		return false, s.readErr("request cancellation of run "+run.String(), err)
	}
	if !exists {
		return false, &store.NotFoundError{What: "run " + run.String()}
	}
	return created, nil
}

// Cancellation implements store.Journal.
func (s *Store) Cancellation(ctx context.Context, run store.RunID) (*store.Cancellation, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	var c store.Cancellation
	var basis string
	err := s.pool.QueryRow(ctx, s.q.cancellation, s.tenant, run.String()).Scan(&c.Actor.Actor, &basis, &c.Reason, &c.At)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, s.readErr(fmt.Sprintf("read cancellation of run %s", run), err)
	}
	c.Actor.Basis = store.Basis(basis)
	c.At = c.At.UTC()
	return &c, nil
}
