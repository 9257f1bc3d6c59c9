package postgres

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/runseal/runseal/internal/groupcommit"
	"github.com/runseal/runseal/store"
)

// Appends to a run this store wrote last are planned from what it
// remembers of the run (its head and lease epoch after that write) and
// written in one round trip: BEGIN, one statement, COMMIT. The statement
// takes each run's lease lock, as every write does, and writes a run only
// if its lease epoch and head are still the remembered ones and it is not
// sealed; the records are inserted for the runs it moved, nothing for the
// others. So the memory is a guess the database checks under the lock, never
// trusted: a run another writer moved (another process, a seal, a new
// lease) writes nothing and its append runs again the ordinary way, which
// reads the run under its lock and finds the refusal or the new head.
//
// The ordinary way (lockRuns, then the writes) costs two round trips and
// seven statements a group, three of them probes of every run that the
// remembered state makes needless: creating the lease row, reading the
// run row.

// knownCap bounds the remembered runs. A run forgotten costs one append
// the ordinary way.
const knownCap = 16384

// knownRun is a run's state after this store's last write to it.
type knownRun struct {
	epoch store.Epoch // its lease epoch, never 0
	head  store.Head
}

// knownRuns remembers the state of runs this store wrote last.
type knownRuns struct {
	mu   sync.Mutex
	runs map[store.RunID]knownRun
}

func (k *knownRuns) get(run store.RunID) (knownRun, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	r, ok := k.runs[run]
	return r, ok
}

// put remembers a run's state after a write under lease epoch (a run never
// leased is not remembered: its appends must see the first lease).
func (k *knownRuns) put(run store.RunID, epoch store.Epoch, head store.Head) {
	if epoch == 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.runs == nil {
		k.runs = make(map[store.RunID]knownRun)
	}
	if _, ok := k.runs[run]; !ok && len(k.runs) >= knownCap {
		for r := range k.runs { // an arbitrary one
			delete(k.runs, r)
			break
		}
	}
	k.runs[run] = knownRun{epoch: epoch, head: head}
}

func (k *knownRuns) forget(run store.RunID) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.runs, run)
}

// genericPlan precedes appendKnown in its transaction. PostgreSQL plans a
// prepared statement per call while a custom plan looks cheaper than the
// generic one, which with arrays it does for small groups (it estimates an
// array parameter at ten elements): the planning (about 0.4 ms) then costs
// more than the statement, a third of a lone writer's append.
// TestPlans_FreshTenantUsesPrimaryKey checks the generic plan.
const genericPlan = "SET LOCAL plan_cache_mode = force_generic_plan"

// knownGroup is the members of a group planned from what the store
// remembers of their runs, with the remembered heads.
type knownGroup struct {
	members []*groupcommit.Member[*appendReq]
	plans   []*appendPlan
	prev    []store.Head
}

// knownPlans plans the members of pending whose runs the store remembers,
// and returns the rest: a member whose run is not remembered or is under
// another epoch, that claims an admission key (a claim must be written
// only with its run), or that was sent back to be written the ordinary way.
func (s *Store) knownPlans(pending []*groupcommit.Member[*appendReq]) (kn knownGroup, rest []*groupcommit.Member[*appendReq]) {
	for _, m := range pending {
		r := m.Req
		k, ok := s.known.get(r.run)
		if r.careful || r.ordinary || !ok || k.epoch != r.epoch {
			rest = append(rest, m)
			continue
		}
		// A refusal decided from remembered state is not trusted: the
		// ordinary way decides it under the lock.
		p, err := s.planAppend(locked{lease: lease{epoch: k.epoch}, run: runState{exists: true, head: k.head}}, r.run, r.epoch, r.batch)
		if err != nil || len(p.claims) > 0 {
			rest = append(rest, m)
			continue
		}
		kn.members = append(kn.members, m)
		kn.plans = append(kn.plans, p)
		kn.prev = append(kn.prev, k.head)
	}
	return kn, rest
}

// tryKnown writes a group of remembered members in one round trip.
func (s *Store) tryKnown(kn knownGroup) ([]*groupcommit.Member[*appendReq], error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.commitTO)
	defer cancel()
	x, err := s.session(ctx)
	if err != nil {
		return failAll(kn.members, err)
	}
	defer x.close()
	b := &pgx.Batch{}
	b.Queue("begin")
	b.Queue(genericPlan)
	b.Queue(s.q.appendKnown, s.knownArgs(kn)...)
	b.Queue("commit")
	var written map[string]bool
	err = x.send(ctx, b, func(br pgx.BatchResults) error {
		for range 2 {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		return readRows(br, func(rows pgx.Rows) (err error) {
			written, err = readWritten(rows)
			return err
		})
	})
	if err != nil {
		var pe *pgconn.PgError
		refused := errors.As(err, &pe) && pe.Code == "23505" // unique_violation: whose, the careful way tells
		s.forgetKnown(kn, refused)
		if refused {
			return kn.members, nil
		}
		return failAll(kn.members, err)
	}
	return s.answerKnown(kn, written), nil
}

// readWritten reads appendKnown's answer: the runs it wrote.
func readWritten(rows pgx.Rows) (map[string]bool, error) {
	written := make(map[string]bool)
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		written[id] = true
	}
	return written, rows.Err()
}

// answerKnown answers the remembered members whose runs appendKnown wrote
// (committed), and returns the others, which wrote nothing, to be written
// the ordinary way.
func (s *Store) answerKnown(kn knownGroup, written map[string]bool) []*groupcommit.Member[*appendReq] {
	var retry []*groupcommit.Member[*appendReq]
	for i, m := range kn.members {
		r := m.Req
		if !written[r.run.String()] {
			s.known.forget(r.run)
			r.ordinary = true
			retry = append(retry, m)
			continue
		}
		p := kn.plans[i]
		s.known.put(r.run, r.epoch, store.Head{Seq: store.Seq(p.headSeq), Hash: store.Digest(p.headHash)})
		r.recs = p.records()
		m.Answer(nil)
	}
	return retry
}

// forgetKnown drops what the store remembers of a group whose transaction
// failed, and sends its members the ordinary way; refused (a uniqueness
// refusal, whose member is not known) the careful way.
func (s *Store) forgetKnown(kn knownGroup, refused bool) {
	for _, m := range kn.members {
		s.known.forget(m.Req.run)
		if refused {
			m.Req.careful = true
		} else {
			m.Req.ordinary = true
		}
	}
}

// knownArgs are appendKnown's arguments for a group.
func (s *Store) knownArgs(kn knownGroup) []any {
	var runs runRows
	var recs recordCols
	n := len(kn.plans)
	prevSeq, prevHash, epochs := make([]int64, n), make([][]byte, n), make([]int64, n)
	for i, p := range kn.plans {
		runs.add(p.run.String(), p)
		recs.add(p)
		prevSeq[i], prevHash[i] = int64(kn.prev[i].Seq), kn.prev[i].Hash[:]
		epochs[i] = int64(kn.members[i].Req.epoch)
	}
	return append(runs.args(s.tenant), prevSeq, prevHash, epochs,
		recs.run, recs.seq, recs.kind, recs.caseID, recs.effect, recs.prev, recs.hash, recs.raw)
}

// send sends BEGIN, the queued statements and COMMIT (the last two queued)
// in one pipeline, hands the results before COMMIT's to read, and reads the
// COMMIT's. Like commit, it is not tied to ctx's cancellation once sent, a
// server error is a definite refusal, and losing the connection after
// sending is store.CommitUnknownError.
func (x *session) send(ctx context.Context, b *pgx.Batch, read func(br pgx.BatchResults) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), x.s.commitTO)
	defer cancel()
	br := x.conn.SendBatch(cctx, b)
	failure := read(br)
	if failure != nil {
		failure = x.classifyCommit(failure, false)
	} else {
		tag, err := br.Exec()
		if err == nil && tag.String() != "COMMIT" {
			err = pgx.ErrTxCommitRollback
		}
		if err != nil {
			failure = x.classifyCommit(err, true)
		}
	}
	if cerr := br.Close(); failure == nil && cerr != nil {
		failure = x.classifyCommit(cerr, true)
	}
	return failure
}
