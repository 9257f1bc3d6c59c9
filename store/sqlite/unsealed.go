package sqlite

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// A run whose seal columns were set back to NULL by editing the file still
// has its leaf in the log (store/unsealed.go). The log's leaves are found
// by their hash through log_leaf_hashes, an index of the level-0 rows of
// log_nodes that SQLite keeps with the table: it cannot disagree with the
// log without an edit of the log itself, which breaks the root that the
// checkpoints sign. Every write to an open run that the writer read
// (append, atomic append, seal, bulk) looks up its head there
// (refuseLogged); a run the writer remembers is looked up by the
// statement that moves its head (moveKnownWhere); Verify looks up every
// record of the run (runLeaves).

// leafIndex is the partial index of the log's leaves by hash. CREATE INDEX
// IF NOT EXISTS builds it over the leaves an older file already holds.
const leafIndex = `CREATE INDEX IF NOT EXISTS log_leaf_hashes ON log_nodes(tenant, hash) WHERE level = 0;
`

// qLeafIndex finds the log index of a leaf of the tenant's log by its
// leaf hash.
const qLeafIndex = `SELECT idx FROM log_nodes WHERE tenant=? AND level=0 AND hash=? ORDER BY idx LIMIT 1`

// checkWritable refuses a write to a run that is sealed, by its row or,
// for an existing run whose row says it is open, by the log (refuseLogged).
func (s *Store) checkWritable(ctx context.Context, q querier, run store.RunID, st runState) error {
	if st.sealedOutcome.Valid {
		return &store.RunSealedError{Run: run, Outcome: st.sealedOutcome.String}
	}
	if !st.exists {
		return nil
	}
	return s.refuseLogged(ctx, q, run, st.head)
}

// refuseLogged refuses a write to a run whose row says it is open when the
// log holds its head as a leaf: the run was sealed, and its seal columns
// were edited away (store.LoggedUnsealed).
func (s *Store) refuseLogged(ctx context.Context, q querier, run store.RunID, head store.Head) error {
	h := log.LeafHash(log.Hash(head.Hash))
	var idx int64
	err := s.queryRow(ctx, q, qLeafIndex, s.tenant, h[:]).Scan(&idx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up run %s's head in the log: %w", run, err)
	}
	return store.LoggedUnsealed(run, head.Seq, uint64(idx))
}

// runLeaves collects, for Verify, the records of one run that the log
// holds as leaves, looking their leaf hashes up in chunks as the chain is
// read, so its memory is bounded whatever the run's length.
type runLeaves struct {
	s      *Store
	tx     *sql.Tx
	hashes []log.Hash
	seqs   map[log.Hash]store.Seq
	list   []byte // the JSON array of the hashes' hex, for qRunLeaves
	found  []store.LeafAt
}

// runLeavesChunk is how many records one lookup asks about.
const runLeavesChunk = 256

func (s *Store) runLeaves(tx *sql.Tx) *runLeaves {
	return &runLeaves{s: s, tx: tx, seqs: map[log.Hash]store.Seq{}} // most runs are short: grown as needed
}

// qRunLeaves finds the tenant's leaves among the leaf hashes of a JSON
// array of hex strings: one statement, prepared once on the read pool
// (readQueries), whatever the number of hashes. CROSS JOIN keeps the
// hashes the outer loop: left to choose, SQLite scans every leaf of the
// tenant and probes the array.
const qRunLeaves = `SELECT n.hash, n.idx FROM json_each(?) q CROSS JOIN log_nodes n WHERE n.tenant = ? AND n.level = 0 AND n.hash = unhex(q.value)`

// add notes record r, and looks the chunk up when it is full.
func (f *runLeaves) add(ctx context.Context, r store.Record) error {
	h := log.LeafHash(log.Hash(r.Hash))
	f.hashes = append(f.hashes, h)
	f.seqs[h] = r.Seq
	if len(f.hashes) < runLeavesChunk {
		return nil
	}
	return f.flush(ctx)
}

// flush looks up the records noted since the last lookup.
func (f *runLeaves) flush(ctx context.Context) error {
	if len(f.hashes) == 0 {
		return nil
	}
	f.list = append(f.list[:0], '[')
	for i := range f.hashes {
		if i > 0 {
			f.list = append(f.list, ',')
		}
		f.list = append(hex.AppendEncode(append(f.list, '"'), f.hashes[i][:]), '"')
	}
	f.list = append(f.list, ']')
	rows, err := f.s.query(ctx, f.tx, qRunLeaves, string(f.list), f.s.tenant)
	if err != nil {
		return fmt.Errorf("look up records in the log: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var h []byte
		var idx int64
		if err := rows.Scan(&h, &idx); err != nil {
			return fmt.Errorf("look up records in the log: %w", err)
		}
		seq, ok := f.seqs[log.Hash(h)]
		if !ok || idx < 0 {
			return fmt.Errorf("look up records in the log: unasked leaf %x at %d", h, idx)
		}
		f.found = append(f.found, store.LeafAt{Seq: seq, Index: uint64(idx)})
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("look up records in the log: %w", err)
	}
	f.hashes = f.hashes[:0]
	clear(f.seqs)
	return nil
}

// check looks up the last records and judges what was found
// (store.CheckRunLeaves) against the run's row st.
func (f *runLeaves) check(ctx context.Context, run store.RunID, st runState) error {
	if err := f.flush(ctx); err != nil {
		return err
	}
	var index *int64
	if st.logIndex.Valid {
		index = &st.logIndex.Int64
	}
	return store.CheckRunLeaves(run, st.head, st.sealedOutcome.Valid, index, f.found)
}
