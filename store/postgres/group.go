package postgres

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runseal/runseal/internal/canon"
	"github.com/runseal/runseal/internal/groupcommit"
	"github.com/runseal/runseal/store"
)

// Appends are group-committed: a few committer goroutines each take the
// appends waiting when they come free (up to MaxGroup, at most one per run)
// and write them in one transaction, two round trips and one WAL flush for
// the group. Throughput comes from sharing the commit, not from weaker
// durability: every append still returns only after its COMMIT.
//
// A group takes all its runs' locks in one pass, in run-id order, as every
// writer does, and claims its admission keys in key order, so groups in
// different processes cannot deadlock (TestMixedGroups_OneLockOrderNoDeadlock,
// TestCrossingAdmissionClaims_OneKeyOrderNoDeadlock). A member refused under the
// lock (fenced, sealed, invalid) fails alone before anything is written; a
// member whose write violates a constraint (a duplicate effect or admission
// key) aborts the transaction, gets its refusal, and the rest of the group
// runs again in a fresh one.

// appendReq is one caller's Append waiting for its group.
type appendReq struct {
	run     store.RunID
	epoch   store.Epoch
	batch   []store.Append
	keys    []string // what the append claims: its run, the admission keys of its batch
	recs    []store.Record
	careful bool // its group is written one statement per row
	// ordinary: written with its run read under the lock first, not
	// from what the store remembers of it (see known.go)
	ordinary bool
}

// admissionKeys lists the admission keys a batch claims. Two members of
// one group must never claim the same key: the loser's refusal aborts the
// group's transaction, taking the winner's claim with it, and the loser
// then finds no holder to name and retries against the same group forever.
// Such a member waits for the next group, where the winner has committed.
func admissionKeys(batch []store.Append) []string {
	var keys []string
	for _, a := range batch {
		kind, fields := a.Kind, a.Fields
		if a.Raw != nil {
			// A restored record carries its kind and fields in its bytes.
			b, err := store.DecodeBody(a.Raw)
			if err != nil {
				continue // refused later, with the field named
			}
			kind, fields = b.Kind, b.Fields
		}
		if kind != store.KindRunAdmitted || len(fields) == 0 {
			continue
		}
		v, err := canon.Parse(fields)
		if err != nil {
			continue // refused later, with the field named
		}
		if k, ok := v.Get("admission_key"); ok && k.Kind == canon.String && k.Str != "" {
			keys = append(keys, k.Str)
		}
	}
	return keys
}

// startCommitters starts the group commits of appends and of seals;
// Close stops them. Appends and seals to one run, and appends claiming one
// admission key, are never in flight together: two such members in one
// transaction would make the loser's refusal abort the winner's write too,
// and the loser, finding no holder to name, would retry against the same
// group forever.
func (s *Store) startCommitters(n int) {
	backoff := func(fails int) time.Duration {
		return time.Duration(1<<fails)*time.Millisecond + time.Duration(rand.IntN(1000))*time.Microsecond
	}
	s.appends = groupcommit.New(groupcommit.Config[*appendReq]{
		Attempt:     s.tryGroup,
		Keys:        func(r *appendReq) []string { return r.keys },
		MaxGroup:    s.maxGroup,
		Committers:  n,
		MaxAttempts: maxAttempts,
		Backoff:     backoff,
	})
	s.seals = groupcommit.New(groupcommit.Config[*sealReq]{
		Attempt:     s.trySeals,
		Keys:        func(r *sealReq) []string { return []string{r.run.String()} },
		MaxGroup:    s.maxGroup,
		MaxAttempts: maxAttempts,
		Backoff:     func(fails int) time.Duration { return time.Duration(1<<fails) * time.Millisecond },
	})
}

// groupHooks are the points where tests stand or watch the append group
// commit (lockorder_test.go): a race between two processes' groups is
// made to happen, every time, by holding one group where the race is.
// Tests set them before submitting anything; outside tests they are nil.
type groupHooks struct {
	// locked is called when a group that takes the ordinary way holds the
	// locks of its lock pass and has sent none of its writes, with its
	// members' runs in run-id order. The group waits for it to return.
	locked func(runs []store.RunID)
	// failed is called with the error of every such group's transaction
	// that failed, in its lock pass or its writes, before the group decides
	// what it means (a retry, a rewrite row by row, a member's refusal).
	failed func(err error)
}

// groupFailed tells the hooks, if any, that a group's transaction failed.
func (s *Store) groupFailed(err error) {
	if err != nil && s.hooks != nil && s.hooks.failed != nil {
		s.hooks.failed(err)
	}
}

// enqueueAppend hands an append to the committers and waits for its
// commit. The wait does not end early when ctx is cancelled: the caller
// must learn whether its write landed. An append whose ctx is cancelled
// before its group starts is skipped and writes nothing.
func (s *Store) enqueueAppend(ctx context.Context, run store.RunID, epoch store.Epoch, batch []store.Append) ([]store.Record, error) {
	r := &appendReq{run: run, epoch: epoch, batch: batch, keys: append([]string{run.String()}, prefixed("admission:", admissionKeys(batch))...)}
	if err := s.appends.Submit(ctx, r); err != nil {
		if errors.Is(err, groupcommit.ErrClosed) {
			return nil, store.ErrClosed
		}
		return nil, s.wrap(func() string { return "append to run " + run.String() }, err)
	}
	return r.recs, nil
}

// byRun returns ms sorted by run id: every writer takes its runs' locks in
// that order, so groups in different processes cannot deadlock.
func byRun[T any](ms []*groupcommit.Member[T], run func(T) store.RunID) []*groupcommit.Member[T] {
	out := slices.Clone(ms)
	slices.SortStableFunc(out, func(a, b *groupcommit.Member[T]) int {
		return strings.Compare(run(a.Req).String(), run(b.Req).String())
	})
	return out
}

func prefixed(p string, keys []string) []string {
	for i, k := range keys {
		keys[i] = p + k
	}
	return keys
}

// tryGroup writes pending in one transaction. It answers every member it
// can and returns those to try again, with the failure that sent them back.
//
// Members whose runs the store remembers (known.go) are written by one
// statement; when every member is such, the group takes one round trip.
// Otherwise every run of the group is locked first, in one run-id order,
// and the others' runs are read; their writes go in the second round
// trip, with the remembered members' statement and COMMIT. The ordinary members are
// written with one statement per table unless careful, when each row has
// its own statement so a refusal can be pinned on its member.
func (s *Store) tryGroup(ms []*groupcommit.Member[*appendReq]) ([]*groupcommit.Member[*appendReq], error) {
	pending := byRun(ms, func(r *appendReq) store.RunID { return r.run })
	kn, rest := s.knownPlans(pending)
	if len(rest) == 0 {
		return s.tryKnown(kn)
	}
	careful := rest[0].Req.careful
	ctx, cancel := context.WithTimeout(context.Background(), s.commitTO)
	defer cancel()
	x, err := s.session(ctx)
	if err != nil {
		return failAll(pending, err)
	}
	defer x.close()
	// The remembered members' runs are locked here too, with the others in
	// one run-id order: left to appendKnown's own locks they would be a
	// second ordered pass after this one, and two groups over the same runs
	// (two processes, or a seal racing an append) could then each hold a
	// run the other waits for. appendKnown re-locks rows this transaction
	// holds, which does not wait.
	locks, err := x.lockRuns(ctx, func(i int) store.RunID {
		if i < len(rest) {
			return rest[i].Req.run
		}
		return kn.members[i-len(rest)].Req.run
	}, len(rest)+len(kn.members))
	if err != nil {
		s.groupFailed(err)
		return failAll(pending, err)
	}
	if s.hooks != nil && s.hooks.locked != nil {
		runs := make([]store.RunID, len(pending))
		for i, m := range pending {
			runs[i] = m.Req.run
		}
		s.hooks.locked(runs)
	}
	// Decide each member under its lock; refusals fail alone, now.
	type member struct {
		m       *groupcommit.Member[*appendReq]
		r       *appendReq
		plan    *appendPlan
		refused func(int, error) error
		first   int         // index of its first statement in wb
		epoch   store.Epoch // its run's lease epoch, read under the lock
	}
	var members []member
	for i, m := range rest {
		r := m.Req
		plan, err := s.planAppend(locks[i], r.run, r.epoch, r.batch)
		if err != nil {
			m.Answer(err)
			continue
		}
		members = append(members, member{m: m, r: r, plan: plan, epoch: locks[i].lease.epoch})
	}
	if len(members) == 0 && len(kn.members) == 0 {
		return nil, nil
	}
	wb := &pgx.Batch{}
	careful = careful || len(members) == 1
	if careful {
		// The members' admission keys are claimed in key order here too
		// (see queueRuns): the members go in the order of their least
		// claim, those claiming none first, and each claims its keys in
		// key order (planAppend). Only members claiming several keys
		// each could still interleave them.
		slices.SortStableFunc(members, func(x, y member) int {
			return strings.Compare(firstClaim(x.plan), firstClaim(y.plan))
		})
		for k := range members {
			members[k].first = len(wb.QueuedQueries)
			members[k].refused = s.queue(members[k].plan, wb)
		}
	} else if len(members) > 0 {
		plans := make([]*appendPlan, len(members))
		for k, m := range members {
			plans[k] = m.plan
		}
		s.queueMany(plans, wb)
	}
	// The remembered members' statement comes last: a refusal before it
	// is pinned on an ordinary member as before.
	knownAt := -1
	var written map[string]bool
	if len(kn.members) > 0 {
		wb.Queue(genericPlan)
		knownAt = len(wb.QueuedQueries)
		wb.Queue(s.q.appendKnown, s.knownArgs(kn)...)
	}
	culprit, refusedByServer, knownRefused := -1, false, false
	err = x.commitReading(ctx, wb, func(i int, err error) error {
		refusedByServer = true
		if knownAt >= 0 && i >= knownAt-1 {
			knownRefused = true
			return nil
		}
		if !careful {
			return nil
		}
		m := sort.Search(len(members), func(k int) bool { return members[k].first > i }) - 1
		culprit = m
		return members[m].refused(i-members[m].first, err)
	}, knownAt, func(rows pgx.Rows) (err error) {
		written, err = readWritten(rows)
		return err
	})
	s.groupFailed(err)
	if err == nil {
		for _, m := range members {
			if m.epoch == m.r.epoch {
				s.known.put(m.r.run, m.epoch, store.Head{Seq: store.Seq(m.plan.headSeq), Hash: store.Digest(m.plan.headHash)})
			}
			m.r.recs = m.plan.records()
			m.m.Answer(nil)
		}
		return s.answerKnown(kn, written), nil
	}
	s.forgetKnown(kn, knownRefused)
	if refusedByServer && (!careful || knownRefused) {
		// A multi-row statement failed and cannot say whose row it was:
		// write the group again one statement per row to find out (the
		// queue lets a group come back once without counting a failure).
		all := slices.Clone(kn.members)
		for _, m := range members {
			m.r.careful = true
			all = append(all, m.m)
		}
		return all, nil
	}
	var cu *store.CommitUnknownError
	if errors.As(err, &cu) || culprit < 0 {
		// In doubt, or no member to blame: every member shares the fate.
		all := slices.Clone(kn.members)
		for _, m := range members {
			all = append(all, m.m)
		}
		return failAll(all, err)
	}
	// One member's write was refused by the server: it gets its answer,
	// the others run again in a fresh transaction.
	retry := slices.Clone(kn.members)
	for k, m := range members {
		if k != culprit {
			retry = append(retry, m.m)
		}
	}
	mErr := s.explainRefusal(ctx, x, err)
	if retryable(mErr) {
		retry = append(retry, members[culprit].m)
	} else {
		members[culprit].m.Answer(mErr)
	}
	return retry, mErr
}

// firstClaim is the least admission key p claims (planAppend sorts
// them), "" if none.
func firstClaim(p *appendPlan) string {
	if len(p.claims) == 0 {
		return ""
	}
	return p.claims[0]
}

// failAll answers every member with err, unless err says the attempt may
// simply run again, in which case all are returned for retry.
func failAll[T any](ms []*groupcommit.Member[T], err error) ([]*groupcommit.Member[T], error) {
	if retryable(err) {
		return ms, err
	}
	for _, m := range ms {
		m.Answer(err)
	}
	return nil, err
}
