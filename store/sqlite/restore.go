package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// AppendBulk implements store.BulkWriter: the appends go to the writer as
// one member of its group commit, and are decided and written by the same
// code as a group of concurrent Appends (appendTenantBatch), so every check
// of Append holds. A refusal of any member rolls back the member, which is
// the whole call.
func (s *Store) AppendBulk(ctx context.Context, appends []store.BulkAppend) ([][]store.Record, error) {
	reqs := make([]*appendReq, len(appends))
	for i, a := range appends {
		parsed, err := store.ParseBatch(a.Epoch, a.Batch)
		if err != nil {
			return nil, fmt.Errorf("bulk append %d: %w", i, err)
		}
		reqs[i] = &appendReq{s: s, run: parsed.Run(), epoch: a.Epoch, parsed: parsed}
	}
	if err := store.CheckBulk(len(reqs), func(i int) store.RunID { return reqs[i].run }); err != nil {
		return nil, err
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		// Read, and not remembered (known.go): a bulk append is rare, of
		// many runs, mostly new ones.
		refusals, err := s.appendTenantBatch(context.Background(), tx, reqs, false)
		if err != nil {
			return err
		}
		for _, err := range refusals {
			if err != nil {
				return err
			}
		}
		// As a group of Appends does (appendBatch): a restore of many
		// runs would otherwise leave every key it wrote in
		// record_keys_hot, which each read scans.
		return s.mergeKeysIfDue(context.Background(), tx)
	})
	if err != nil {
		return nil, err
	}
	out := make([][]store.Record, len(reqs))
	for i, r := range reqs {
		out[i] = r.out
	}
	return out, nil
}

// SealBulk implements store.BulkWriter: each seal is decided as Seal
// decides it (sealRun), the new leaves enter the tree together and the log
// grows once, in one member of the writer's group commit.
func (s *Store) SealBulk(ctx context.Context, seals []store.BulkSeal) ([]store.Digest, error) {
	for _, b := range seals {
		if err := store.CheckSeal(b.Epoch, b.Outcome); err != nil {
			return nil, err
		}
	}
	if err := store.CheckBulk(len(seals), func(i int) store.RunID { return seals[i].Run }); err != nil {
		return nil, err
	}
	out := make([]store.Digest, len(seals))
	err := s.write(ctx, func(tx *sql.Tx) error {
		bg := context.Background()
		size, err := s.logSize(bg, tx)
		if err != nil {
			return err
		}
		states, err := s.loadSealStates(bg, tx, seals)
		if err != nil {
			return err
		}
		stmts := &txStmts{tx: tx}
		defer stmts.close()
		var leaves []log.Hash
		for i, b := range seals {
			st := states[i]
			var fence error
			if st.leased && st.epoch != b.Epoch {
				fence = &store.FencedError{Run: b.Run, Held: b.Epoch, Current: st.epoch}
			}
			leaf, fresh, err := s.sealRun(bg, tx, stmts.exec, b.Run, b.Epoch, b.Outcome, size+uint64(len(leaves)), st.runState, fence)
			if err != nil {
				return err
			}
			if err := b.CheckLeaf(leaf); err != nil {
				return err
			}
			out[i] = leaf
			if fresh {
				leaves = append(leaves, log.Hash(leaf))
			}
		}
		if len(leaves) == 0 {
			return nil
		}
		w := nodes{q: tx, exec: stmts.exec, tenant: s.tenant}
		if _, err := log.Append(bg, w, size, leaves...); err != nil {
			return fmt.Errorf("append leaves %d to %d: %w", size, size+uint64(len(leaves)), err)
		}
		return s.setLogSize(bg, tx, size+uint64(len(leaves)))
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// sealState is a run's state and lease epoch, as SealBulk reads them.
type sealState struct {
	runState
	leased bool
	epoch  store.Epoch
}

// qSealStates reads the state and lease of the runs named in a JSON array,
// in the array's order (the LEFT JOINs keep json_each the outer loop).
const qSealStates = `SELECT q.value, r.head_seq, r.head_hash, r.outcome, r.sealed_outcome, r.leaf, l.epoch FROM json_each(?) q
	LEFT JOIN runs r ON r.tenant=? AND r.run=q.value
	LEFT JOIN leases l ON l.tenant=? AND l.run=q.value ORDER BY q.key`

// loadSealStates reads every sealed run's state in one statement, where
// Seal reads two rows per run.
func (s *Store) loadSealStates(ctx context.Context, tx *sql.Tx, seals []store.BulkSeal) ([]sealState, error) {
	list := []byte{'['}
	for i, b := range seals {
		if i > 0 {
			list = append(list, ',')
		}
		list = append(append(append(list, '"'), b.Run.String()...), '"') // a run id needs no escaping
	}
	list = append(list, ']')
	rows, err := tx.QueryContext(ctx, qSealStates, string(list), s.tenant, s.tenant)
	if err != nil {
		return nil, fmt.Errorf("read runs to seal: %w", err)
	}
	defer rows.Close()
	out := make([]sealState, 0, len(seals))
	for rows.Next() {
		var id string
		var seq, epoch sql.NullInt64
		var hash []byte
		var st sealState
		if err := rows.Scan(&id, &seq, &hash, &st.outcome, &st.sealedOutcome, &st.leaf, &epoch); err != nil {
			return nil, fmt.Errorf("read runs to seal: %w", err)
		}
		i := len(out)
		if i >= len(seals) || id != seals[i].Run.String() {
			return nil, fmt.Errorf("read runs to seal: row %d names run %q", i, id)
		}
		if seq.Valid {
			if len(hash) != 32 || seq.Int64 < 1 {
				return nil, &store.CorruptError{Run: seals[i].Run, Detail: "run head row is malformed"}
			}
			st.exists = true
			st.head = store.Head{Seq: store.Seq(seq.Int64), Hash: store.Digest(hash)}
		}
		if epoch.Valid {
			st.leased, st.epoch = true, store.Epoch(epoch.Int64)
		}
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read runs to seal: %w", err)
	}
	if len(out) != len(seals) {
		return nil, fmt.Errorf("read runs to seal: %d rows for %d runs", len(out), len(seals))
	}
	return out, nil
}

// txStmts prepares each statement once in a transaction that runs it
// hundreds of times: preparing is most of a small statement's cost.
type txStmts struct {
	tx *sql.Tx
	m  map[string]*sql.Stmt
}

func (c *txStmts) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st := c.m[query]
	if st == nil {
		var err error
		if st, err = c.tx.PrepareContext(ctx, query); err != nil {
			return nil, err
		}
		if c.m == nil {
			c.m = map[string]*sql.Stmt{}
		}
		c.m[query] = st
	}
	return st.ExecContext(ctx, args...)
}

func (c *txStmts) close() {
	for _, st := range c.m {
		st.Close()
	}
}

var _ store.BulkWriter = (*Store)(nil)
