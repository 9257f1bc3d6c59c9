package postgres

// proofIndexesSchema is the migration step that gives an inclusion proof
// two index-only lookups in place of two index scans and their heap
// fetches (see runInLogSQL).
//
// An inclusion proof reads the run's log position and leaf, and the log's
// leaf node at that position, to check the one against the other (see
// store.RunInLog). Through the primary keys that is four pages spread over
// both tables, at 10^6 sealed runs about 535 MB (the runs B-tree and heap,
// the level-0 part of the log_nodes B-tree and the heap, where leaves sit
// among the nodes above them): on a server with PostgreSQL's default 128 MB
// of shared buffers almost every proof read three or four of them from the
// kernel, or from the disk, which is where its p99 went.
//
// runs_proof holds each sealed run's position and leaf in the index entry
// itself, and log_leaves each leaf node's hash: one leaf page of each per
// proof, 118 MB and 82 MB at 10^6 (tenant "proofs1000000"; 107 and 74
// once packed by migration 8, proofindexdense.go), and no heap
// page where the visibility map says the page is all-visible. In the warm
// pass of the proof benchmark at 10^6 (BenchmarkProofs, 128 MB of
// buffers) a proof then reads 0.8 pages from outside the buffers, where
// it read 2.4; level-0 tiles and the node cache's fill read log_leaves too
// (LogNodes). That is
// so for a sealed run's row once autovacuum has passed (the row no longer
// changes after its seal) and for log nodes, which are only ever inserted
// (insert-triggered autovacuum, PostgreSQL 13 and later, sets the map);
// until then the scan reads the heap page as before, so a proof of a run
// sealed moments ago costs what it did. Both are partial: unsealed runs and
// the nodes above level 0 are not in them.
//
// They are derived by PostgreSQL from the rows in the same transaction as
// the rows, so both write paths (Seal and a restore's bulk seal) keep them
// without a statement of their own, and they cannot disagree with the
// tables they index. Each costs a seal one more index entry; the seal's
// update of the run's row was already not a HOT update (log_index is
// indexed by runs_log).
//
// The migration builds both in its transaction, which holds off writes to
// runs and log_nodes while it runs: seconds at 10^6 sealed runs. An
// operator of a much larger log can build them first without blocking
// writers, with CREATE INDEX CONCURRENTLY and these exact definitions and
// names, and the migration then keeps them (IF NOT EXISTS).
const proofIndexesSchema = `
CREATE INDEX IF NOT EXISTS runs_proof ON {S}.runs(tenant, run) INCLUDE (log_index, leaf) WHERE log_index IS NOT NULL;
CREATE INDEX IF NOT EXISTS log_leaves ON {S}.log_nodes(tenant, idx) INCLUDE (hash) WHERE level = 0;
`
