package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/runseal/runseal/store"
)

// AppendBulk implements store.BulkWriter: one transaction locks every run
// of the call (in run-id order, like every writer), decides each append
// under its lock with planAppend, as a group of concurrent Appends is
// decided, and writes the records with COPY (copyRecords) and the rest
// with one statement per table (queueRuns).
// A refusal under the lock, or a constraint the server enforces (a
// duplicate effect or admission key), fails the whole call, which writes
// nothing.
func (s *Store) AppendBulk(ctx context.Context, appends []store.BulkAppend) ([][]store.Record, error) {
	runs := make([]store.RunID, len(appends))
	for i, a := range appends {
		run, err := store.ValidateBatch(a.Epoch, a.Batch)
		if err != nil {
			return nil, fmt.Errorf("bulk append %d: %w", i, err)
		}
		runs[i] = run
	}
	if err := store.CheckBulk(len(runs), func(i int) store.RunID { return runs[i] }); err != nil {
		return nil, err
	}
	order := lockOrder(runs)
	plans := make([]*appendPlan, len(appends))
	what := func() string { return fmt.Sprintf("append to %d runs from run %s", len(runs), runs[0]) }
	err := s.write(ctx, what, func(x *session) error {
		defer x.genericPlans(ctx)()
		locks, err := x.lockBulk(ctx, sortedIDs(runs, order), true)
		if err != nil {
			return err
		}
		for k, i := range order {
			if plans[i], err = s.planAppend(locks[k], runs[i], appends[i].Epoch, appends[i].Batch); err != nil {
				return err
			}
		}
		if err := s.copyRecords(ctx, x, plans); err != nil {
			if d := bulkDuplicate(err); d != nil {
				return d
			}
			return notWritten(fmt.Errorf("copy records: %w", err))
		}
		b := &pgx.Batch{}
		s.queueRuns(plans, b)
		return x.commit(ctx, b, func(_ int, err error) error { return bulkDuplicate(err) })
	})
	if err != nil {
		return nil, err
	}
	out := make([][]store.Record, len(plans))
	for i, p := range plans {
		out[i] = p.records()
	}
	return out, nil
}

// SealBulk implements store.BulkWriter: one transaction locks the runs,
// decides each seal as Seal does (decideSeal), and writes the new ones
// with writeSeals, at consecutive log indexes in the order given.
func (s *Store) SealBulk(ctx context.Context, seals []store.BulkSeal) ([]store.Digest, error) {
	for _, b := range seals {
		if err := store.CheckSeal(b.Epoch, b.Outcome); err != nil {
			return nil, err
		}
	}
	runs := make([]store.RunID, len(seals))
	for i, b := range seals {
		runs[i] = b.Run
	}
	if err := store.CheckBulk(len(runs), func(i int) store.RunID { return runs[i] }); err != nil {
		return nil, err
	}
	order := lockOrder(runs)
	reqs := make([]*sealReq, len(seals))
	what := func() string { return fmt.Sprintf("seal %d runs from run %s", len(runs), runs[0]) }
	err := s.write(ctx, what, func(x *session) error {
		defer x.genericPlans(ctx)()
		locks, err := x.lockBulk(ctx, sortedIDs(runs, order), false)
		if err != nil {
			return err
		}
		fresh := make([]bool, len(seals))
		for k, i := range order {
			reqs[i] = &sealReq{run: seals[i].Run, epoch: seals[i].Epoch, outcome: seals[i].Outcome}
			if fresh[i], err = decideSeal(locks[k], reqs[i]); err != nil {
				return err
			}
			if err := seals[i].CheckLeaf(reqs[i].leaf); err != nil {
				return err
			}
		}
		var write []*sealReq
		for i, r := range reqs {
			if fresh[i] {
				write = append(write, r)
			}
		}
		if len(write) == 0 {
			return nil
		}
		return s.writeSeals(ctx, x, write)
	})
	if err != nil {
		return nil, err
	}
	out := make([]store.Digest, len(reqs))
	for i, r := range reqs {
		out[i] = r.leaf
	}
	return out, nil
}

// bulkDuplicate maps a unique violation of a bulk write, which cannot be
// pinned on one member, to the refusal of the whole bulk; nil for any
// other error.
func bulkDuplicate(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" { // unique_violation
		return &store.InvalidArgumentError{Field: "bulk", Detail: fmt.Sprintf("an effect or admission key of the bulk is already in the journal (%s)", pe.ConstraintName)}
	}
	return nil
}

// copyRecords writes the records of plans with COPY, in x's transaction,
// in plan order (so record ids keep each run's seq order). COPY checks
// the same constraints as the multi-row INSERT of queueMany (the primary
// key, exactly-once) and fails the transaction with the first violation;
// it costs the server about a third less per record, which in a restore
// is the most written table. The row values are the INSERT's.
func (s *Store) copyRecords(ctx context.Context, x *session, plans []*appendPlan) error {
	var c recordCols
	for _, p := range plans {
		c.add(p)
	}
	n, err := x.conn.CopyFrom(ctx, pgx.Identifier{s.schema, "records"},
		[]string{"tenant", "run", "seq", "kind", "case_id", "effect_key", "prev_hash", "hash", "raw"},
		pgx.CopyFromSlice(len(c.run), func(i int) ([]any, error) {
			return []any{s.tenant, c.run[i], c.seq[i], c.kind[i], c.caseID[i], c.effect[i], c.prev[i], c.hash[i], c.raw[i]}, nil
		}))
	if err == nil && n != int64(len(c.run)) {
		err = fmt.Errorf("copied %d of %d records", n, len(c.run))
	}
	return err
}

// genericPlans makes the session plan its statements for any tenant
// (plan_cache_mode force_generic_plan) until the returned function, run
// after the attempt, resets it. A bulk write fills a new tenant whose rows
// the statistics do not show yet: a plan custom to that tenant reckons it
// holds a row or two, finds one index of (tenant, ...) as cheap as another,
// and may pick runs_active to find a run by id, which then scans the whole
// tenant for every run, quadratic in a restore. A generic plan reckons with
// a tenant of average size and keys each lookup by the primary key. It is
// best effort: a SET that fails changes nothing the write relies on.
func (x *session) genericPlans(ctx context.Context) func() {
	if _, err := x.conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		return func() {}
	}
	return func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if x.conn.PgConn().TxStatus() != 'I' {
			_, _ = x.conn.Exec(cctx, "rollback")
		}
		if _, err := x.conn.Exec(cctx, "RESET plan_cache_mode"); err != nil {
			// The pool drops a closed connection rather than lend it
			// out with this session's setting.
			_ = x.conn.Close(cctx)
		}
	}
}

// lockOrder returns the indexes of runs in the order their locks are
// taken: by run id, as every writer takes them.
func lockOrder(runs []store.RunID) []int {
	order := make([]int, len(runs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(runs[a].String(), runs[b].String()) })
	return order
}

// sortedIDs returns the ids of runs in lock order.
func sortedIDs(runs []store.RunID, order []int) []string {
	ids := make([]string, len(order))
	for k, i := range order {
		ids[k] = runs[i].String()
	}
	return ids
}

var _ store.BulkWriter = (*Store)(nil)
