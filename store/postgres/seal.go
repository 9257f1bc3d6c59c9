package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/runseal/runseal/internal/groupcommit"
	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// Seals are group-committed too, by one committer per Store: the seals of
// a tenant serialize on its log row until commit anyway, so the way to more
// seals per second is more seals per commit. A group locks its runs (in
// run-id order, like every writer), decides each seal under its lock, takes
// as many consecutive log indexes as it has seals with one increment of the
// tenant's log row, adds all the leaves to the Merkle tree at once, and
// commits. A seal refused under the lock fails alone; a failure after that
// fails or retries the whole group, so an index is never taken without its
// run.

// sealReq is one caller's Seal waiting for its group.
type sealReq struct {
	run     store.RunID
	epoch   store.Epoch
	outcome string
	leaf    store.Digest
}

// Seal implements store.Journal. The run must exist, its latest conclusion
// must be the sealing outcome asked for (so the outcome the log commits to
// is the one the chain records), and the fence must pass. First seal wins:
// a re-seal returns the leaf and writes nothing.
func (s *Store) Seal(ctx context.Context, run store.RunID, epoch store.Epoch, outcome string) (store.Digest, error) {
	if err := store.CheckSeal(epoch, outcome); err != nil {
		return store.Digest{}, err
	}
	if err := s.check(ctx); err != nil {
		return store.Digest{}, err
	}
	r := &sealReq{run: run, epoch: epoch, outcome: outcome}
	// Not ended by ctx once taken: the caller must learn whether its seal
	// landed.
	if err := s.seals.Submit(ctx, r); err != nil {
		if errors.Is(err, groupcommit.ErrClosed) {
			return store.Digest{}, store.ErrClosed
		}
		return store.Digest{}, s.wrap(func() string { return "seal run " + run.String() }, err)
	}
	return r.leaf, nil
}

// trySeals seals pending in one transaction, answering every member it can
// and returning those to try again.
func (s *Store) trySeals(ms []*groupcommit.Member[*sealReq]) ([]*groupcommit.Member[*sealReq], error) {
	pending := byRun(ms, func(r *sealReq) store.RunID { return r.run })
	ctx, cancel := context.WithTimeout(context.Background(), s.commitTO)
	defer cancel()
	x, err := s.session(ctx)
	if err != nil {
		return failAll(pending, err)
	}
	defer x.close()
	locks, err := x.lockRuns(ctx, func(i int) store.RunID { return pending[i].Req.run }, len(pending))
	if err != nil {
		return failAll(pending, err)
	}
	var accepted []*groupcommit.Member[*sealReq]
	var reqs []*sealReq
	for i, m := range pending {
		fresh, err := decideSeal(locks[i], m.Req)
		switch {
		case err != nil:
			m.Answer(err)
		case !fresh:
			m.Answer(nil)
		default:
			accepted = append(accepted, m)
			reqs = append(reqs, m.Req)
		}
	}
	if len(accepted) == 0 {
		return nil, nil
	}
	if err := s.writeSeals(ctx, x, reqs); err != nil {
		return failAll(accepted, err)
	}
	for _, m := range accepted {
		m.Answer(nil)
	}
	return nil, nil
}

// decideSeal decides one seal under its run's lock and sets r.leaf. fresh
// is false for a re-seal (first seal wins), which writes nothing.
func decideSeal(l locked, r *sealReq) (fresh bool, err error) {
	switch {
	case !l.run.exists:
		return false, &store.NotFoundError{What: "run " + r.run.String()}
	case l.fence(r.run, r.epoch) != nil:
		return false, l.fence(r.run, r.epoch)
	case l.run.sealedOutcome != nil:
		if len(l.run.leaf) != 32 {
			return false, &store.CorruptError{Run: r.run, Detail: "sealed run has no 32-byte leaf"}
		}
		r.leaf = store.Digest(l.run.leaf) // first seal wins
		return false, nil
	case l.run.writable(r.run) != nil:
		return false, l.run.writable(r.run)
	case l.run.outcome == nil || *l.run.outcome != r.outcome:
		latest := "none"
		if l.run.outcome != nil {
			latest = fmt.Sprintf("%q", *l.run.outcome)
		}
		return false, &store.InvalidArgumentError{Field: "outcome", Detail: fmt.Sprintf("run %s's latest conclusion is %s; append a RunConcluded with outcome %q before sealing", r.run, latest, r.outcome)}
	}
	r.leaf = l.run.head.Hash
	return true, nil
}

// writeSeals writes decided seals in x's transaction, which holds their
// runs' locks, and commits: they take consecutive log indexes in the order
// given, under the tenant's log row lock, and their leaves enter the tree
// together.
func (s *Store) writeSeals(ctx context.Context, x *session, reqs []*sealReq) error {
	// The indexes are taken under the tenant's log row lock, held to
	// commit: the next group waits for this one to commit or roll back.
	var first int64
	if err := x.conn.QueryRow(ctx, s.q.logNext, s.tenant, int64(len(reqs))).Scan(&first); err != nil {
		return notWritten(fmt.Errorf("take log index: %w", err))
	}
	if first < 0 {
		return &store.CorruptError{Detail: "negative log size"}
	}
	// One statement for the group: under the runs' locks each matches its
	// row, so fewer rows than seals cannot happen; if it does, no leaf may
	// enter the log without its run.
	ids, outcomes := make([]string, len(reqs)), make([]string, len(reqs))
	idxs, heads := make([]int64, len(reqs)), make([][]byte, len(reqs))
	leaves := make([]log.Hash, len(reqs))
	for i, r := range reqs {
		ids[i], outcomes[i], idxs[i], heads[i] = r.run.String(), r.outcome, first+int64(i), r.leaf[:]
		leaves[i] = log.Hash(r.leaf)
	}
	tag, err := x.conn.Exec(ctx, s.q.sealRuns, s.tenant, ids, outcomes, idxs, heads)
	if err == nil && tag.RowsAffected() != int64(len(reqs)) {
		err = fmt.Errorf("seal of %d runs from run %s matched %d rows", len(reqs), reqs[0].run, tag.RowsAffected())
	}
	if err != nil {
		return notWritten(fmt.Errorf("seal: %w", err))
	}
	cb := &pgx.Batch{}
	if err := s.appendLeaves(ctx, x, cb, uint64(first), leaves...); err != nil {
		return err
	}
	return x.commit(ctx, cb, func(_ int, err error) error { return nodeConflict(err) })
}
