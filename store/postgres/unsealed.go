package postgres

import (
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/runseal/runseal/store"
)

// A run whose seal columns were set back to NULL by editing the database
// still has its leaf in the log (store/unsealed.go). The log's leaves are
// found by their hash through log_leaf_hashes, an index of the level-0 rows
// of log_nodes that PostgreSQL keeps with the table, and the leaf hash is
// computed in the statement (sha256 of 0x00 and the leaf value). Every
// write that reads a run under its lock reads, with the row, the log index
// of its head when the row is open (runStateCols), and planAppend and
// decideSeal refuse it (writable); a group of remembered runs moves a head
// only if the log does not hold it (appendKnown); Verify reads, in its
// snapshot, every record of the run the log holds (runLeaves).

// leafHashesSchema indexes the log's leaves by hash; building it reads the
// leaves an older database already holds, and writes to log_nodes wait for
// it. On a large log an operator may build it beforehand without blocking
// writers (CREATE INDEX CONCURRENTLY log_leaf_hashes ON
// <schema>.log_nodes(tenant, hash) WHERE level = 0), and the migration then
// keeps it (IF NOT EXISTS), as it does the proofs' covering indexes.
const leafHashesSchema = `
CREATE INDEX IF NOT EXISTS log_leaf_hashes ON {S}.log_nodes(tenant, hash) WHERE level = 0;
`

// leafOf is a subquery of col of the tenant's ($1) log leaf whose value is
// the expression value, through log_leaf_hashes.
func leafOf(value, col string) string {
	return `(SELECT ` + col + ` FROM {S}.log_nodes n WHERE n.tenant = $1 AND n.level = 0 AND n.hash = sha256('\x00'::bytea || ` + value + `) ORDER BY n.idx LIMIT 1)`
}

// runStateCols are the columns of a run a write reads under its lock
// (readRunStates): the last is the log index of the run's head when the
// row says the run is open and the log holds it, otherwise NULL.
var runStateCols = "run, head_seq, head_hash, outcome, sealed_outcome, leaf, log_index, CASE WHEN sealed_outcome IS NULL THEN " +
	leafOf("head_hash", "n.idx") + " END AS logged"

// writable refuses a write to run, whose row says it is open, when the log
// holds its head (store.LoggedUnsealed).
func (st runState) writable(run store.RunID) error {
	if st.sealedOutcome == nil && st.logged != nil && *st.logged >= 0 {
		return store.LoggedUnsealed(run, st.head.Seq, uint64(*st.logged))
	}
	return nil
}

// readRunLeaves reads the answer of runLeaves into leaves.
func readRunLeaves(br pgx.BatchResults, leaves *[]store.LeafAt) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var seq, idx int64
		if err := rows.Scan(&seq, &idx); err != nil {
			return err
		}
		if seq < 1 || idx < 0 {
			return &store.CorruptError{Detail: fmt.Sprintf("log leaf %d holds a record at seq %d", idx, seq)}
		}
		*leaves = append(*leaves, store.LeafAt{Seq: store.Seq(seq), Index: uint64(idx)})
	}
	return rows.Err()
}
