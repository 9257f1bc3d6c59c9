package sqlite

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// synthLog writes a log of n sealed runs straight into the file's tables
// (runs without records: VerifyLog reads the seal columns, not the chains),
// with a signed checkpoint at n.
func synthLog(tb testing.TB, n int) *Store {
	tb.Helper()
	ctx := context.Background()
	path := filepath.Join(tb.TempDir(), "bench.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	leaves := make([]log.Hash, n)
	err = s.write(ctx, func(tx *sql.Tx) error {
		for i := range leaves {
			leaves[i] = sha256.Sum256([]byte{byte(i), byte(i >> 8), byte(i >> 16), byte(i >> 24)})
			if _, err := tx.Exec(`INSERT INTO runs(tenant, run, head_seq, head_hash, active_at, sealed_outcome, sealed_at, log_index, leaf)
				VALUES('default', ?, 1, ?, 0, 'succeeded', 0, ?, ?)`, store.NewRunID().String(), leaves[i][:], i, leaves[i][:]); err != nil {
				return err
			}
		}
		root, err := log.Append(ctx, nodes{q: tx, exec: tx.ExecContext, tenant: "default"}, 0, leaves...)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(`INSERT INTO logs(tenant, size) VALUES('default', ?)`, n); err != nil {
			return err
		}
		_, err = tx.Exec(`INSERT INTO signed_checkpoints(tenant, size, root, note, signed_at) VALUES('default', ?, ?, ?, 0)`,
			n, root[:], fakeNote(s.Origin(), uint64(n), root))
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func fakeNote(origin string, size uint64, root log.Hash) []byte {
	cp := checkpoint.Checkpoint{Origin: origin, Size: size, Root: root}
	return append(cp.Marshal(), "\n\u2014 bench AAAA\n"...)
}

// BenchmarkVerifyLog walks a log of 20,000 sealed runs (about 40,000 stored
// nodes) per op, beside two ceilings in the same run: reading the same rows
// (every leaf row with its node, every interior node with its two children)
// without checking them, and one plain scan of every node and every run. It reports the heap in use after
// the walk, which stays flat as the log grows (the walk streams).
func BenchmarkVerifyLog(b *testing.B) {
	const n = 20_000
	s := synthLog(b, n)
	ctx := context.Background()
	b.Run("verify", func(b *testing.B) {
		var ms runtime.MemStats
		for b.Loop() {
			rep, err := s.VerifyLog(ctx)
			if err != nil || rep.Size != n {
				b.Fatalf("VerifyLog = %+v, %v", rep, err)
			}
		}
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/leaf")
		b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
	})
	b.Run("ceiling-read-rows", func(b *testing.B) {
		for b.Loop() {
			err := s.readTx(ctx, func(tx *sql.Tx) error {
				src := logSource{nodes: s.reader(tx), s: s, tx: tx}
				if err := src.Leaves(ctx, func(store.LeafRow) error { return nil }); err != nil {
					return err
				}
				for level := 1; n>>level > 0; level++ {
					if err := src.Level(ctx, level, func(store.NodeRow) error { return nil }); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/leaf")
	})
	b.Run("ceiling-scan", func(b *testing.B) {
		for b.Loop() {
			for _, q := range []string{`SELECT hash FROM log_nodes WHERE tenant = 'default'`, `SELECT leaf FROM runs WHERE tenant = 'default'`} {
				rows, err := s.rdb.QueryContext(ctx, q)
				if err != nil {
					b.Fatal(err)
				}
				for rows.Next() {
					var h []byte
					if err := rows.Scan(&h); err != nil {
						b.Fatal(err)
					}
				}
				rows.Close()
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/leaf")
	})
}
