//go:build unix

package tiles

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/compact"
	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// arrayLog is a Source over every tree level held as an array (level h:
// the hashes of the complete subtrees of 2^h leaves), 64 MB for 10^6
// leaves, so that reading any stored node costs what a lookup costs.
type arrayLog struct {
	leaves []log.Hash
	all    [][]log.Hash
	signer note.Signer
	origin string
	latest *store.SignedCheckpoint
	cr     *compact.Range
}

func newArrayLog(b testing.TB) *arrayLog {
	m := newMemLog(b)
	return &arrayLog{signer: m.signer, origin: m.origin, all: [][]log.Hash{nil}, cr: rangeFactory.NewEmptyRange(0)}
}

func (a *arrayLog) grow(b testing.TB, n int) {
	for range n {
		v := leafValue(uint64(len(a.leaves)))
		a.leaves = append(a.leaves, v)
		lh := log.LeafHash(v)
		a.all[0] = append(a.all[0], lh)
		a.cr.Append(lh[:], nil)
	}
	for h := 0; len(a.all[h]) >= 2; h++ {
		if h+1 == len(a.all) {
			a.all = append(a.all, nil)
		}
		for i := len(a.all[h+1]); 2*i+1 < len(a.all[h]); i++ {
			a.all[h+1] = append(a.all[h+1], log.Hash(hashChildren(a.all[h][2*i][:], a.all[h][2*i+1][:])))
		}
	}
	root, err := a.cr.GetRootHash(nil)
	if err != nil {
		b.Fatal(err)
	}
	cp := checkpoint.Checkpoint{Origin: a.origin, Size: uint64(len(a.leaves)), Root: log.Hash(root)}
	msg, err := note.Sign(&note.Note{Text: string(cp.Marshal())}, a.signer)
	if err != nil {
		b.Fatal(err)
	}
	a.latest = &store.SignedCheckpoint{Size: cp.Size, Root: store.Digest(root), Note: msg}
}

func (a *arrayLog) root() log.Hash { return log.Hash(a.latest.Root) }

func (a *arrayLog) LatestCheckpoint(context.Context) (*store.SignedCheckpoint, error) {
	return a.latest, nil
}
func (a *arrayLog) LatestWitnessed(context.Context) (*store.SignedCheckpoint, error) { return nil, nil }
func (a *arrayLog) LogLeaves(_ context.Context, start, end uint64) ([]store.Digest, error) {
	out := make([]store.Digest, 0, end-start)
	for _, l := range a.leaves[start:end] {
		out = append(out, store.Digest(l))
	}
	return out, nil
}
func (a *arrayLog) LogNodes(_ context.Context, level uint, start, end uint64) ([]store.Digest, error) {
	out := make([]store.Digest, 0, end-start)
	for _, h := range a.all[level][start:end] {
		out = append(out, store.Digest(h))
	}
	return out, nil
}

// memFetcher serves a layout from memory, counting fetches.
type memFetcher struct {
	l    *Log
	size uint64
}

func (m memFetcher) Fetch(ctx context.Context, p string) ([]byte, error) {
	r, err := ParsePath(p)
	if err != nil {
		return nil, err
	}
	return m.l.Resource(ctx, r, m.size)
}

// cpuTime is this process's user and system CPU time: on a machine shared
// with other work, wall time per operation measures the contention, CPU
// time the operation.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports CPU microseconds per op since start.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64((cpuTime()-start).Microseconds())/float64(b.N), "cpu-us/op")
}

var (
	benchOnce sync.Once
	benchLog  *arrayLog
)

const benchSize = 1_000_000

func millionLeaves(b *testing.B) *arrayLog {
	benchOnce.Do(func() {
		benchLog = newArrayLog(b)
		benchLog.grow(b, benchSize)
	})
	return benchLog
}

// BenchmarkInclusionProof builds and verifies inclusion proofs at 10^6
// leaves from tiles: cold (a fresh tree and no cache per proof: every tile
// fetched), with a tile cache shared across trees (an auditor checking
// many runs), and the ceiling: the same proof read straight from the node
// store with no tiles, no fetching and no authentication. Run with
// -count to alternate them.
func BenchmarkInclusionProof(b *testing.B) {
	a := millionLeaves(b)
	ctx := context.Background()
	f := memFetcher{l: NewLog(a), size: benchSize}
	root := a.root()
	idx := func(i int) uint64 { return uint64(i) * 7919 % benchSize }
	b.Run("tiles-cold", func(b *testing.B) {
		defer reportCPU(b, cpuTime())
		fetches := 0
		for i := 0; b.Loop(); i++ {
			t := NewTree(benchSize, root, f, nil)
			p, err := t.InclusionProof(ctx, idx(i))
			if err != nil {
				b.Fatal(err)
			}
			if err := log.VerifyInclusion(leafValue(idx(i)), idx(i), benchSize, p, root); err != nil {
				b.Fatal(err)
			}
			fetches += t.Fetches
		}
		b.ReportMetric(float64(fetches)/float64(b.N), "tiles/proof")
	})
	b.Run("tiles-cached", func(b *testing.B) {
		defer reportCPU(b, cpuTime())
		cache := NewCache(8192)
		fetches := 0
		for i := 0; b.Loop(); i++ {
			t := NewTree(benchSize, root, f, cache)
			p, err := t.InclusionProof(ctx, idx(i))
			if err != nil {
				b.Fatal(err)
			}
			if err := log.VerifyInclusion(leafValue(idx(i)), idx(i), benchSize, p, root); err != nil {
				b.Fatal(err)
			}
			fetches += t.Fetches
		}
		b.ReportMetric(float64(fetches)/float64(b.N), "tiles/proof")
	})
	b.Run("ceiling-nodestore", func(b *testing.B) {
		defer reportCPU(b, cpuTime())
		nr := nodeReader{src: a}
		for i := 0; b.Loop(); i++ {
			p, err := log.InclusionProof(ctx, nr, idx(i), benchSize)
			if err != nil {
				b.Fatal(err)
			}
			if err := log.VerifyInclusion(leafValue(idx(i)), idx(i), benchSize, p, root); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSync writes the layout of 10^6 leaves into an empty directory,
// then one incremental sync after 1,000 more leaves; the ceiling writes the
// same number of files of the same sizes with the same write, fsync,
// rename and directory fsync, and nothing else. The source is in memory,
// so this measures the layout writing, not a database's reads.
func BenchmarkSync(b *testing.B) {
	if testing.Short() {
		b.Skip("writes 10^6 leaves of tiles")
	}
	ctx := context.Background()
	b.StopTimer()
	for range b.N {
		a := newArrayLog(b)
		a.grow(b, benchSize)
		dir := b.TempDir()
		b.StartTimer()
		t0 := time.Now()
		res, err := Sync(ctx, NewLog(a), dir, SyncOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		full := time.Since(t0)
		a.grow(b, 1000)
		b.StartTimer()
		t1 := time.Now()
		res2, err := Sync(ctx, NewLog(a), dir, SyncOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		inc := time.Since(t1)
		b.ReportMetric(float64(benchSize)/full.Seconds(), "leaves/s-from-empty")
		b.ReportMetric(float64(res.Tiles+res.Bundles), "files-from-empty")
		b.ReportMetric(float64(inc.Milliseconds()), "ms-incremental-1000")
		b.ReportMetric(float64(res2.Tiles+res2.Bundles), "files-incremental")

		// Proofs from the directory, as 'auditor inclusion --tiles DIR'
		// builds them: a cold tree per proof, every tile read from disk.
		size, root := a.latest.Size, a.root()
		const proofs = 200
		fetches := 0
		t3 := time.Now()
		for i := range proofs {
			idx := uint64(i) * 7919 % size
			tr := NewTree(size, root, DirFetcher{dir}, nil)
			p, err := tr.InclusionProof(ctx, idx)
			if err != nil {
				b.Fatal(err)
			}
			if err := log.VerifyInclusion(leafValue(idx), idx, size, p, root); err != nil {
				b.Fatal(err)
			}
			fetches += tr.Fetches
		}
		b.ReportMetric(float64(time.Since(t3).Microseconds())/proofs, "us/proof-from-dir-cold")
		b.ReportMetric(float64(fetches)/proofs, "tiles/proof-from-dir")

		// Ceiling: the same files, bytes and fsyncs, no reading or hashing.
		cdir := b.TempDir()
		w, err := openDirWriter(cdir, "", nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t2 := time.Now()
		buf := make([]byte, FullTileSize)
		for _, r := range Refs(benchSize, 0) {
			if err := w.write(r.Path(), buf[:min(len(buf), r.W*34)]); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.syncDirs(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		w.close()
		ceil := time.Since(t2)
		b.ReportMetric(float64(benchSize)/ceil.Seconds(), "leaves/s-ceiling-files-only")
		fmt.Fprintf(os.Stderr, "sync: %+v in %s; incremental %+v in %s; ceiling %s\n", res, full, res2, inc, ceil)
	}
}
