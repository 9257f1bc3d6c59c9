package sqlite

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"

	"github.com/transparency-dev/merkle/compact"

	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// CreateSealedLog writes a NEW journal file at path whose default tenant
// holds n sealed runs, each with its run row, its leaf in the Merkle log and
// every log node, but no records: the shape proofs are served from, built
// in seconds instead of the hours n appends and seals would take. It is for
// benchmarks of proofs ("journal bench --proofs"); it refuses an existing
// file, and the tree it writes (nodes) is returned so a caller can count
// the node reads a proof needs. The file is written without fsync; it is a
// scratch file.
func CreateSealedLog(ctx context.Context, path string, n int) (runs []store.RunID, nodes log.NodeReader, err error) {
	if n < 1 {
		return nil, nil, &store.InvalidArgumentError{Field: "n", Detail: fmt.Sprintf("%d: must be at least 1", n)}
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, &store.InvalidArgumentError{Field: "path", Detail: fmt.Sprintf("%s exists; CreateSealedLog writes only a new file", path)}
	}
	s, err := Open(ctx, path, Options{})
	if err != nil {
		return nil, nil, err
	}
	tenant := s.tenant
	if err := s.Close(); err != nil {
		return nil, nil, err
	}
	tree := memTree{}
	runs = make([]store.RunID, n)
	leaves := make([]log.Hash, n)
	for i := range runs {
		var id store.RunID
		id[0], id[1] = 0x01, 0x90
		for b := range 8 {
			id[15-b] = byte(uint64(i+1) >> (8 * b))
		}
		runs[i] = id
		leaves[i] = sha256.Sum256(id[:])
	}
	const chunk = 1 << 16
	for lo := 0; lo < n; lo += chunk {
		if _, err := log.Append(ctx, tree, uint64(lo), leaves[lo:min(lo+chunk, n)]...); err != nil {
			return nil, nil, err
		}
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(OFF)&_pragma=cache_size(-262144)&_txlock=immediate")
	if err != nil {
		return nil, nil, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	const rows = 100
	insRuns := `INSERT INTO runs(tenant, run, head_seq, head_hash, active_at, outcome, outcome_ord, sealed_outcome, sealed_at, log_index, leaf) VALUES `
	runRow := "(?,?,2,?,0,'succeeded',0,'succeeded',0,?,?)"
	insNodes := `INSERT INTO log_nodes(tenant, level, idx, hash) VALUES `
	nodeRow := "(?,?,?,?)"
	var runArgs, nodeArgs []any
	for i, r := range runs {
		runArgs = append(runArgs, tenant, r.String(), leaves[i][:], int64(i), leaves[i][:])
	}
	// Rows go in in key order: a b-tree filled in order writes each page
	// once, in random order it rewrites pages out of a small cache.
	ids := slices.SortedFunc(maps.Keys(tree), func(a, b compact.NodeID) int {
		return cmp.Or(cmp.Compare(a.Level, b.Level), cmp.Compare(a.Index, b.Index))
	})
	for _, id := range ids {
		h := tree[id]
		nodeArgs = append(nodeArgs, tenant, int64(id.Level), int64(id.Index), h[:])
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	defer tx.Rollback()
	for _, w := range []struct {
		q1, qn string
		width  int
		args   []any
	}{
		{insRuns + runRow, insRuns + repeatRows(runRow, rows), 5, runArgs},
		{insNodes + nodeRow, insNodes + repeatRows(nodeRow, rows), 4, nodeArgs},
	} {
		stN, err := tx.PrepareContext(ctx, w.qn)
		if err != nil {
			return nil, nil, err
		}
		args := w.args
		for ; len(args) >= rows*w.width; args = args[rows*w.width:] {
			if _, err := stN.ExecContext(ctx, args[:rows*w.width]...); err != nil {
				return nil, nil, fmt.Errorf("bulk insert: %w", err)
			}
		}
		stN.Close()
		for ; len(args) > 0; args = args[w.width:] {
			if _, err := tx.ExecContext(ctx, w.q1, args[:w.width]...); err != nil {
				return nil, nil, fmt.Errorf("bulk insert: %w", err)
			}
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO logs(tenant, size) VALUES(?,?) ON CONFLICT(tenant) DO UPDATE SET size=excluded.size`, tenant, int64(n)); err != nil {
		return nil, nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, nil, err
	}
	if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return nil, nil, err
	}
	return runs, tree, nil
}

// memTree is a log node store in a map, which CreateSealedLog can range
// over.
type memTree map[compact.NodeID]log.Hash

func (t memTree) ReadNodes(_ context.Context, ids []compact.NodeID) ([]log.Hash, error) {
	out := make([]log.Hash, len(ids))
	for i, id := range ids {
		h, ok := t[id]
		if !ok {
			return nil, &log.NodeNotFoundError{ID: id}
		}
		out[i] = h
	}
	return out, nil
}

func (t memTree) WriteNodes(_ context.Context, ns []log.Node) error {
	for _, nd := range ns {
		t[nd.ID] = nd.Hash
	}
	return nil
}
