package disclosure

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"

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
	OriginChanged bool     `json:"origin_changed"`
	NotCarried    []string `json:"not_carried"`
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
// compared with the export's. Then the sealed runs are sealed in log-index
// order, each with its latest conclusion's outcome under its last record's
// epoch, which rebuilds the log leaf for leaf. Restore succeeds only if the
// rebuilt log's size and root equal the export's (else
// *UnfaithfulRestoreError).
//
// Memory grows with the number of sealed runs and admission keys (tens of
// bytes each), not with records. The file must not change during the
// restore; if its digest differs between the readings, Restore fails.
func Restore(ctx context.Context, j store.Journal, r io.ReadSeeker) (*RestoreReport, error) {
	// A sealing store that writes restored bytes verbatim (store/sealed)
	// can hold an export; one that would seal them again cannot.
	if v, ok := j.(interface{ WritesRawVerbatim() bool }); j.Seals() && !(ok && v.WritesRawVerbatim()) {
		return nil, &RestoreRefusedError{Reason: "the target store rewrites payloads on append (Seals() is true), so it cannot hold the exported bytes"}
	}
	rep := &RestoreReport{NotCarried: notCarried}

	// Reading 1: validate everything, collect the log positions, and
	// check the target, writing nothing.
	type sealedRun struct {
		index   uint64
		run     store.RunID
		leaf    store.Digest
		epoch   store.Epoch
		outcome string
	}
	var sealed []sealedRun
	admissions := map[store.Digest]store.RunID{}
	var lastEpoch store.Epoch
	var effects map[store.Digest]bool
	sc := &exportScanner{
		onRun: func(blk *runBlock) error {
			h, err := j.Head(ctx, blk.Run)
			if err != nil {
				return err
			}
			if h.Seq != 0 {
				return &RestoreRefusedError{Reason: fmt.Sprintf("the target already holds run %s; restore rebuilds history and never merges", blk.Run)}
			}
			effects = map[store.Digest]bool{}
			return nil
		},
		onRecord: func(blk *runBlock, rec *scannedRecord) error {
			lastEpoch = rec.body.Epoch
			if err := store.ValidateEpoch(rec.body.Epoch); err != nil {
				return &FormatError{Detail: fmt.Sprintf("run %s seq %d: %v", blk.Run, rec.body.Seq, err)}
			}
			if k := rec.body.EffectKey; rec.body.Kind == store.KindEffectStarted && k != nil {
				if effects[*k] {
					return &FormatError{Detail: fmt.Sprintf("run %s seq %d: effect %s started twice", blk.Run, rec.body.Seq, *k)}
				}
				effects[*k] = true
			}
			if a := rec.facts.Admission; a != nil && a.Key != "" {
				d := store.Sum([]byte(a.Key))
				if other, dup := admissions[d]; dup {
					return &FormatError{Detail: fmt.Sprintf("admission key %q is claimed by runs %s and %s", a.Key, other, blk.Run)}
				}
				admissions[d] = blk.Run
				holder, held, err := j.AdmittedAs(ctx, a.Key)
				if err != nil {
					return err
				}
				if held {
					return &RestoreRefusedError{Reason: fmt.Sprintf("the target's run %s already holds admission key %q", holder, a.Key)}
				}
			}
			return nil
		},
		onRunEnd: func(blk *runBlock, latest string, lastKind string) error {
			if blk.Sealed {
				sealed = append(sealed, sealedRun{index: blk.Index, run: blk.Run, leaf: blk.Seal, epoch: lastEpoch, outcome: latest})
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
	slices.SortFunc(sealed, func(a, b sealedRun) int {
		switch {
		case a.index < b.index:
			return -1
		case a.index > b.index:
			return 1
		}
		return 0
	})
	if uint64(len(sealed)) != hdr.Checkpoint.Size {
		return nil, refusal(&FormatError{Detail: fmt.Sprintf("%d runs carry a leaf, the log has %d", len(sealed), hdr.Checkpoint.Size)})
	}
	rf := compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	cr := rf.NewEmptyRange(0)
	for i, s := range sealed {
		if s.index != uint64(i) {
			return nil, refusal(&FormatError{Detail: fmt.Sprintf("log index %d is held by no run, or by two", i)})
		}
		lh := log.LeafHash(log.Hash(s.leaf))
		if err := cr.Append(lh[:], nil); err != nil {
			return nil, err
		}
	}
	root := log.EmptyRoot()
	if len(sealed) > 0 {
		rh, err := cr.GetRootHash(nil)
		if err != nil {
			return nil, err
		}
		root = log.Hash(rh)
	}
	if store.Digest(root) != hdr.Checkpoint.Root {
		return nil, refusal(&FormatError{Detail: fmt.Sprintf("the exported leaves make root %x, the header says %s", root, hdr.Checkpoint.Root)})
	}
	target, err := j.Checkpoint(ctx)
	if err != nil {
		return nil, err
	}
	if target.Size != 0 {
		return nil, &RestoreRefusedError{Reason: fmt.Sprintf("the target's log already has %d leaves; restore rebuilds a log and never appends to one", target.Size)}
	}
	rep.OriginChanged = target.Origin != hdr.Checkpoint.Origin

	// Reading 2: replay.
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("restore: rewind: %w", err)
	}
	rp := &replayer{ctx: ctx, j: j}
	sc2 := &exportScanner{
		onRecord: rp.add,
		onRunEnd: func(*runBlock, string, string) error { return rp.flush() },
	}
	_, _, digest2, err := sc2.scan(ctx, r)
	if err != nil {
		return rep, fmt.Errorf("restore: second reading: %w", err)
	}
	if digest1 != digest2 {
		return rep, errors.New("restore: the export changed between its two readings; the target now holds a partial restore and must be discarded")
	}
	rep.Runs, rep.Records = tr.Runs, tr.Records

	// Seal in log order, which rebuilds the tree leaf for leaf.
	for _, s := range sealed {
		leaf, err := j.Seal(ctx, s.run, s.epoch, s.outcome)
		if err != nil {
			return rep, fmt.Errorf("restore: seal run %s (leaf %d): %w", s.run, s.index, err)
		}
		if leaf != s.leaf {
			return rep, fmt.Errorf("restore: run %s sealed with leaf %s, the export says %s", s.run, leaf, s.leaf)
		}
		rep.Sealed++
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

// replayer appends a run's records in groups of one epoch.
type replayer struct {
	ctx    context.Context
	j      store.Journal
	epoch  store.Epoch
	batch  []store.Append
	hashes []store.Digest
	bytes  int
}

const (
	maxReplayRecords = 256
	maxReplayBytes   = 4 << 20
)

func (p *replayer) add(_ *runBlock, rec *scannedRecord) error {
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

func (p *replayer) flush() error {
	if len(p.batch) == 0 {
		return nil
	}
	recs, err := p.j.Append(p.ctx, p.epoch, p.batch)
	if err != nil {
		return fmt.Errorf("append run %s: %w", p.batch[0].Run, err)
	}
	for i, r := range recs {
		if r.Hash != p.hashes[i] {
			return fmt.Errorf("run %s seq %d: the store computed hash %s, the export says %s", r.Run, r.Seq, r.Hash, p.hashes[i])
		}
	}
	p.batch, p.hashes, p.bytes = p.batch[:0], p.hashes[:0], 0
	return nil
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
}

func (s *exportScanner) scan(ctx context.Context, r io.Reader) (*header, trailer, [32]byte, error) {
	lr := newLineReader(ctx, r, nil)
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
	kind, ver, _, ok := headerKind(line)
	switch {
	case !ok:
		return nil, trailer{}, [32]byte{}, fail("the first line is not an export header")
	case kind == KindPackage:
		return nil, trailer{}, [32]byte{}, fmt.Errorf("%w: a disclosure package carries a selection, not a journal, and is never restored", ErrNotAnExport)
	case kind != KindExport || ver != Version:
		return nil, trailer{}, [32]byte{}, &UnknownFormatError{Kind: kind, Version: ver}
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
			body, facts, err := decodeRecordBody(raw)
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
		if blk.Sealed {
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
