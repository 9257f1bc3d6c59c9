package disclosure

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/runseal/runseal/internal/canon"
	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// RestoreReport says what Restore rebuilt.
type RestoreReport struct {
	Expected store.Checkpoint `json:"expected"` // the export's checkpoint
	Rebuilt  store.Checkpoint `json:"rebuilt"`  // the target's log after the restore
	Runs     uint64           `json:"runs"`
	Sealed   uint64           `json:"sealed"`
	Records  uint64           `json:"records"`
	// ConcludedUnsealed counts runs whose latest conclusion seals but that
	// had no leaf in the export (sealed after it began, or never sealed):
	// they come back open, to be sealed again.
	ConcludedUnsealed uint64 `json:"concluded_unsealed"`
	// Awaiting counts runs that came back suspended; resume them to act on
	// their wait.
	Awaiting uint64 `json:"awaiting"`
	// OriginChanged is true when the target's log has another origin (a
	// new journal or tenant): the tree is the same, its name is not.
	OriginChanged bool `json:"origin_changed"`
	// Resumed is true for a resumed restore; ResumedRecords and
	// ResumedLeaves count what the target already held (Records and Sealed
	// include them).
	Resumed        bool     `json:"resumed"`
	ResumedRecords uint64   `json:"resumed_records"`
	ResumedLeaves  uint64   `json:"resumed_leaves"`
	NotCarried     []string `json:"not_carried"`
}

// Faithful reports whether the rebuilt log is the exported one: the same
// size and root.
func (r *RestoreReport) Faithful() bool {
	return r.Rebuilt.Size == r.Expected.Size && r.Rebuilt.Root == r.Expected.Root
}

// notCarried is what an export does not hold, so a restore cannot bring back.
var notCarried = []string{
	"the disclosure register",
	"leases: restored runs have none, and the next acquire fences from epoch 1",
	"pending cancellation requests",
	"activity times: restored runs are active as of the restore",
	"forgotten admission keys: replaying RunAdmitted records claims their keys again",
}

// Restore rebuilds a journal from an export made by Export. It reads the
// export twice and writes nothing until the first reading has established
// that it can succeed; it refuses, with *RestoreRefusedError, an export
// that is cut, of an unknown kind or version (*UnknownFormatError), or
// malformed (*FormatError), a disclosure package (ErrNotAnExport), a target
// that seals payloads (Seals() true, so it would not store the exact
// bytes), a target that already holds any exported run or admission key,
// and a target whose log is not empty.
//
// The second reading replays each run's records through the ordinary
// Append, one call per group of consecutive records with the same epoch (a
// long group is split), with the exact stored bytes (store.Append.Raw), so
// every derived index is rebuilt by the store's own code and every hash is
// compared with the export's. It decodes of each record only its epoch:
// the store decodes the bytes in full and refuses any that name another
// run, seq or epoch than it assigns, and a file changed since the first
// reading fails the restore (its digest is compared at the end). Then the
// sealed runs are sealed in log-index
// order, each with its latest conclusion's outcome under its last record's
// epoch, which rebuilds the log leaf for leaf. Restore succeeds only if the
// rebuilt log's size and root equal the export's (else
// *UnfaithfulRestoreError).
//
// Memory is bounded whatever the export's size: one run's records at a
// time (at most maxReplayRecords or maxReplayBytes per append), and fixed
// buffers. What spans the whole export is kept in unlinked temporary files
// in os.TempDir: 64 bytes per log leaf, addressed by log index, and an
// external sort of the admission keys' digests (48 bytes each); runs
// already in the target and keys it already holds are looked up in its
// own indexes. The file must not change during the restore; if its digest
// differs between the readings, Restore fails.
func Restore(ctx context.Context, j store.Journal, r io.ReadSeeker) (*RestoreReport, error) {
	return RestoreWith(ctx, j, r, RestoreOptions{})
}

// RestoreOptions changes what Restore accepts in the target.
type RestoreOptions struct {
	// Resume finishes an interrupted restore of the same export: the
	// target may hold a prefix of any exported run (its last record's hash
	// must be the export's at that seq) and a prefix of the export's log
	// (its root must be the export's leaves' root at that size). Only the
	// missing records are appended and the missing leaves sealed, so no run
	// is duplicated. A target holding anything else is refused, naming it.
	Resume bool
	// Progress, if set, is called as the restore advances: every few MiB
	// of the first reading, every bulk of appends and every bulk of seals.
	// It runs on the restore's goroutine and must return quickly.
	Progress func(RestoreProgress)

	// BulkRuns and BulkSeals cap the runs of one bulk of appends and the
	// seals of one bulk of seals with a store.BulkWriter (0: 2,048 and
	// 8,192, the sizes spec/disclosure.md's memory bound is stated for).
	// Smaller bulks commit more often: less memory, more commits, and a
	// restore killed early has already committed something to resume.
	BulkRuns, BulkSeals int
}

// RestoreProgress is how far a restore has come in one of its phases.
type RestoreProgress struct {
	// Phase is PhaseChecking (Done and Total count bytes of the export),
	// PhaseAppending (records) or PhaseSealing (log leaves).
	Phase string `json:"phase"`
	Done  uint64 `json:"done"`
	Total uint64 `json:"total"` // 0 when unknown
}

// The phases of a restore, in order.
const (
	PhaseChecking  = "checking"
	PhaseAppending = "appending"
	PhaseSealing   = "sealing"
)

// RestoreWith is Restore with options.
func RestoreWith(ctx context.Context, j store.Journal, r io.ReadSeeker, opts RestoreOptions) (*RestoreReport, error) {
	// A sealing store that writes restored bytes verbatim (store/sealed)
	// can hold an export; one that would seal them again cannot.
	if v, ok := j.(interface{ WritesRawVerbatim() bool }); j.Seals() && !(ok && v.WritesRawVerbatim()) {
		return nil, &RestoreRefusedError{Reason: "the target store rewrites payloads on append (Seals() is true), so it cannot hold the exported bytes"}
	}
	if opts.BulkRuns < 0 || opts.BulkSeals < 0 {
		return nil, &store.InvalidArgumentError{Field: "bulk", Detail: fmt.Sprintf("BulkRuns %d and BulkSeals %d: each must be 0 (the default) or positive", opts.BulkRuns, opts.BulkSeals)}
	}
	rep := &RestoreReport{NotCarried: notCarried, Resumed: opts.Resume}
	progress := opts.Progress
	if progress == nil {
		progress = func(RestoreProgress) {}
	}
	var fileSize uint64
	if end, err := r.Seek(0, io.SeekEnd); err == nil {
		fileSize = uint64(end)
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("restore: rewind: %w", err)
	}
	// The target's runs are listed in run-id order beside the export's,
	// so a run is looked up (Head) only if the target holds it, and keys
	// (AdmittedAs) only if the target holds any run at all: a key is
	// claimed by a run's record.
	held1 := &targetRuns{j: j}
	targetEmpty, err := held1.empty(ctx)
	if err != nil {
		return nil, err
	}

	// Reading 1: validate everything, collect the log positions, and
	// check the target, writing nothing. What spans the whole file (which
	// run holds each log index, which admission keys are claimed) is kept
	// on disk; what concerns the target is asked of its own indexes.
	slots, err := newLogSlots()
	if err != nil {
		return nil, err
	}
	defer slots.close()
	keys := &keySpill{}
	defer keys.close()
	var lastEpoch store.Epoch
	var effects map[store.Digest]bool
	var held store.Head // the target's head of the current run (Resume)
	sc := &exportScanner{
		progress: func(n int64) { progress(RestoreProgress{Phase: PhaseChecking, Done: uint64(n), Total: fileSize}) },
		onRun: func(blk *runBlock) error {
			var h store.Head
			if has, err := held1.holds(ctx, blk.Run); err != nil {
				return err
			} else if has {
				if h, err = j.Head(ctx, blk.Run); err != nil {
					return err
				}
			}
			switch {
			case h.Seq != 0 && !opts.Resume:
				return &RestoreRefusedError{Reason: fmt.Sprintf("the target already holds run %s; restore rebuilds history and never merges (if an earlier restore of this export was interrupted, resume it)", blk.Run)}
			case uint64(h.Seq) > blk.Records:
				return &RestoreRefusedError{Reason: fmt.Sprintf("the target's run %s has %d records, the export's %d: the target is not a partial restore of this export", blk.Run, h.Seq, blk.Records)}
			}
			held = h
			if h.Seq != 0 {
				rep.ResumedRecords += uint64(h.Seq)
			}
			clear(effects)
			if effects == nil {
				effects = map[store.Digest]bool{}
			}
			return nil
		},
		onRecord: func(blk *runBlock, rec *scannedRecord) error {
			lastEpoch = rec.body.Epoch
			if err := store.ValidateEpoch(rec.body.Epoch); err != nil {
				return &FormatError{Detail: fmt.Sprintf("run %s seq %d: %v", blk.Run, rec.body.Seq, err)}
			}
			if rec.body.Seq == held.Seq && rec.hash != held.Hash {
				return &RestoreRefusedError{Reason: fmt.Sprintf("the target's run %s seq %d has hash %s, the export's %s: the target is not a partial restore of this export", blk.Run, held.Seq, held.Hash, rec.hash)}
			}
			if k := rec.body.EffectKey; rec.body.Kind == store.KindEffectStarted && k != nil {
				if effects[*k] {
					return &FormatError{Detail: fmt.Sprintf("run %s seq %d: effect %s started twice", blk.Run, rec.body.Seq, *k)}
				}
				effects[*k] = true
			}
			if a := rec.facts.Admission; a != nil && a.Key != "" {
				if err := keys.add(store.Sum([]byte(a.Key)), blk.Run); err != nil {
					return err
				}
				if targetEmpty {
					return nil
				}
				holder, has, err := j.AdmittedAs(ctx, a.Key)
				if err != nil {
					return err
				}
				if ours := opts.Resume && holder == blk.Run && rec.body.Seq <= held.Seq; has && !ours {
					return &RestoreRefusedError{Reason: fmt.Sprintf("the target's run %s already holds admission key %q", holder, a.Key)}
				}
			}
			return nil
		},
		onRunEnd: func(blk *runBlock, latest string, lastKind string) error {
			if blk.Sealed {
				if err := slots.put(blk.Index, logSlot{run: blk.Run, leaf: blk.Seal, epoch: lastEpoch, outcome: latest}); err != nil {
					return err
				}
			} else if store.IsSealingOutcome(latest) {
				rep.ConcludedUnsealed++
			}
			if lastKind == store.KindRunSuspended {
				rep.Awaiting++
			}
			return nil
		},
	}
	hdr, tr, digest1, err := sc.scan(ctx, r)
	if err != nil {
		return nil, refusal(err)
	}
	rep.Expected = hdr.Checkpoint
	if d, a, b, dup, err := keys.duplicate(); err != nil {
		return nil, err
	} else if dup {
		return nil, refusal(&FormatError{Detail: fmt.Sprintf("an admission key (sha256 %s) is claimed by runs %s and %s", d, a, b)})
	}
	keys.close()
	if tr.Sealed != hdr.Checkpoint.Size {
		return nil, refusal(&FormatError{Detail: fmt.Sprintf("%d runs carry a leaf, the log has %d", tr.Sealed, hdr.Checkpoint.Size)})
	}
	target, err := j.Checkpoint(ctx)
	if err != nil {
		return nil, err
	}
	switch {
	case target.Size != 0 && !opts.Resume:
		return nil, &RestoreRefusedError{Reason: fmt.Sprintf("the target's log already has %d leaves; restore rebuilds a log and never appends to one (if an earlier restore of this export was interrupted, resume it)", target.Size)}
	case target.Size > hdr.Checkpoint.Size:
		return nil, &RestoreRefusedError{Reason: fmt.Sprintf("the target's log has %d leaves, the export's %d: the target is not a partial restore of this export", target.Size, hdr.Checkpoint.Size)}
	}
	rep.OriginChanged = target.Origin != hdr.Checkpoint.Origin
	rf := compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	cr := rf.NewEmptyRange(0)
	prefixRoot := func() (store.Digest, error) {
		if cr.End() == 0 {
			return store.Digest(log.EmptyRoot()), nil
		}
		rh, err := cr.GetRootHash(nil)
		return store.Digest(rh), err
	}
	err = slots.each(hdr.Checkpoint.Size, func(i uint64, s *logSlot) error {
		if i == target.Size && target.Size != 0 {
			if pr, err := prefixRoot(); err != nil || pr != target.Root {
				return &RestoreRefusedError{Reason: fmt.Sprintf("the target's log of %d leaves has root %s, the export's first %d leaves make %s: the target is not a partial restore of this export", target.Size, target.Root, target.Size, pr)}
			}
		}
		lh := log.LeafHash(log.Hash(s.leaf))
		return cr.Append(lh[:], nil)
	})
	if err != nil {
		return nil, refusal(err)
	}
	if target.Size != 0 && target.Size == hdr.Checkpoint.Size && target.Root != hdr.Checkpoint.Root {
		return nil, &RestoreRefusedError{Reason: fmt.Sprintf("the target's log of %d leaves has root %s, the export's %s: the target is not a partial restore of this export", target.Size, target.Root, hdr.Checkpoint.Root)}
	}
	root := log.EmptyRoot()
	if hdr.Checkpoint.Size > 0 {
		rh, err := cr.GetRootHash(nil)
		if err != nil {
			return nil, err
		}
		root = log.Hash(rh)
	}
	if store.Digest(root) != hdr.Checkpoint.Root {
		return nil, refusal(&FormatError{Detail: fmt.Sprintf("the exported leaves make root %x, the header says %s", root, hdr.Checkpoint.Root)})
	}

	// Reading 2: replay. With a store.BulkWriter the seals run beside the
	// appends (sealConcurrently), each bulk of seals once the runs it
	// seals are committed; else after them.
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("restore: rewind: %w", err)
	}
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	rp := &replayer{ctx: rctx, j: j, total: tr.Records, progress: progress, maxRuns: cmp.Or(opts.BulkRuns, maxBulkRuns)}
	rp.bulk, _ = j.(store.BulkWriter)
	sl := &sealer{ctx: rctx, j: j, total: hdr.Checkpoint.Size, progress: progress, max: cmp.Or(opts.BulkSeals, maxBulkSeals)}
	sl.bulk, _ = j.(store.BulkWriter)
	seal := func() error {
		err := slots.each(hdr.Checkpoint.Size, func(i uint64, s *logSlot) error {
			rep.Sealed++
			if i < target.Size {
				rep.ResumedLeaves++
				sl.done++
				return nil
			}
			return sl.add(i, s)
		})
		if err == nil {
			err = sl.flush()
		}
		if werr := sl.wait(); err == nil {
			err = werr
		}
		return err
	}
	var seals *sealConcurrently
	if rp.bulk != nil {
		seals = startSealing(rctx, cancel, sl, seal)
		rp.gate = seals.gate
	}
	held2 := &targetRuns{j: j}
	sc2 := &exportScanner{
		replay: true,
		onRun: func(blk *runBlock) error {
			rp.skip = 0
			if !opts.Resume {
				return nil
			}
			if has, err := held2.holds(rctx, blk.Run); err != nil || !has {
				return err
			}
			h, err := j.Head(rctx, blk.Run)
			rp.skip = h.Seq
			rp.done += uint64(h.Seq)
			return err
		},
		onRecord: rp.add,
		onRunEnd: func(blk *runBlock, _, _ string) error { return rp.endRun(blk.Run) },
	}
	_, _, digest2, err := sc2.scan(rctx, r)
	if err == nil {
		err = rp.flushBulk()
	}
	if werr := rp.wait(); err == nil {
		err = werr
	}
	if err == nil && digest1 != digest2 {
		err = errors.New("the export changed between its two readings; the target now holds a partial restore and must be discarded")
	}
	if err != nil {
		if seals != nil {
			seals.stop(err)
		}
		if cause := context.Cause(rctx); cause != nil && !errors.Is(cause, context.Canceled) && errors.Is(err, context.Canceled) {
			err = cause // the seals failed first and stopped the appends
		}
		return rep, fmt.Errorf("restore: second reading: %w", err)
	}
	rep.Runs, rep.Records = tr.Runs, tr.Records

	// Seal in log order, which rebuilds the tree leaf for leaf.
	if seals != nil {
		err = seals.finish(progress)
	} else {
		err = seal()
	}
	if err != nil {
		return rep, err
	}
	if sl.total > 0 {
		// The phase ends at its total even when the target held every
		// leaf already, or the seals were done beside the appends.
		progress(RestoreProgress{Phase: PhaseSealing, Done: sl.done, Total: sl.total})
	}
	if rep.Rebuilt, err = j.Checkpoint(ctx); err != nil {
		return rep, err
	}
	if !rep.Faithful() {
		return rep, &UnfaithfulRestoreError{Expected: rep.Expected, Rebuilt: rep.Rebuilt}
	}
	return rep, nil
}

// refusal marks a validation failure as a refusal that wrote nothing.
func refusal(err error) error {
	var rr *RestoreRefusedError
	if errors.As(err, &rr) {
		return err
	}
	return &RestoreRefusedError{Reason: err.Error(), Err: err}
}

// replayer appends a run's records in groups of one epoch. With a
// store.BulkWriter, groups of many runs are gathered and written together
// (at most maxBulkRuns groups or maxBulkBytes of records, each run at most
// once), so a commit carries thousands of runs instead of one.
type replayer struct {
	ctx      context.Context
	j        store.Journal
	bulk     store.BulkWriter // nil: one Append per group
	epoch    store.Epoch
	batch    []store.Append
	hashes   []store.Digest
	bytes    int
	skip     store.Seq // records of the current run the target already holds
	progress func(RestoreProgress)
	done     uint64 // records appended (or already held)
	total    uint64
	maxRuns  int // runs in a bulk

	// The bulk being gathered: its groups, their hashes, its runs.
	pending     []store.BulkAppend
	pendHashes  [][]store.Digest
	pendRuns    map[store.RunID]bool
	pendBytes   int
	pendRecords int
	// The bulk being written while the next is gathered (nil: none), its
	// records, and the last run it completes.
	inflight  chan error
	inRecords int
	inLast    store.RunID
	// ended is the last run whose records are all in the bulk being
	// gathered or an earlier one; gate (nil: none) learns each run whose
	// records are committed.
	ended store.RunID
	gate  *appendGate
}

const (
	maxReplayRecords = 256
	maxReplayBytes   = 4 << 20
	maxBulkRuns      = 2048
	maxBulkBytes     = 8 << 20
)

func (p *replayer) add(_ *runBlock, rec *scannedRecord) error {
	if rec.body.Seq <= p.skip {
		return nil
	}
	if len(p.batch) > 0 && (rec.body.Epoch != p.epoch || len(p.batch) == maxReplayRecords || p.bytes+len(rec.raw) > maxReplayBytes) {
		if err := p.flush(); err != nil {
			return err
		}
	}
	p.epoch = rec.body.Epoch
	p.batch = append(p.batch, store.Append{Run: rec.body.Run, Raw: bytes.Clone(rec.raw)})
	p.hashes = append(p.hashes, rec.hash)
	p.bytes += len(rec.raw)
	return nil
}

// endRun ends a run: its last group joins the bulk, which is written when
// full.
func (p *replayer) endRun(run store.RunID) error {
	if err := p.flush(); err != nil {
		return err
	}
	p.ended = run
	if len(p.pending) >= p.maxRuns || p.pendBytes >= maxBulkBytes {
		return p.flushBulk()
	}
	return nil
}

// flush ends the current group: it is appended now, or joins the bulk.
func (p *replayer) flush() error {
	if len(p.batch) == 0 {
		return nil
	}
	if p.bulk != nil {
		run := p.batch[0].Run
		if p.pendRuns[run] {
			// A run's second group (another epoch, or a long run) waits
			// for the bulk holding its first.
			if err := p.flushBulk(); err != nil {
				return err
			}
		}
		if p.pendRuns == nil {
			p.pendRuns = map[store.RunID]bool{}
		}
		p.pendRuns[run] = true
		p.pending = append(p.pending, store.BulkAppend{Epoch: p.epoch, Batch: p.batch})
		p.pendHashes = append(p.pendHashes, p.hashes)
		p.pendBytes += p.bytes
		p.pendRecords += len(p.batch)
		p.batch, p.hashes, p.bytes = nil, nil, 0
		return nil
	}
	recs, err := p.j.Append(p.ctx, p.epoch, p.batch)
	if err != nil {
		return fmt.Errorf("append run %s: %w", p.batch[0].Run, err)
	}
	if err := compareHashes(recs, p.hashes); err != nil {
		return err
	}
	p.done += uint64(len(recs))
	if p.done%4096 < uint64(len(recs)) {
		p.progress(RestoreProgress{Phase: PhaseAppending, Done: p.done, Total: p.total})
	}
	p.batch, p.hashes, p.bytes = p.batch[:0], p.hashes[:0], 0
	return nil
}

// flushBulk hands the gathered groups to one AppendBulk, written while the
// next bulk is read and decoded, once the bulk before it has committed:
// bulks commit in order, one at a time, so an interrupted restore leaves
// the target a prefix of them.
func (p *replayer) flushBulk() error {
	if err := p.wait(); err != nil {
		return err
	}
	if len(p.pending) == 0 {
		return nil
	}
	pending, hashes := p.pending, p.pendHashes
	p.inRecords, p.inLast = p.pendRecords, p.ended
	p.pending, p.pendHashes, p.pendBytes, p.pendRecords = nil, nil, 0, 0
	clear(p.pendRuns)
	done := make(chan error, 1)
	p.inflight = done
	go func() { done <- appendBulk(p.ctx, p.bulk, pending, hashes) }()
	return nil
}

// wait waits for the bulk being written, if any.
func (p *replayer) wait() error {
	if p.inflight == nil {
		return nil
	}
	err := <-p.inflight
	p.inflight = nil
	if err != nil {
		return err
	}
	p.done += uint64(p.inRecords)
	p.progress(RestoreProgress{Phase: PhaseAppending, Done: p.done, Total: p.total})
	if p.gate != nil {
		p.gate.advance(p.inLast)
	}
	return nil
}

// appendBulk writes one bulk and checks the store chained each record to
// the export's hash.
func appendBulk(ctx context.Context, bw store.BulkWriter, pending []store.BulkAppend, hashes [][]store.Digest) error {
	out, err := bw.AppendBulk(ctx, pending)
	if err != nil {
		return fmt.Errorf("append %d runs from run %s: %w", len(pending), pending[0].Batch[0].Run, err)
	}
	if len(out) != len(pending) {
		return fmt.Errorf("append %d runs from run %s: the store answered for %d", len(pending), pending[0].Batch[0].Run, len(out))
	}
	for i, recs := range out {
		if err := compareHashes(recs, hashes[i]); err != nil {
			return err
		}
	}
	return nil
}

// compareHashes checks that the store chained the records to the export's
// hashes.
func compareHashes(recs []store.Record, hashes []store.Digest) error {
	if len(recs) != len(hashes) {
		return fmt.Errorf("the store appended %d records, the export has %d", len(recs), len(hashes))
	}
	for i, r := range recs {
		if r.Hash != hashes[i] {
			return fmt.Errorf("run %s seq %d: the store computed hash %s, the export says %s", r.Run, r.Seq, r.Hash, hashes[i])
		}
	}
	return nil
}

// sealer seals runs in log order, in bulks of maxBulkSeals with a
// store.BulkWriter (one written while the next is read, in order), else
// one Seal each.
type sealer struct {
	ctx      context.Context
	j        store.Journal
	bulk     store.BulkWriter
	pending  []store.BulkSeal
	leaves   []store.Digest // the export's leaf of each pending seal
	first    uint64         // log index of pending[0]
	progress func(RestoreProgress)
	done     uint64
	total    uint64
	inflight chan error
	inSeals  int
	max      int         // seals in a bulk
	gate     *appendGate // nil: every run is appended already
}

const maxBulkSeals = 8192

func (s *sealer) add(i uint64, sl *logSlot) error {
	if s.bulk == nil {
		leaf, err := s.j.Seal(s.ctx, sl.run, sl.epoch, sl.outcome)
		if err != nil {
			return fmt.Errorf("restore: seal run %s (leaf %d): %w", sl.run, i, err)
		}
		if leaf != sl.leaf {
			return fmt.Errorf("restore: run %s sealed with leaf %s, the export says %s", sl.run, leaf, sl.leaf)
		}
		if s.done++; s.done%4096 == 0 {
			s.progress(RestoreProgress{Phase: PhaseSealing, Done: s.done, Total: s.total})
		}
		return nil
	}
	if s.gate != nil {
		if err := s.gate.wait(s.ctx, sl.run); err != nil {
			return err
		}
	}
	if len(s.pending) == 0 {
		s.first = i
	}
	s.pending = append(s.pending, store.BulkSeal{Run: sl.run, Epoch: sl.epoch, Outcome: sl.outcome, Leaf: sl.leaf})
	s.leaves = append(s.leaves, sl.leaf)
	if len(s.pending) == s.max {
		return s.flush()
	}
	return nil
}

func (s *sealer) flush() error {
	if err := s.wait(); err != nil {
		return err
	}
	if len(s.pending) == 0 {
		return nil
	}
	pending, want, first := s.pending, s.leaves, s.first
	s.inSeals = len(pending)
	s.pending, s.leaves = nil, nil
	done := make(chan error, 1)
	s.inflight = done
	go func() { done <- sealBulk(s.ctx, s.bulk, pending, want, first) }()
	return nil
}

// wait waits for the bulk being sealed, if any.
func (s *sealer) wait() error {
	if s.inflight == nil {
		return nil
	}
	err := <-s.inflight
	s.inflight = nil
	if err != nil {
		return err
	}
	s.done += uint64(s.inSeals)
	s.progress(RestoreProgress{Phase: PhaseSealing, Done: s.done, Total: s.total})
	return nil
}

// sealBulk seals one bulk and checks each leaf is the export's.
func sealBulk(ctx context.Context, bw store.BulkWriter, pending []store.BulkSeal, want []store.Digest, first uint64) error {
	leaves, err := bw.SealBulk(ctx, pending)
	if err != nil {
		return fmt.Errorf("restore: seal runs %s to %s (leaves %d to %d): %w", pending[0].Run, pending[len(pending)-1].Run, first, first+uint64(len(pending))-1, err)
	}
	if len(leaves) != len(pending) {
		return fmt.Errorf("restore: sealed %d runs, the store answered for %d", len(pending), len(leaves))
	}
	for k, leaf := range leaves {
		if leaf != want[k] {
			return fmt.Errorf("restore: run %s sealed with leaf %s, the export says %s", pending[k].Run, leaf, want[k])
		}
	}
	return nil
}

// targetRuns answers, for runs asked in ascending order, whether the
// target holds them, by reading the target's own run listing a page at a
// time beside the export.
type targetRuns struct {
	j    store.Finder
	page []store.RunID
	pos  int
	end  bool
}

const targetPage = 1000

func (t *targetRuns) fill(ctx context.Context) error {
	var after *store.RunID
	if len(t.page) > 0 {
		last := t.page[len(t.page)-1]
		after = &last
	}
	page, err := t.j.RunsByID(ctx, after, targetPage)
	if err != nil {
		return err
	}
	if len(page) == 0 {
		t.end = true
	}
	t.page, t.pos = page, 0
	return nil
}

// empty reports whether the target holds no run.
func (t *targetRuns) empty(ctx context.Context) (bool, error) {
	if t.page == nil && !t.end {
		if err := t.fill(ctx); err != nil {
			return false, err
		}
	}
	return t.end, nil
}

func (t *targetRuns) holds(ctx context.Context, run store.RunID) (bool, error) {
	for {
		for t.pos < len(t.page) && bytes.Compare(t.page[t.pos][:], run[:]) < 0 {
			t.pos++
		}
		if t.pos < len(t.page) {
			return t.page[t.pos] == run, nil
		}
		if t.end {
			return false, nil
		}
		if err := t.fill(ctx); err != nil {
			return false, err
		}
	}
}

// scannedRecord is one record line of an export, checked.
type scannedRecord struct {
	hash  store.Digest
	raw   []byte // valid until the next line
	body  store.Body
	facts store.Facts
}

// exportScanner reads an export strictly, calling back per run, per record
// and at each run's end. Any departure from the format is an error: unlike
// Verify, which reports, a restore must not write from a file it cannot
// fully trust.
type exportScanner struct {
	onRun    func(blk *runBlock) error
	onRecord func(blk *runBlock, rec *scannedRecord) error
	onRunEnd func(blk *runBlock, latest, lastKind string) error
	progress func(bytesRead int64) // every few MiB; may be nil
	// replay reads a record's body only for its epoch (the record's run
	// and seq are those of its place), and checks no seal: the second
	// reading of a file the first reading checked whole. Every byte still
	// goes to the store, whose append decodes it in full and refuses bytes
	// naming another run, seq or epoch than it assigns, and every hash the
	// store computes is compared with the line's; the file's digest is
	// compared with the first reading's at the end.
	replay bool
}

// replayEpoch reads the epoch of a canonical record body, for grouping a
// run's records into appends of one epoch.
func replayEpoch(raw []byte) (store.Epoch, error) {
	var epoch store.Epoch
	var found bool
	var perr error
	err := canon.CheckObject(raw, func(k, v []byte) {
		if string(k) == "epoch" {
			n, err := strconv.ParseUint(string(v), 10, 64)
			epoch, found, perr = store.Epoch(n), true, err
		}
	})
	switch {
	case err != nil:
		return 0, fmt.Errorf("record body: %w", err)
	case perr != nil:
		return 0, fmt.Errorf("record body: \"epoch\": %w", perr)
	case !found:
		return 0, errors.New(`record body: missing "epoch"`)
	}
	return epoch, store.ValidateEpoch(epoch)
}

func (s *exportScanner) scan(ctx context.Context, r io.Reader) (*header, trailer, [32]byte, error) {
	lr := newLineReader(ctx, r, s.progress)
	defer lr.close()
	fail := func(format string, args ...any) error {
		return &FormatError{Line: lr.line, Detail: fmt.Sprintf(format, args...)}
	}
	next := func() ([]byte, error) {
		line, err := lr.next()
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, errUnterminated):
			return nil, &CutError{Line: lr.line}
		case errors.Is(err, errLineTooLong):
			lr.line++
			return nil, fail("line longer than %d bytes", MaxLine)
		}
		return line, err
	}
	line, err := next()
	if err != nil {
		return nil, trailer{}, [32]byte{}, err
	}
	kind, ver, uver, ok := headerKind(line)
	switch {
	case !ok:
		return nil, trailer{}, [32]byte{}, fail("the first line is not an export header")
	case kind == KindPackage:
		return nil, trailer{}, [32]byte{}, fmt.Errorf("%w: a disclosure package carries a selection, not a journal, and is never restored", ErrNotAnExport)
	case kind != KindExport || ver != strconv.Itoa(Version):
		return nil, trailer{}, [32]byte{}, &UnknownFormatError{Kind: kind, Version: uver}
	}
	hdr, err := parseHeader(line)
	if err != nil {
		return nil, trailer{}, [32]byte{}, fail("malformed header: %v", err)
	}
	var (
		blk      runBlock
		got      trailer
		last     store.RunID
		haveLast bool
		rec      scannedRecord
		cache    bodyCache
	)
	for {
		if lr.line%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, trailer{}, [32]byte{}, err
			}
		}
		line, err := next()
		if err != nil {
			return nil, trailer{}, [32]byte{}, err
		}
		if !isRunBlock(line, KindExportRun) {
			t, err := parseTrailer(line, KindExportEnd)
			if err != nil {
				return nil, trailer{}, [32]byte{}, fail("expected a run block or the trailer: %v", err)
			}
			if t != got {
				return nil, trailer{}, [32]byte{}, fail("the trailer counts %+v, the file holds %+v", t, got)
			}
			if _, err := lr.next(); !errors.Is(err, io.EOF) {
				return nil, trailer{}, [32]byte{}, fail("data follows the trailer")
			}
			d, _ := lr.digest()
			return hdr, got, d, nil
		}
		if err := parseRunBlock(line, KindExportRun, false, &blk); err != nil {
			return nil, trailer{}, [32]byte{}, fail("malformed run block: %v", err)
		}
		if haveLast && bytes.Compare(last[:], blk.Run[:]) >= 0 {
			return nil, trailer{}, [32]byte{}, fail("run %s is not after run %s: runs are strictly ascending", blk.Run, last)
		}
		last, haveLast = blk.Run, true
		if blk.Records == 0 {
			return nil, trailer{}, [32]byte{}, fail("run %s has no records", blk.Run)
		}
		if blk.Sealed && blk.Index >= hdr.Checkpoint.Size {
			return nil, trailer{}, [32]byte{}, fail("run %s claims leaf %d of a log of %d", blk.Run, blk.Index, hdr.Checkpoint.Size)
		}
		got.Runs++
		if blk.Sealed {
			got.Sealed++
		}
		if s.onRun != nil {
			if err := s.onRun(&blk); err != nil {
				return nil, trailer{}, [32]byte{}, err
			}
		}
		prev, latest, lastKind := store.ZeroDigest, "", ""
		for seq := store.Seq(1); uint64(seq) <= blk.Records; seq++ {
			line, err := next()
			if err != nil {
				return nil, trailer{}, [32]byte{}, err
			}
			claimed, raw, err := parseRecordLine(line)
			if err != nil {
				return nil, trailer{}, [32]byte{}, fail("expected record %d of run %s: %v", seq, blk.Run, err)
			}
			var body store.Body
			var facts store.Facts
			if s.replay {
				body.Run, body.Seq = blk.Run, seq
				body.Epoch, err = replayEpoch(raw)
			} else {
				body, facts, err = decodeRecordBodyCached(raw, &cache)
			}
			if err != nil {
				return nil, trailer{}, [32]byte{}, fail("run %s seq %d: %v", blk.Run, seq, err)
			}
			if body.Run != blk.Run || body.Seq != seq {
				return nil, trailer{}, [32]byte{}, fail("record names run %s seq %d, expected run %s seq %d", body.Run, body.Seq, blk.Run, seq)
			}
			prev = store.ChainHash(prev, raw)
			if prev != claimed {
				return nil, trailer{}, [32]byte{}, fail("run %s seq %d: the bytes hash to %s, the line claims %s", blk.Run, seq, prev, store.Digest(claimed))
			}
			if body.Kind == store.KindRunConcluded {
				latest = facts.Outcome
			}
			lastKind = body.Kind
			got.Records++
			rec = scannedRecord{hash: claimed, raw: raw, body: body, facts: facts}
			if s.onRecord != nil {
				if err := s.onRecord(&blk, &rec); err != nil {
					return nil, trailer{}, [32]byte{}, err
				}
			}
		}
		if blk.Sealed && !s.replay {
			if prev != blk.Seal {
				return nil, trailer{}, [32]byte{}, fail("run %s: the seal %s is not its terminal hash %s", blk.Run, blk.Seal, prev)
			}
			if !store.IsSealingOutcome(latest) {
				return nil, trailer{}, [32]byte{}, fail("run %s is sealed but its latest conclusion %q does not seal", blk.Run, latest)
			}
		}
		if s.onRunEnd != nil {
			if err := s.onRunEnd(&blk, latest, lastKind); err != nil {
				return nil, trailer{}, [32]byte{}, err
			}
		}
	}
}
