package disclosure

import (
	"bufio"
	"bytes"
	"container/heap"
	"context"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"slices"

	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// Summary describes a package or export as written.
type Summary struct {
	Checkpoint store.Checkpoint `json:"checkpoint"`
	Runs       uint64           `json:"runs"`
	Sealed     uint64           `json:"sealed"`
	Records    uint64           `json:"records"`
	Cases      uint64           `json:"cases"`
	Bytes      int64            `json:"bytes"`
	SHA256     store.Digest     `json:"sha256"` // of exactly the bytes written
	// Statement is a package's signed statement, and StatementKey the
	// disclosure key (name+hash) that signed it.
	Statement    []byte `json:"-"`
	StatementKey string `json:"statement_key,omitempty"`
}

// Signing is what a package's statement says beyond what the package
// holds, and the key that signs it: the recipient, and the journal's
// disclosure key, which MUST NOT be the log's checkpoint key.
type Signing struct {
	Recipient string
	Key       note.Signer
}

// isLogSigner reports whether key made one of the checkpoint's signatures
// (the same name and key ID): key separation refuses it.
func isLogSigner(cp *checkpoint.Signed, key note.Signer) bool {
	for _, s := range cp.Signatures() {
		if s.Name == key.Name() && s.Hash == key.KeyHash() {
			return true
		}
	}
	return false
}

// lineWriter buffers, counts and digests what it writes.
type lineWriter struct {
	w   *bufio.Writer
	sum hash.Hash
	n   int64
	buf []byte // scratch for building a line
}

func newLineWriter(w io.Writer) *lineWriter {
	return &lineWriter{w: bufio.NewWriterSize(w, 1<<20), sum: sha256.New()}
}

func (lw *lineWriter) write(b []byte) error {
	lw.sum.Write(b)
	lw.n += int64(len(b))
	_, err := lw.w.Write(b)
	return err
}

func (lw *lineWriter) finish(s *Summary) error {
	if err := lw.w.Flush(); err != nil {
		return err
	}
	s.Bytes = lw.n
	lw.sum.Sum(s.SHA256[:0])
	return nil
}

// WritePackage writes a disclosure package of the runs sel names to w,
// against the witnessed checkpoint cp: a header carrying cp's signed note
// (only its verified signatures: the log's and the witnesses'), then for
// each run in ascending id order a run block and its records with their
// exact stored bytes, then a block per selected case, then a trailer with
// the counts. A run with a leaf below cp's size carries its log index, its
// seal and its inclusion proof at that size; any other run is marked
// unsealed. The format is spec/disclosure.md.
//
// cp must be a checkpoint of j's log: same origin, a size the log has
// reached, and the log's root at that size (proved with a consistency proof
// from the journal). Proofs come from InclusionProofAt at cp's size, so runs
// sealed while the package is written do not move them.
//
// Memory is constant in the number and size of the runs: the selection is
// merged from sorted pages, and records are read a page at a time.
//
// On error, what was written to w is not a package and must be discarded.
// An *UnplacedRunError means a selected run's leaf is not below cp's size:
// retry against a newer witnessed checkpoint. The writer also checks what it
// writes (chains, heads, leaves, proofs) and refuses to write a package from
// a journal that fails those checks.
func WritePackage(ctx context.Context, j Source, w io.Writer, sel Selection, cp *checkpoint.Signed, sign Signing) (Summary, error) {
	if cp == nil {
		return Summary{}, &CheckpointMismatchError{Detail: "no signed checkpoint given"}
	}
	if sign.Key == nil {
		return Summary{}, &SigningError{Detail: "no disclosure key to sign the package's statement with"}
	}
	if err := store.ValidateRecipient(sign.Recipient); err != nil {
		return Summary{}, err
	}
	if sign.Key.Name() == cp.Checkpoint().Origin || isLogSigner(cp, sign.Key) {
		return Summary{}, &SigningError{Detail: fmt.Sprintf("the disclosure key %s+%08x is the log's checkpoint key: a package's statement is signed with a key of its own", sign.Key.Name(), sign.Key.KeyHash())}
	}
	sel, err := sel.normalize()
	if err != nil {
		return Summary{}, err
	}
	ck := cp.Checkpoint()
	want := store.Checkpoint{Origin: ck.Origin, Size: ck.Size, Root: store.Digest(ck.Root)}
	if err := matchJournal(ctx, j, want); err != nil {
		return Summary{}, err
	}
	for _, r := range sel.Runs {
		h, err := j.Head(ctx, r)
		if err != nil {
			return Summary{}, err
		}
		if h.Seq == 0 {
			return Summary{}, &SelectionError{Detail: fmt.Sprintf("run %s is not in the journal", r)}
		}
	}
	m, err := newMerger(ctx, j, sel)
	if err != nil {
		return Summary{}, err
	}
	hdr, err := marshalHeader(&header{Kind: KindPackage, Version: Version, Canon: CanonVersion, Checkpoint: want, Note: cp.Note(), Selection: sel})
	if err != nil {
		return Summary{}, err
	}
	lw := newLineWriter(w)
	if err := lw.write(hdr); err != nil {
		return Summary{}, err
	}
	rw := &runWriter{j: j, lw: lw, kind: KindPackageRun, proofs: true, cp: want, cases: sel.Cases, caseRuns: make([]uint64, len(sel.Cases)),
		blocks: newBlockDigest()}
	sum := Summary{Checkpoint: want}
	for {
		run, viaCase, ok, err := m.next(ctx)
		if err != nil {
			return Summary{}, err
		}
		if !ok {
			break
		}
		if err := ctx.Err(); err != nil {
			return Summary{}, err
		}
		sealed, n, err := rw.writeRun(ctx, run, nil, viaCase)
		if err != nil {
			return Summary{}, err
		}
		sum.Runs++
		sum.Records += n
		if sealed {
			sum.Sealed++
		}
	}
	for i, c := range sel.Cases {
		lw.buf = appendCaseBlock(lw.buf[:0], c, rw.caseRuns[i])
		rw.blocks.line(lw.buf, true)
		if err := lw.write(lw.buf); err != nil {
			return Summary{}, err
		}
	}
	sum.Cases = uint64(len(sel.Cases))
	st := Statement{Checkpoint: want, Recipient: sign.Recipient, Selection: selectionDigest(sel),
		Runs: sum.Runs, Sealed: sum.Sealed, Records: sum.Records, Cases: sum.Cases, Blocks: rw.blocks.sum()}
	signed, err := SignStatement(st, sign.Key)
	if err != nil {
		return Summary{}, &SigningError{Detail: err.Error()}
	}
	sum.Statement, sum.StatementKey = signed, fmt.Sprintf("%s+%08x", sign.Key.Name(), sign.Key.KeyHash())
	if err := lw.write(appendTrailer(lw.buf[:0], KindPackageEnd, trailer{Runs: sum.Runs, Sealed: sum.Sealed, Records: sum.Records, Cases: sum.Cases, Statement: string(signed)})); err != nil {
		return Summary{}, err
	}
	return sum, lw.finish(&sum)
}

// matchJournal checks that want is a state of j's log: its origin, a size
// the log has reached, and, proved by a consistency proof from the journal
// to its current state, the log's root at that size.
func matchJournal(ctx context.Context, j Source, want store.Checkpoint) error {
	cur, err := j.Checkpoint(ctx)
	if err != nil {
		return err
	}
	if cur.Origin != want.Origin {
		return &CheckpointMismatchError{Detail: fmt.Sprintf("origin %q, the journal's is %q", want.Origin, cur.Origin)}
	}
	if want.Size > cur.Size {
		return &CheckpointMismatchError{Detail: fmt.Sprintf("size %d, the journal's log has %d leaves", want.Size, cur.Size)}
	}
	var proof []store.Digest
	if want.Size != cur.Size {
		if proof, err = j.ConsistencyProof(ctx, want.Size, cur.Size); err != nil {
			return err
		}
	}
	hs := make([]log.Hash, len(proof))
	for i, p := range proof {
		hs[i] = log.Hash(p)
	}
	if err := log.VerifyConsistency(want.Size, cur.Size, log.Hash(want.Root), log.Hash(cur.Root), hs); err != nil {
		return &CheckpointMismatchError{Detail: fmt.Sprintf("root %s is not the journal's root at size %d: %v", want.Root, want.Size, err)}
	}
	return nil
}

// runWriter writes run blocks and their records: begin writes a run's
// block, record checks and writes each of its records in order, and end
// checks the run as a whole. writeRun drives them from a Source one run at
// a time; an export through a store.BulkReader drives them from its pages.
type runWriter struct {
	j        Source
	lw       *lineWriter
	kind     string
	proofs   bool // a package: proofs at cp.Size; else an export: positions below cp.Size
	cp       store.Checkpoint
	cases    []store.CaseID // selected cases, ascending
	caseRuns []uint64       // per selected case, carried runs with a record stamped with it
	hit      []bool
	pageSize int
	blocks   *blockDigest // a package: the statement's blocks digest

	// The run begun: its block, its head, the last record written, and
	// the latest RunConcluded record (decoded once, at the end of the run).
	blk        runBlock
	head, last store.Head
	concl      []byte
	conclAt    store.Seq
}

const (
	minPage     = 16
	maxPage     = 1024
	targetBytes = 8 << 20 // aim for pages of about this many record bytes
)

// writeRun writes one run. pos is the run's log position for an export
// (nil: unsealed); a package asks the journal for the inclusion proof.
// viaCase lists the selected cases (by index) whose listing brought the run.
func (rw *runWriter) writeRun(ctx context.Context, run store.RunID, pos *store.Position, viaCase []int) (bool, uint64, error) {
	blk := runBlock{Run: run}
	if rw.proofs {
		inc, err := rw.j.InclusionProofAt(ctx, run, rw.cp.Size)
		if err != nil {
			return false, 0, err
		}
		if inc != nil {
			blk.Sealed, blk.Index, blk.Seal = true, inc.Index, inc.Leaf
			blk.Proof = make([]log.Hash, len(inc.Proof))
			for i, p := range inc.Proof {
				blk.Proof[i] = log.Hash(p)
			}
			if err := log.VerifyInclusion(log.Hash(inc.Leaf), inc.Index, rw.cp.Size, blk.Proof, log.Hash(rw.cp.Root)); err != nil {
				return false, 0, &store.CorruptError{Run: run, Detail: fmt.Sprintf("the journal's inclusion proof does not verify against the checkpoint: %v", err)}
			}
		} else {
			ps, err := rw.j.LogPositions(ctx, []store.RunID{run})
			if err != nil {
				return false, 0, err
			}
			if len(ps) == 1 && ps[0] != nil {
				idx := ps[0].Index
				return false, 0, &UnplacedRunError{Run: run, Index: &idx, Size: rw.cp.Size}
			}
		}
	} else {
		rw.exportPosition(&blk, pos)
	}
	head, err := rw.j.Head(ctx, run)
	if err != nil {
		return false, 0, err
	}
	if err := rw.begin(&blk, head); err != nil {
		return false, 0, err
	}
	if rw.pageSize == 0 {
		rw.pageSize = minPage
	}
	for from := store.Seq(1); from <= head.Seq; {
		page, err := rw.j.ReadPage(ctx, run, from, rw.pageSize)
		if err != nil {
			return false, 0, err
		}
		if len(page) == 0 {
			return false, 0, &store.CorruptError{Run: run, Seq: from, Detail: fmt.Sprintf("records missing below the head seq %d", head.Seq)}
		}
		var pageBytes int
		for _, r := range page {
			if r.Seq > head.Seq {
				break // appended after the head was read
			}
			if r.Run != run || r.PrevHash != rw.last.Hash {
				return false, 0, &store.CorruptError{Run: run, Seq: r.Seq, Detail: fmt.Sprintf("the record read does not continue the chain at seq %d", rw.last.Seq+1)}
			}
			if err := rw.record(r.Seq, r.Hash, r.Raw, r.Kind == store.KindRunConcluded, r.Case); err != nil {
				return false, 0, err
			}
			pageBytes += len(r.Raw)
			from = r.Seq + 1
		}
		// Size pages by bytes, not records: a page of maximal records
		// would otherwise hold a gigabyte.
		avg := pageBytes/len(page) + 1
		rw.pageSize = min(max(targetBytes/avg, minPage), maxPage)
	}
	return rw.end(viaCase)
}

// exportPosition marks an export's run block sealed if the run's log
// position is below the checkpoint's size: a run sealed after the export
// began is exported unsealed, so the export's log is the checkpoint's.
func (rw *runWriter) exportPosition(blk *runBlock, pos *store.Position) {
	if pos != nil && pos.Index < rw.cp.Size {
		blk.Sealed, blk.Index, blk.Seal = true, pos.Index, pos.Leaf
	}
}

// begin checks a run's head against its block and writes the block.
func (rw *runWriter) begin(blk *runBlock, head store.Head) error {
	if head.Seq == 0 {
		return &SelectionError{Detail: fmt.Sprintf("run %s is not in the journal", blk.Run)}
	}
	if blk.Sealed && head.Hash != blk.Seal {
		return &store.CorruptError{Run: blk.Run, Seq: head.Seq, Detail: "the sealed run's head is not its leaf"}
	}
	blk.Records = uint64(head.Seq)
	rw.lw.buf = appendRunBlock(rw.lw.buf[:0], rw.kind, blk, rw.proofs)
	if rw.blocks != nil {
		rw.blocks.line(rw.lw.buf, true)
	}
	if err := rw.lw.write(rw.lw.buf); err != nil {
		return err
	}
	rw.blk, rw.head, rw.last, rw.conclAt = *blk, head, store.Head{}, 0
	if rw.hit == nil || len(rw.hit) != len(rw.cases) {
		rw.hit = make([]bool, len(rw.cases))
	}
	clear(rw.hit)
	return nil
}

// record checks that a record continues the chain of the run begun (the
// next seq, its hash over the previous hash and its exact bytes) and
// writes its line. The store checked each record as it read it; this
// re-check costs a hash, not a decoding: only the run's latest conclusion
// is decoded, by end.
func (rw *runWriter) record(seq store.Seq, hash store.Digest, raw []byte, concluded bool, c store.CaseID) error {
	if seq != rw.last.Seq+1 || store.ChainHash(rw.last.Hash, raw) != hash {
		return &store.CorruptError{Run: rw.blk.Run, Seq: seq, Detail: fmt.Sprintf("the record read does not continue the chain at seq %d", rw.last.Seq+1)}
	}
	if concluded {
		rw.concl, rw.conclAt = append(rw.concl[:0], raw...), seq
	}
	rw.last = store.Head{Seq: seq, Hash: hash}
	if !c.IsZero() {
		if i, ok := slices.BinarySearchFunc(rw.cases, c, func(a, b store.CaseID) int { return bytes.Compare(a[:], b[:]) }); ok {
			rw.hit[i] = true
		}
	}
	rw.lw.buf = appendRecordLine(rw.lw.buf[:0], hash, raw)
	return rw.lw.write(rw.lw.buf)
}

// end checks the run begun as a whole: its chain ends at its head, and it
// is sealed exactly if its latest conclusion seals. It returns whether the
// run is sealed and its number of records.
func (rw *runWriter) end(viaCase []int) (bool, uint64, error) {
	run := rw.blk.Run
	if rw.last != rw.head {
		return false, 0, &store.CorruptError{Run: run, Seq: rw.last.Seq, Detail: fmt.Sprintf("the chain read ends at seq %d, the head is seq %d", rw.last.Seq, rw.head.Seq)}
	}
	if rw.blocks != nil {
		rw.blocks.head(rw.last.Hash)
	}
	// The latest conclusion matters to a sealed run (it must seal) and to
	// a package's unsealed run (it must not); an export's unsealed run is
	// written as it stands, and Restore reads every record in full.
	latest := ""
	if rw.conclAt != 0 && (rw.blk.Sealed || rw.proofs) {
		var err error
		if latest, err = store.ConclusionOutcome(run, rw.conclAt, rw.concl); err != nil {
			return false, 0, err
		}
	}
	sealing := store.IsSealingOutcome(latest)
	switch {
	case rw.blk.Sealed && !sealing:
		return false, 0, &store.CorruptError{Run: run, Seq: rw.head.Seq, Detail: fmt.Sprintf("sealed, but its latest conclusion %q is not a sealing outcome", latest)}
	case !rw.blk.Sealed && sealing && rw.proofs:
		return false, 0, &UnplacedRunError{Run: run, Outcome: latest, Size: rw.cp.Size}
	}
	for _, i := range viaCase {
		if !rw.hit[i] {
			return false, 0, &store.CorruptError{Run: run, Detail: fmt.Sprintf("listed for case %s, but no record of it is stamped with the case", rw.cases[i])}
		}
	}
	for i, h := range rw.hit {
		if h {
			rw.caseRuns[i]++
		}
	}
	return rw.blk.Sealed, rw.blk.Records, nil
}

// merger yields the union of the selected runs and the runs of the selected
// cases, ascending and without repeats, from sorted pages: one page per
// source in memory at a time.
type merger struct {
	j    Source
	h    sourceHeap
	last *store.RunID
}

type source struct {
	caseIx int // index into the selected cases; -1 for the runs selected by id
	c      store.CaseID
	page   []store.RunID
	pos    int
	more   bool // CaseRuns may have more after page
}

const casePage = 1000

func (s *source) fill(ctx context.Context, j Source) error {
	if s.pos < len(s.page) || !s.more {
		return nil
	}
	var after *store.RunID
	if len(s.page) > 0 {
		a := s.page[len(s.page)-1]
		after = &a
	}
	page, err := j.CaseRuns(ctx, s.c, after, casePage)
	if err != nil {
		return err
	}
	s.page, s.pos, s.more = page, 0, len(page) == casePage
	return nil
}

func newMerger(ctx context.Context, j Source, sel Selection) (*merger, error) {
	m := &merger{j: j}
	if len(sel.Runs) > 0 {
		m.h = append(m.h, &source{caseIx: -1, page: sel.Runs})
	}
	for i, c := range sel.Cases {
		s := &source{caseIx: i, c: c, more: true}
		if err := s.fill(ctx, j); err != nil {
			return nil, err
		}
		if len(s.page) == 0 {
			return nil, &SelectionError{Detail: fmt.Sprintf("case %s touched no run in the journal", c)}
		}
		m.h = append(m.h, s)
	}
	heap.Init(&m.h)
	return m, nil
}

// next returns the next run and the selected cases whose listing named it.
func (m *merger) next(ctx context.Context) (store.RunID, []int, bool, error) {
	if len(m.h) == 0 {
		return store.RunID{}, nil, false, nil
	}
	run := m.h[0].page[m.h[0].pos]
	var via []int
	for len(m.h) > 0 && m.h[0].page[m.h[0].pos] == run {
		s := m.h[0]
		if s.caseIx >= 0 {
			via = append(via, s.caseIx)
		}
		s.pos++
		if err := s.fill(ctx, m.j); err != nil {
			return store.RunID{}, nil, false, err
		}
		if s.pos < len(s.page) {
			heap.Fix(&m.h, 0)
		} else {
			heap.Pop(&m.h)
		}
	}
	if m.last != nil && bytes.Compare(m.last[:], run[:]) >= 0 {
		return store.RunID{}, nil, false, &store.CorruptError{Run: run, Detail: "case listing is not in ascending run order"}
	}
	m.last = &run
	return run, via, true, nil
}

type sourceHeap []*source

func (h sourceHeap) Len() int { return len(h) }
func (h sourceHeap) Less(i, j int) bool {
	a, b := h[i].page[h[i].pos], h[j].page[h[j].pos]
	return bytes.Compare(a[:], b[:]) < 0
}
func (h sourceHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *sourceHeap) Push(x any)   { *h = append(*h, x.(*source)) }
func (h *sourceHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
