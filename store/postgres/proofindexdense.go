package postgres

// denseProofIndexesSchema is the migration step that packs the two
// covering indexes of inclusion proofs (proofindex.go) full: fillfactor
// 100, where a B-tree leaves 10% of each leaf page free by default.
//
// An inclusion proof reads one leaf page of each, and at 10^6 sealed runs
// the two are larger than PostgreSQL's default 128 MB of shared buffers,
// so a proof reads some of its pages from the kernel (from its page cache
// if it still holds them, else from the disk: the slow 1% of proofs, see
// the proof benchmark's tail). Packed, they are 107 and 74 MB instead of
// 118 and 82 at 10^6, and a proof of a long-running server reads 0.57
// pages from outside the buffers instead of 0.72 (BenchmarkProofs, 128 MB
// of buffers). The free space is for inserts between existing keys, which
// these indexes hardly get: log_leaves is appended to in index order, and
// runs_proof gains a run when it is sealed, in roughly the order of the
// run ids (ULIDs, which begin with their creation time); an insert at the
// right edge of a B-tree splits its last page at the fillfactor, so the
// setting keeps new pages packed too.
//
// Each index is rebuilt only if it is not packed yet, in the migration's
// transaction. REINDEX locks the index exclusively until that transaction
// commits, and every statement on runs or log_nodes locks their indexes
// when it is planned, so reads of those tables wait as well as writes
// (another process on the schema included): about 6 s at 10^6 sealed runs.
// An operator of a much larger log can first run, for each index, ALTER
// INDEX ... SET (fillfactor = 100) and REINDEX INDEX CONCURRENTLY, which
// blocks neither; the migration then finds it packed and leaves it.
const denseProofIndexesSchema = `
DO $$
DECLARE
	i text;
BEGIN
	FOREACH i IN ARRAY ARRAY['runs_proof', 'log_leaves'] LOOP
		IF NOT EXISTS (SELECT 1 FROM pg_class c
				WHERE c.oid = format('%s.%I', '{S}', i)::regclass AND 'fillfactor=100' = ANY(c.reloptions)) THEN
			EXECUTE format('ALTER INDEX %s.%I SET (fillfactor = 100)', '{S}', i);
			EXECUTE format('REINDEX INDEX %s.%I', '{S}', i);
		END IF;
	END LOOP;
END
$$;
`
