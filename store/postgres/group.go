package postgres

import (
	"context"
	"errors"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runseal/runseal/internal/canon"
	"github.com/runseal/runseal/store"
)

// Appends are group-committed: a few committer goroutines each take the
// appends waiting when they come free (up to MaxGroup, at most one per run)
// and write them in one transaction, two round trips and one WAL flush for
// the group. Throughput comes from sharing the commit, not from weaker
// durability: every append still returns only after its COMMIT.
//
// A group takes its runs' locks in run-id order, as every writer does, so
// groups in different processes cannot deadlock. A member refused under the
// lock (fenced, sealed, invalid) fails alone before anything is written; a
// member whose write violates a constraint (a duplicate effect or admission
// key) aborts the transaction, gets its refusal, and the rest of the group
// runs again in a fresh one.

// appendReq is one caller's Append waiting for its group.
type appendReq struct {
	ctx   context.Context
	run   store.RunID
	epoch store.Epoch
	batch []store.Append
	keys  []string // admission keys the batch claims
	recs  []store.Record
	done  chan error
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

// groupMembers tracks what a group being formed already holds: at most one
// append per run and one claim per admission key.
type groupMembers struct {
	runs map[store.RunID]bool
	keys map[string]bool
}

func (g *groupMembers) admits(r *appendReq) bool {
	if g.runs[r.run] {
		return false
	}
	for _, k := range r.keys {
		if g.keys[k] {
			return false
		}
	}
	return true
}

func (g *groupMembers) add(r *appendReq) {
	g.runs[r.run] = true
	for _, k := range r.keys {
		g.keys[k] = true
	}
}

// startCommitters starts the group committers; Close stops them.
func (s *Store) startCommitters(n int) {
	s.appends = make(chan *appendReq)
	s.seals = make(chan *sealReq)
	s.stop = make(chan struct{})
	for i := 0; i < n; i++ {
		s.committers.Add(1)
		go s.committer()
	}
	s.committers.Add(1)
	go s.sealCommitter()
}

// enqueueAppend hands an append to the committers and waits for its
// commit. The wait does not end early when ctx is cancelled: the caller
// must learn whether its write landed. An append whose ctx is cancelled
// before its group starts is skipped and writes nothing.
func (s *Store) enqueueAppend(ctx context.Context, run store.RunID, epoch store.Epoch, batch []store.Append) ([]store.Record, error) {
	r := &appendReq{ctx: ctx, run: run, epoch: epoch, batch: batch, keys: admissionKeys(batch), done: make(chan error, 1)}
	select {
	case s.appends <- r:
	case <-s.stop:
		return nil, store.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err := <-r.done; err != nil {
		return nil, s.wrap(func() string { return "append to run " + run.String() }, err)
	}
	return r.recs, nil
}

func (s *Store) committer() {
	defer s.committers.Done()
	var carry []*appendReq // appends to a run already in the last group
	for {
		var group []*appendReq
		seen := groupMembers{runs: map[store.RunID]bool{}, keys: map[string]bool{}}
		var rest []*appendReq
		for _, r := range carry {
			if seen.admits(r) && len(group) < s.maxGroup {
				seen.add(r)
				group = append(group, r)
			} else {
				rest = append(rest, r)
			}
		}
		carry = rest
		if len(group) == 0 {
			select {
			case r := <-s.appends:
				seen.add(r)
				group = append(group, r)
			case <-s.stop:
				return
			}
		}
	drain:
		for len(group) < s.maxGroup {
			select {
			case r := <-s.appends:
				if !seen.admits(r) {
					carry = append(carry, r)
					continue
				}
				seen.add(r)
				group = append(group, r)
			default:
				break drain
			}
		}
		s.commitGroup(group)
	}
}

// commitGroup writes a group, retrying what failed transiently, until every
// member has its answer.
func (s *Store) commitGroup(group []*appendReq) {
	pending := group[:0:0]
	for _, r := range group {
		if err := r.ctx.Err(); err != nil {
			r.done <- err
			continue
		}
		pending = append(pending, r)
	}
	sort.Slice(pending, func(i, j int) bool { return pending[i].run.String() < pending[j].run.String() })
	// An attempt that answers nobody is a failure; one that answers a
	// refused member and sends the rest back has made progress.
	careful := false
	for fails := 0; len(pending) > 0; {
		retry, err := s.tryGroup(pending, careful)
		if err == errCareful {
			careful = true
			pending = retry
			continue
		}
		if len(retry) == len(pending) {
			if fails++; fails >= maxAttempts {
				for _, r := range retry {
					r.done <- err
				}
				return
			}
			time.Sleep(time.Duration(1<<fails)*time.Millisecond + time.Duration(rand.IntN(1000))*time.Microsecond)
		}
		pending = retry
	}
}

// tryGroup writes pending in one transaction. It answers every member it
// can and returns those to try again, with the failure that sent them back.
//
// A group is written with one statement per table unless careful, when
// each row has its own statement so a refusal can be pinned on its member.
func (s *Store) tryGroup(pending []*appendReq, careful bool) ([]*appendReq, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.commitTO)
	defer cancel()
	x, err := s.session(ctx)
	if err != nil {
		return failAll(pending, err)
	}
	defer x.close()
	locks, err := x.lockRuns(ctx, func(i int) store.RunID { return pending[i].run }, len(pending))
	if err != nil {
		return failAll(pending, err)
	}
	// Decide each member under its lock; refusals fail alone, now.
	type member struct {
		r       *appendReq
		plan    *appendPlan
		refused func(int, error) error
		first   int // index of its first statement in wb
	}
	var members []member
	for i, r := range pending {
		plan, err := s.planAppend(locks[i], r.run, r.epoch, r.batch)
		if err != nil {
			r.done <- err
			continue
		}
		members = append(members, member{r: r, plan: plan})
	}
	if len(members) == 0 {
		return nil, nil
	}
	wb := &pgx.Batch{}
	careful = careful || len(members) == 1
	if careful {
		for k := range members {
			members[k].first = len(wb.QueuedQueries)
			members[k].refused = s.queue(members[k].plan, wb)
		}
	} else {
		plans := make([]*appendPlan, len(members))
		for k, m := range members {
			plans[k] = m.plan
		}
		s.queueMany(plans, wb)
	}
	culprit, refusedByServer := -1, false
	err = x.commit(ctx, wb, func(i int, err error) error {
		refusedByServer = true
		if !careful {
			return nil
		}
		m := sort.Search(len(members), func(k int) bool { return members[k].first > i }) - 1
		culprit = m
		return members[m].refused(i-members[m].first, err)
	})
	if err == nil {
		for _, m := range members {
			m.r.recs = m.plan.records()
			m.r.done <- nil
		}
		return nil, nil
	}
	if refusedByServer && !careful {
		// A multi-row statement failed and cannot say whose row it was:
		// write the group again one statement per row to find out.
		var all []*appendReq
		for _, m := range members {
			all = append(all, m.r)
		}
		return all, errCareful
	}
	var cu *store.CommitUnknownError
	if errors.As(err, &cu) || culprit < 0 {
		// In doubt, or no member to blame: every member shares the fate.
		var all []*appendReq
		for _, m := range members {
			all = append(all, m.r)
		}
		return failAll(all, err)
	}
	// One member's write was refused by the server: it gets its answer,
	// the others run again in a fresh transaction.
	var retry []*appendReq
	for k, m := range members {
		if k != culprit {
			retry = append(retry, m.r)
		}
	}
	mErr := s.explainRefusal(ctx, x, err)
	if retryable(mErr) {
		retry = append(retry, members[culprit].r)
	} else {
		members[culprit].r.done <- mErr
	}
	return retry, mErr
}

// errCareful sends a group back to be written one statement per row.
var errCareful = errors.New("write the group again statement by statement")

// failAll answers every member with err, unless err says the attempt may
// simply run again, in which case all are returned for retry.
func failAll(rs []*appendReq, err error) ([]*appendReq, error) {
	if retryable(err) {
		return rs, err
	}
	for _, r := range rs {
		r.done <- err
	}
	return nil, err
}
