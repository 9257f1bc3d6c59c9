package disclosure

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// synthRun is run i of a synthetic export: admitted under its own key,
// concluded "succeeded", sealed. Its records are built by the store's own
// BuildBatch, so their bytes and hashes are exactly what an append makes.
func synthRun(t testing.TB, i int, key func(int) string) (store.RunID, []store.Prepared) {
	t.Helper()
	var run store.RunID
	run[0] = 0x02
	for b := range 8 {
		run[15-b] = byte(uint64(i+1) >> (8 * b))
	}
	p, err := store.BuildBatch(store.Head{}, 1, []store.Append{
		{Run: run, Kind: store.KindRunAdmitted, Fields: []byte(fmt.Sprintf(`{"admission_key":%q}`, key(i)))},
		conclude(run, "succeeded"),
	})
	if err != nil {
		t.Fatal(err)
	}
	return run, p
}

// synthKey gives each synthetic run its own admission key.
func synthKey(i int) string { return fmt.Sprintf("order-%d", i) }

func synthIndex(run store.RunID) int {
	var i uint64
	for b := range 8 {
		i |= uint64(run[15-b]) << (8 * b)
	}
	return int(i - 1)
}

// writeSynthExport writes an export of n sealed runs whose log indexes are
// in the reverse of run order, so no index is where a streaming reader
// would meet it.
func writeSynthExport(t testing.TB, path string, n int, key func(int) string) {
	t.Helper()
	rf := compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	cr := rf.NewEmptyRange(0)
	for k := range n {
		_, p := synthRun(t, n-1-k, key)
		lh := log.LeafHash(log.Hash(p[len(p)-1].Hash))
		if err := cr.Append(lh[:], nil); err != nil {
			t.Fatal(err)
		}
	}
	root, err := cr.GetRootHash(nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bw := bufio.NewWriter(f)
	hdr, err := marshalHeader(&header{Kind: KindExport, Version: Version, Canon: CanonVersion,
		Checkpoint: store.Checkpoint{Origin: testOrigin, Size: uint64(n), Root: store.Digest(root)}})
	if err != nil {
		t.Fatal(err)
	}
	bw.Write(hdr)
	var line []byte
	for i := range n {
		run, p := synthRun(t, i, key)
		blk := runBlock{Run: run, Records: uint64(len(p)), Sealed: true, Index: uint64(n - 1 - i), Seal: p[len(p)-1].Hash}
		bw.Write(appendRunBlock(line[:0], KindExportRun, &blk, false))
		for _, r := range p {
			bw.Write(appendRecordLine(line[:0], r.Hash, r.Raw))
		}
	}
	bw.Write(appendTrailer(line[:0], KindExportEnd, trailer{Runs: uint64(n), Sealed: uint64(n), Records: 2 * uint64(n)}))
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
}

// heapPeak samples the live heap (after a collection) and keeps the peak.
// It is called on Restore's own goroutine (from the target's methods), so
// no allocation races the reading of the statistics.
type heapPeak struct {
	peak uint64
	n    int
}

func (h *heapPeak) sample() {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	h.peak = max(h.peak, ms.HeapAlloc)
	h.n++
}

// sinkJournal is a restore target that keeps nothing per run: it chains
// appends on the current run's head, and folds seals into a compact range.
// Its own memory is constant, so a restore into it measures Restore's.
type sinkJournal struct {
	store.Journal // nil: Restore must not call anything else
	t             testing.TB
	h             *heapPeak
	run           store.RunID
	head          store.Head
	cr            *compact.Range
	size          uint64
	appended      uint64
	heads         uint64
	keys          uint64
}

func newSink(t testing.TB, h *heapPeak) *sinkJournal {
	return &sinkJournal{t: t, h: h, cr: (&compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}).NewEmptyRange(0)}
}

func (s *sinkJournal) Seals() bool { return false }
func (s *sinkJournal) Head(context.Context, store.RunID) (store.Head, error) {
	if s.heads++; s.heads%512 == 0 {
		s.h.sample()
	}
	return store.Head{}, nil
}

// RunsByID lists one run beyond every exported one, so the target is not
// empty and the first reading asks it about every admission key.
func (s *sinkJournal) RunsByID(_ context.Context, after *store.RunID, _ int) ([]store.RunID, error) {
	if after != nil {
		return nil, nil
	}
	return []store.RunID{{0xff, 0xff}}, nil
}
func (s *sinkJournal) AdmittedAs(context.Context, string) (store.RunID, bool, error) {
	if s.keys++; s.keys%512 == 0 {
		s.h.sample()
	}
	return store.RunID{}, false, nil
}

func (s *sinkJournal) Append(_ context.Context, epoch store.Epoch, batch []store.Append) ([]store.Record, error) {
	if batch[0].Run != s.run {
		s.run, s.head = batch[0].Run, store.Head{}
	}
	p, err := store.BuildBatch(s.head, epoch, batch)
	if err != nil {
		return nil, err
	}
	recs := make([]store.Record, len(p))
	for i := range p {
		recs[i] = p[i].Record
	}
	last := recs[len(recs)-1]
	s.head = store.Head{Seq: last.Seq, Hash: last.Hash}
	if s.appended += uint64(len(recs)); s.appended%1024 == 0 {
		s.h.sample()
	}
	return recs, nil
}

func (s *sinkJournal) Seal(_ context.Context, run store.RunID, _ store.Epoch, outcome string) (store.Digest, error) {
	_, p := synthRun(s.t, synthIndex(run), synthKey)
	leaf := p[len(p)-1].Hash
	lh := log.LeafHash(log.Hash(leaf))
	if err := s.cr.Append(lh[:], nil); err != nil {
		return store.Digest{}, err
	}
	if s.size++; s.size%1024 == 0 {
		s.h.sample()
	}
	return leaf, nil
}

func (s *sinkJournal) Checkpoint(context.Context) (store.Checkpoint, error) {
	if s.size == 0 {
		return store.Checkpoint{Origin: testOrigin, Root: store.Digest(log.EmptyRoot())}, nil
	}
	root, err := s.cr.GetRootHash(nil)
	if err != nil {
		return store.Checkpoint{}, err
	}
	return store.Checkpoint{Origin: testOrigin, Size: s.size, Root: store.Digest(root)}, nil
}

// Issue 17 item 1: Restore kept every sealed run's log position (about a
// hundred bytes each) and every admission key in memory, so restoring a
// journal of a million runs took 345 MiB and ten million would take
// gigabytes. Restoring N and 4N runs (each admitted under a key, each
// sealed, log indexes in reverse of run order) must reach the same live
// heap peak: what spans the export is on disk.
func TestRestore_MemoryDoesNotGrowWithRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and restores about 20 MB")
	}
	const n = 10_000
	dir := t.TempDir()
	peak := func(runs int) uint64 {
		path := filepath.Join(dir, fmt.Sprintf("export-%d.jsonl", runs))
		writeSynthExport(t, path, runs, synthKey)
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		h := &heapPeak{}
		sink := newSink(t, h)
		h.sample()
		rep, err := Restore(context.Background(), sink, f)
		if err != nil {
			t.Fatalf("restore of %d runs: %v", runs, err)
		}
		if !rep.Faithful() || rep.Runs != uint64(runs) || rep.Sealed != uint64(runs) || sink.appended != 2*uint64(runs) {
			t.Fatalf("restore of %d runs: report %+v, %d records appended", runs, rep, sink.appended)
		}
		if h.n < runs/512 {
			t.Fatalf("only %d heap samples", h.n)
		}
		t.Logf("%d runs: live heap peak %d KiB over %d samples", runs, h.peak>>10, h.n)
		return h.peak
	}
	small, large := peak(n), peak(4*n)
	// Before the fix the difference was several MiB (3N sealed positions
	// and 3N admission keys); a constant bound leaves only noise.
	if large > small+512<<10 {
		t.Fatalf("live heap peak %d KiB for %d runs, %d KiB for %d: restore memory grows with the export", small>>10, n, large>>10, 4*n)
	}
}
