package log

import (
	"context"
	"crypto/sha256"
	"math/rand/v2"
	"sync"
	"testing"
)

const bigSize = 1_000_000

var big struct {
	once  sync.Once
	store *MemStore
	err   error
}

// bigStore returns a MemStore holding bigSize leaves, built once per test
// binary in a single batched Append (the one-by-one path is covered by the
// smaller tests and by BenchmarkAppend).
func bigStore(tb testing.TB) (*MemStore, uint64) {
	tb.Helper()
	big.once.Do(func() {
		big.store = &MemStore{}
		_, big.err = Append(context.Background(), big.store, 0, leafValues(bigSize)...)
	})
	if big.err != nil {
		tb.Fatalf("building the %d-leaf store: %v", bigSize, big.err)
	}
	return big.store, bigSize
}

var sink Hash

// BenchmarkSHA256of65 is the ceiling: one interior node hash, the unit of
// work every operation below is made of.
func BenchmarkSHA256of65(b *testing.B) {
	var buf [65]byte
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		sink = sha256.Sum256(buf[:])
		buf[1] = sink[0]
	}
}

// BenchmarkAppend measures one leaf per op: appended one by one (one seal per
// transaction) and in batches of 1000 (group commit), each including the
// read of the compact range, the node writes and the new root.
func BenchmarkAppend(b *testing.B) {
	ctx := context.Background()
	b.Run("one-by-one", func(b *testing.B) {
		s := &MemStore{}
		var size uint64
		for b.Loop() {
			var err error
			if sink, err = Append(ctx, s, size, leafValue(size)); err != nil {
				b.Fatal(err)
			}
			size++
		}
	})
	b.Run("batch-1000", func(b *testing.B) {
		s := &MemStore{}
		vs := leafValues(1000)
		var size uint64
		for b.Loop() {
			var err error
			if sink, err = Append(ctx, s, size, vs...); err != nil {
				b.Fatal(err)
			}
			size += uint64(len(vs))
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(size), "ns/leaf")
	})
}

func BenchmarkRoot(b *testing.B) {
	ctx := context.Background()
	s, n := bigStore(b)
	for b.Loop() {
		var err error
		if sink, err = Root(ctx, s, n); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkInclusionProof(b *testing.B) {
	ctx := context.Background()
	s, n := bigStore(b)
	rnd := rand.New(rand.NewPCG(3, 4))
	for b.Loop() {
		if _, err := InclusionProof(ctx, s, rnd.Uint64N(n), n); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkConsistencyProof(b *testing.B) {
	ctx := context.Background()
	s, n := bigStore(b)
	rnd := rand.New(rand.NewPCG(5, 6))
	for b.Loop() {
		if _, err := ConsistencyProof(ctx, s, 1+rnd.Uint64N(n-1), n); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyInclusion(b *testing.B) {
	ctx := context.Background()
	s, n := bigStore(b)
	const i = 123_457
	root, _ := Root(ctx, s, n)
	p, err := InclusionProof(ctx, s, i, n)
	if err != nil {
		b.Fatal(err)
	}
	v := leafValue(i)
	b.ReportAllocs()
	for b.Loop() {
		if err := VerifyInclusion(v, i, n, p, root); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyConsistency(b *testing.B) {
	ctx := context.Background()
	s, n := bigStore(b)
	const m = 654_321
	oldRoot, _ := Root(ctx, s, m)
	root, _ := Root(ctx, s, n)
	p, err := ConsistencyProof(ctx, s, m, n)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := VerifyConsistency(m, n, oldRoot, root, p); err != nil {
			b.Fatal(err)
		}
	}
}
