package storetest

import (
	"context"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// StatementCounter is a store whose proofs count the statements they run,
// as both backends do (ProofRoundTrips).
type StatementCounter interface {
	InclusionProofAt(ctx context.Context, run store.RunID, size uint64) (*store.Inclusion, error)
	ConsistencyProof(ctx context.Context, oldSize, newSize uint64) ([]store.Digest, error)
	ProofRoundTrips() uint64
}

// CheckProofStatements asks s, whose log is runs in order (tree holds the
// same nodes), for an inclusion proof of every run at the committed size
// and at past sizes (its own size and the next, 513 and 1000 where they
// hold it), and a consistency proof from every smaller size to the
// committed one. Each must verify with x/mod's tlog against roots computed
// from tree, and cost exactly inclusion or consistency statements: the
// backend's promise of one round trip per proof once its node cache is
// warm.
func CheckProofStatements(tb testing.TB, s StatementCounter, runs []store.RunID, tree log.NodeReader, inclusion, consistency uint64) {
	tb.Helper()
	ctx := context.Background()
	n := uint64(len(runs))
	roots := map[uint64]tlog.Hash{}
	root := func(size uint64) tlog.Hash {
		if h, ok := roots[size]; ok {
			return h
		}
		h, err := log.Root(ctx, tree, size)
		if err != nil {
			tb.Fatal(err)
		}
		roots[size] = tlog.Hash(h)
		return roots[size]
	}
	stmts := func(what string, want uint64, fn func() error) {
		tb.Helper()
		before := s.ProofRoundTrips()
		if err := fn(); err != nil {
			tb.Fatalf("%s: %v", what, err)
		}
		if got := s.ProofRoundTrips() - before; got != want {
			tb.Fatalf("%s: %d statements, want %d", what, got, want)
		}
	}
	for i, run := range runs {
		for _, at := range []uint64{n, uint64(i) + 1, uint64(i) + 2, 513, 1000} {
			if at <= uint64(i) || at > n {
				continue
			}
			stmts("inclusion", inclusion, func() error {
				inc, err := s.InclusionProofAt(ctx, run, at)
				if err != nil || inc == nil {
					tb.Fatalf("inclusion of run %d at %d: %+v %v", i, at, inc, err)
				}
				p := make(tlog.RecordProof, len(inc.Proof))
				for k, d := range inc.Proof {
					p[k] = tlog.Hash(d)
				}
				return tlog.CheckRecord(p, int64(at), root(at), int64(i), tlog.RecordHash(inc.Leaf[:]))
			})
		}
	}
	for old := uint64(1); old < n; old++ {
		stmts("consistency", consistency, func() error {
			proof, err := s.ConsistencyProof(ctx, old, n)
			if err != nil {
				tb.Fatalf("consistency %d..%d: %v", old, n, err)
			}
			p := make(tlog.TreeProof, len(proof))
			for k, d := range proof {
				p[k] = tlog.Hash(d)
			}
			return tlog.CheckTree(p, int64(n), root(n), int64(old), root(old))
		})
	}
}
