package disclosure

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// Verdict is what Verify concludes about a package.
type Verdict string

// The verdicts. Only Sound means "accept".
const (
	// Sound: every check passed, the file was read to its trailer, and
	// the checkpoint is signed by the log and met the witness policy.
	Sound Verdict = "sound"
	// NotSound: something in the package is false or inconsistent: a hash,
	// a signature, a proof, a count, the framing. Evidence of tampering or
	// corruption.
	NotSound Verdict = "not_sound"
	// Unverifiable: no finding, but no verdict either: the file is cut, of
	// a kind or version this build does not read, or the keys and policy
	// given could not establish the checkpoint.
	Unverifiable Verdict = "unverifiable"
)

// The checks a Finding can name.
const (
	CheckHeader           = "header"            // the first line is a well-formed package header
	CheckFraming          = "framing"           // every line is the line the format expects there
	CheckCheckpoint       = "checkpoint"        // the signed note, its signatures, and the header's copy of it
	CheckRecordBody       = "record_body"       // raw bytes are a canonical, valid record body
	CheckRecordHash       = "record_hash"       // hash = SHA-256(prev_hash || raw)
	CheckChain            = "chain"             // seqs contiguous from 1
	CheckRunLabel         = "run_label"         // every record names its block's run
	CheckSeal             = "seal"              // the seal is the recomputed terminal hash
	CheckSealedConclusion = "sealed_conclusion" // a sealed run's latest conclusion is a sealing outcome
	CheckInclusion        = "inclusion"         // the seal is the claimed leaf of the checkpoint's tree
	CheckLeafStripped     = "leaf_stripped"     // no unsealed run ends in a sealing conclusion
	CheckEmptyRun         = "empty_run"         // no run block without records
	CheckDuplicateRun     = "duplicate_run"     // no run twice
	CheckOrder            = "order"             // runs ascending, case blocks after runs, in selection order
	CheckSelection        = "selection"         // selected runs carried; carried runs selected
	CheckCaseCount        = "case_count"        // case blocks count the runs stamped with the case
	CheckTrailer          = "trailer"           // trailer counts equal what was read
	CheckAfterTrailer     = "after_trailer"     // nothing follows the trailer
	CheckStatement        = "statement"         // the discloser's signed statement covers what was read
)

// Checks are the names a Finding's Check can hold, in the order
// spec/disclosure.md section 4.1 lists them.
var Checks = []string{CheckHeader, CheckCheckpoint, CheckFraming, CheckRecordBody, CheckRunLabel, CheckChain, CheckRecordHash,
	CheckEmptyRun, CheckDuplicateRun, CheckOrder, CheckSeal, CheckSealedConclusion, CheckInclusion, CheckLeafStripped,
	CheckSelection, CheckCaseCount, CheckTrailer, CheckStatement, CheckAfterTrailer}

// Options configures Verify.
type Options struct {
	// Logs are the log's verifier keys. The checkpoint must carry a valid
	// signature by one named as its origin. Log lines of Policy count too.
	Logs []note.Verifier
	// Policy is the witness policy the checkpoint's cosignatures must meet.
	// Without one the witnesses are not checked and the verdict cannot be
	// Sound; a policy with "quorum none" accepts an unwitnessed checkpoint
	// on purpose.
	Policy *checkpoint.Policy
	// Disclosure are the journal's disclosure verifier keys: the package's
	// statement must carry a valid signature by one of them named
	// <checkpoint origin>/disclosure (DisclosureKeySuffix), or the package
	// is not Sound, and every signature line by any of them must verify.
	// Give each key once (MergeDisclosureKeys). They MUST NOT be log keys
	// (spec/disclosure.md 2.7).
	Disclosure []note.Verifier
	// Progress, when set, is called with the bytes read so far, every few
	// megabytes and at the end.
	Progress func(bytesRead int64)
	// MaxFindings bounds the findings kept in the report (100 when 0);
	// further ones are counted in FindingsOmitted.
	MaxFindings int
	// OnRecord, when set, is called with the raw bytes of each record whose
	// body decodes, in package order (the auditor reports sealed and erased
	// fields with it). It must not keep raw.
	OnRecord func(raw []byte)
	// RecordFilter, when set, narrows the records OnRecord is called with
	// to those with a top-level member it accepts. It is called with each
	// member's key, as written between its quotes, and the exact bytes of
	// its canonical value, while the body is checked, so a caller that
	// looks for rare records (sealed.Relevant) does not scan every record
	// again. It is called from other goroutines than Verify's, so it must
	// be safe for concurrent use, and must not keep its arguments.
	RecordFilter func(key, value []byte) bool
}

// Finding is one thing found false or inconsistent.
type Finding struct {
	Check  string `json:"check"`
	Line   int64  `json:"line,omitempty"`
	Run    string `json:"run,omitempty"`
	Seq    uint64 `json:"seq,omitempty"`
	Detail string `json:"detail"`
}

// WitnessReport is what the policy made of one witness's cosignature.
type WitnessReport struct {
	Name     string     `json:"name"`
	Key      string     `json:"key"` // key name and key ID
	Cosigned bool       `json:"cosigned"`
	Time     *time.Time `json:"time,omitempty"` // the witness's own clock
	Invalid  bool       `json:"invalid,omitempty"`
}

// CheckpointReport describes the package's checkpoint and what its
// signatures established.
type CheckpointReport struct {
	Origin    string          `json:"origin"`
	Size      uint64          `json:"size"`
	Root      string          `json:"root"` // hex
	LogSigned bool            `json:"log_signed"`
	Witnesses []WitnessReport `json:"witnesses,omitempty"`
	QuorumMet bool            `json:"quorum_met"`
	// Verified is true when the log signature and the witness policy both
	// verified: only then are proofs against this root evidence.
	Verified bool `json:"verified"`
}

// Counts are what was read.
type Counts struct {
	Lines    int64  `json:"lines"`
	Bytes    int64  `json:"bytes"`
	Runs     uint64 `json:"runs"`
	Sealed   uint64 `json:"sealed"`
	Unsealed uint64 `json:"unsealed"`
	Records  uint64 `json:"records"`
	Cases    uint64 `json:"cases"`
}

// Report is the result of Verify: the verdict, what was proven, what was
// found, and, as plainly, what was not checked.
type Report struct {
	Verdict    Verdict           `json:"verdict"`
	Kind       string            `json:"kind,omitempty"`
	Version    uint64            `json:"version,omitempty"`
	SHA256     string            `json:"sha256"` // of the whole input; empty if it could not be read to its end
	Checkpoint *CheckpointReport `json:"checkpoint,omitempty"`
	// Statement is what the discloser's signed statement established.
	Statement *StatementReport `json:"statement,omitempty"`
	// SelectedRuns and SelectedCases are the header's selection.
	SelectedRuns  []string `json:"selected_runs,omitempty"`
	SelectedCases []string `json:"selected_cases,omitempty"`
	Counts        Counts   `json:"counts"`
	// Complete is true when the file was read through its trailer and
	// nothing followed it.
	Complete        bool      `json:"complete"`
	Proven          []string  `json:"proven"`
	Findings        []Finding `json:"findings"`
	FindingsOmitted int       `json:"findings_omitted,omitempty"`
	// Unverifiable gives the reasons there is no verdict beyond findings:
	// a cut file, an unknown format, keys or a policy that could not
	// establish the checkpoint.
	Unverifiable []string `json:"unverifiable"`
	NotChecked   []string `json:"not_checked"`
}

// Verify reads a disclosure package from r, in one pass and constant memory
// whatever its size, and checks everything it can prove offline:
//
//   - the header's signed checkpoint: the log's signature (a key in
//     opts.Logs or opts.Policy named as the checkpoint origin), the
//     witnesses' cosignatures and the policy's quorum, and that the header's
//     plain copy of the checkpoint is the note's;
//   - every record: its raw bytes are a canonical, valid record body that
//     names its block's run and the next seq from 1, and its hash is
//     SHA-256(prev_hash || raw) over those exact bytes;
//   - every sealed run: its seal is the terminal hash recomputed from its
//     records, its latest conclusion is a sealing outcome, and the seal is
//     leaf index of the checkpoint's tree (inclusion proof against the
//     checkpoint's size and root);
//   - no unsealed run ends in a sealing conclusion (a stripped leaf), no run
//     or log index appears twice, runs come in ascending order;
//   - every selected run is carried, every carried run is selected or
//     stamped with a selected case, each case block counts the carried runs
//     stamped with its case, the trailer's counts equal what was read, and
//     nothing follows the trailer.
//
// The report also says what a package cannot prove (see NotChecked).
// Verify returns an error only when reading fails or ctx ends; the report is
// then Unverifiable and says so.
func Verify(ctx context.Context, r io.Reader, opts Options) (*Report, error) {
	v, err := verify(ctx, r, opts)
	return v.rep, err
}

// verify is Verify, returning the verifier for tests to look into.
func verify(ctx context.Context, r io.Reader, opts Options) (*verifier, error) {
	return verifyWith(ctx, r, opts, &examiner{filter: opts.RecordFilter})
}

// verifyWith is verify with workers that examine record lines ahead with
// x, or, when x is nil, none: every line is then parsed and checked by the
// verifier itself, the path the workers' results must agree with
// (TestVerify_AheadAgreesWithInline).
func verifyWith(ctx context.Context, r io.Reader, opts Options, x *examiner) (*verifier, error) {
	if opts.MaxFindings <= 0 {
		opts.MaxFindings = 100
	}
	v := &verifier{opts: opts, rep: &Report{Proven: []string{}, Findings: []Finding{}, Unverifiable: []string{}, NotChecked: []string{}},
		blocks: newBlockDigest()}
	v.lr = newExaminingReader(ctx, r, opts.Progress, x)
	defer v.lr.close()
	err := v.run(ctx)
	if err == nil {
		// The digest and length are the whole input's, even when checking
		// stopped early: they name the file that was judged.
		err = v.lr.drain(ctx)
	}
	if err != nil {
		v.unverifiable(fmt.Sprintf("reading stopped after line %d: %v", v.lr.line, err))
	}
	v.finish()
	return v, err
}

type verifier struct {
	opts Options
	rep  *Report
	lr   *lineReader

	// the checkpoint proofs are checked against
	origin string
	size   uint64
	root   log.Hash

	blocks *blockDigest // what the statement's blocks digest must be
	bodies bodyCache    // the last run id and kind decoded, for lines no worker examined
	chain  chainHasher  // for the chain hashes no worker computed
	incl   inclusionMemo

	sel        Selection
	selIdx     int      // next selected run not yet passed
	caseRuns   []uint64 // per selected case, carried runs stamped with it
	caseBlocks int      // case blocks read
	inCases    bool     // a case block was read: no run block may follow

	// the current run
	blk       runBlock
	remaining uint64 // record lines still expected
	nextSeq   store.Seq
	prev      store.Digest // the recomputed chain head
	latest    string       // the latest conclusion's outcome
	explicit  bool         // selected by id
	hits      []bool       // selected cases its records are stamped with
	hashBad   bool         // a hash finding was already reported for this run
	lastRun   store.RunID
	haveLast  bool

	chainedAhead uint64 // records whose chain hash a worker computed

	ended    bool // the trailer was read
	stopped  bool // a structural finding stopped the reading
	cpLogOK  bool // a log key's signature verified, and no signature failed
	cpQuorum bool // the log signature and the witness policy verified
}

func (v *verifier) find(check string, run *store.RunID, seq store.Seq, format string, args ...any) {
	if len(v.rep.Findings) >= v.opts.MaxFindings {
		v.rep.FindingsOmitted++
		return
	}
	f := Finding{Check: check, Line: v.lr.line, Seq: uint64(seq), Detail: fmt.Sprintf(format, args...)}
	if run != nil {
		f.Run = run.String()
	}
	v.rep.Findings = append(v.rep.Findings, f)
}

// stop records a finding that makes the rest of the file unreadable as a
// package, and stops reading.
func (v *verifier) stop(check string, format string, args ...any) {
	v.find(check, nil, 0, format, args...)
	v.stopped = true
}

func (v *verifier) unverifiable(reason string) {
	v.rep.Unverifiable = append(v.rep.Unverifiable, reason)
}

func (v *verifier) run(ctx context.Context) error {
	line, err := v.lr.next()
	switch {
	case errors.Is(err, io.EOF):
		v.unverifiable("the file is empty")
		return nil
	case errors.Is(err, errUnterminated):
		v.unverifiable("the file ends inside its first line: it was cut")
		return nil
	case errors.Is(err, errLineTooLong):
		v.stop(CheckHeader, "the first line is longer than %d bytes", MaxLine)
		return nil
	case err != nil:
		return err
	}
	if !v.header(line) {
		return nil
	}
	for !v.stopped {
		if v.lr.line%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		line, err := v.lr.next()
		switch {
		case errors.Is(err, io.EOF):
			if !v.ended {
				where := ""
				if v.remaining > 0 {
					where = fmt.Sprintf(", inside run %s with %d of its records missing", v.blk.Run, v.remaining)
				}
				v.unverifiable(fmt.Sprintf("the file ends after line %d without its trailer%s: it was cut, and what it lacks is unknown", v.lr.line, where))
			}
			return nil
		case errors.Is(err, errUnterminated):
			if v.ended {
				v.stop(CheckAfterTrailer, "bytes follow the trailer")
				return nil
			}
			v.unverifiable(fmt.Sprintf("the file ends inside line %d, without its trailer: it was cut, and what it lacks is unknown", v.lr.line+1))
			return nil
		case errors.Is(err, errLineTooLong):
			v.lr.line++
			if v.ended {
				// Any byte after the trailer is after_trailer, however long
				// the line and whether or not it ends: nothing is read
				// past MaxLine to tell.
				v.stop(CheckAfterTrailer, "a line follows the trailer")
				return nil
			}
			v.stop(CheckFraming, "line longer than %d bytes", MaxLine)
			return nil
		case err != nil:
			return err
		}
		switch {
		case v.ended:
			v.stop(CheckAfterTrailer, "a line follows the trailer")
		case v.remaining > 0:
			v.record(line)
		case isRunBlock(line, KindPackageRun):
			v.runBlock(line)
		default:
			switch kind, _ := kindOf(line); kind {
			case KindPackageCase:
				v.caseBlock(line)
			case KindPackageEnd:
				v.trailer(line)
			default:
				v.stop(CheckFraming, "expected a run block, a case block or the trailer")
			}
		}
	}
	return nil
}

// header reads the first line and the checkpoint it carries. It returns
// false when the rest of the file cannot be read as a package.
func (v *verifier) header(line []byte) bool {
	kind, ver, uver, ok := headerKind(line)
	if !ok {
		v.stop(CheckHeader, "the first line is not a package header")
		return false
	}
	v.rep.Kind, v.rep.Version = kind, uver
	switch {
	case kind == KindExport:
		v.unverifiable("this is a whole export (kind " + KindExport + "), not a disclosure package: an export carries no signed checkpoint; restore it with journal restore")
		return false
	case kind == KindPackageRun || kind == KindPackageCase || kind == KindPackageEnd || kind == KindExportRun || kind == KindExportEnd:
		// A known line kind out of place: the file lost its first line, or
		// was spliced; either way it is damaged, not of an unknown kind.
		v.stop(CheckHeader, "the file does not start with its header (the first line is a %s line)", kind)
		return false
	case kind != KindPackage:
		v.unverifiable(fmt.Sprintf("not a runseal disclosure package: the first line's kind is %q", kind))
		return false
	case ver == "":
		v.stop(CheckHeader, "the header has no integer version")
		return false
	case ver != strconv.Itoa(Version):
		v.unverifiable(fmt.Sprintf("package version %s is not understood by this build (it reads version %d)", prefix(ver), Version))
		return false
	}
	h, err := parseHeader(line)
	if err != nil {
		v.stop(CheckHeader, "malformed header: %v", err)
		return false
	}
	v.sel = h.Selection
	v.caseRuns = make([]uint64, len(v.sel.Cases))
	v.hits = make([]bool, len(v.sel.Cases))
	for _, r := range v.sel.Runs {
		v.rep.SelectedRuns = append(v.rep.SelectedRuns, r.String())
	}
	for _, c := range v.sel.Cases {
		v.rep.SelectedCases = append(v.rep.SelectedCases, c.String())
	}
	v.checkpoint(h)
	return true
}

// checkpoint verifies the header's signed note, reports on its signatures,
// and fixes the size and root that proofs are checked against.
func (v *verifier) checkpoint(h *header) {
	v.origin, v.size, v.root = h.Checkpoint.Origin, h.Checkpoint.Size, log.Hash(h.Checkpoint.Root)
	nc := CheckNote(h.Note, v.opts)
	cr := &nc.Report
	v.rep.Checkpoint = cr
	if !nc.Parsed {
		cr.Origin, cr.Size, cr.Root = h.Checkpoint.Origin, h.Checkpoint.Size, h.Checkpoint.Root.String()
	} else {
		// Proofs are checked against the note's size and root, the ones
		// the signatures cover.
		body := nc.Checkpoint
		v.origin, v.size, v.root = body.Origin, body.Size, log.Hash(body.Root)
		if body.Origin != h.Checkpoint.Origin || body.Size != h.Checkpoint.Size || body.Root != [32]byte(h.Checkpoint.Root) {
			v.find(CheckCheckpoint, nil, 0, "the header's checkpoint (%s, %d, %s) is not the signed note's (%s, %d, %x)",
				h.Checkpoint.Origin, h.Checkpoint.Size, h.Checkpoint.Root, body.Origin, body.Size, body.Root)
		}
		if len(body.Extensions) > 0 {
			v.rep.NotChecked = append(v.rep.NotChecked, "The checkpoint's extension lines: they are opaque, and witnesses make no statement about them.")
		}
	}
	for _, f := range nc.Findings {
		v.find(CheckCheckpoint, nil, 0, "%s", f)
	}
	for _, u := range nc.Unverifiable {
		v.unverifiable(u)
	}
	v.cpLogOK = cr.LogSigned && len(nc.Findings) == 0
	v.cpQuorum = cr.Verified
}

// NoteCheck is what CheckNote established about a signed checkpoint note.
type NoteCheck struct {
	Report CheckpointReport
	// Checkpoint is the note's body. It is parsed whenever Parsed is true,
	// but only trustworthy when Verdict is Sound.
	Checkpoint checkpoint.Checkpoint
	Parsed     bool
	// Signed holds the verified log and witness signatures when the note
	// met the keys and the policy.
	Signed *checkpoint.Signed
	// Findings say what is false about the note (the verdict is then
	// NotSound); Unverifiable, what the keys and policy given could not
	// establish.
	Findings     []string
	Unverifiable []string
}

// Verdict is NotSound with findings, Unverifiable without findings but
// with something not established, and Sound otherwise.
func (c *NoteCheck) Verdict() Verdict {
	switch {
	case len(c.Findings) > 0:
		return NotSound
	case len(c.Unverifiable) > 0:
		return Unverifiable
	}
	return Sound
}

// CheckNote verifies a signed checkpoint note with the log keys and witness
// policy of opts, by the rules Verify applies to a package's checkpoint: a
// valid signature by a log key named as the origin, no invalid signature by
// any known key, a coherent checkpoint, and the policy's quorum. A note that
// is malformed or carries an invalid signature is a finding; a note no given
// log key signed, an unmet quorum, or a missing policy leaves it
// unverifiable. The report also says which witnesses cosigned, and when.
func CheckNote(n []byte, opts Options) *NoteCheck {
	nc := &NoteCheck{}
	cr := &nc.Report
	if body, ok := noteBody(n); ok {
		nc.Checkpoint, nc.Parsed = body, true
		cr.Origin, cr.Size, cr.Root = body.Origin, body.Size, hex.EncodeToString(body.Root[:])
	} else {
		nc.Findings = append(nc.Findings, "the note is not a signed checkpoint note")
	}
	classify := func(err error) {
		switch {
		case err == nil:
		case errors.Is(err, checkpoint.ErrInvalidSignature), errors.Is(err, checkpoint.ErrMalformedNote),
			errors.Is(err, checkpoint.ErrMalformedCheckpoint), errors.Is(err, checkpoint.ErrIncoherent):
			nc.Findings = append(nc.Findings, fmt.Sprintf("the signed checkpoint does not verify: %v", err))
		case errors.Is(err, checkpoint.ErrUnverified):
			nc.Unverifiable = append(nc.Unverifiable, fmt.Sprintf("the checkpoint carries no valid signature by a given log key named %q: %v", cr.Origin, err))
		case errors.Is(err, checkpoint.ErrPolicyNotMet):
			nc.Unverifiable = append(nc.Unverifiable, fmt.Sprintf("the witness policy is not met: %v", err))
		default:
			nc.Unverifiable = append(nc.Unverifiable, fmt.Sprintf("the checkpoint could not be checked with the keys and policy given: %v", err))
		}
	}
	logs := slices.Clone(opts.Logs)
	if opts.Policy != nil {
		logs = append(logs, opts.Policy.Logs()...)
	}
	if len(logs) == 0 {
		nc.Unverifiable = append(nc.Unverifiable, "no log key was given: the checkpoint's signature was not checked")
	} else {
		s, err := checkpoint.Open(n, note.VerifierList(logs...))
		if err == nil {
			for _, l := range logs {
				if l.Name() == cr.Origin && s.SignedBy(l) {
					cr.LogSigned = true
				}
			}
			if !cr.LogSigned {
				err = fmt.Errorf("%w: no log key named %q signed it", checkpoint.ErrUnverified, cr.Origin)
			}
		}
		if opts.Policy == nil {
			classify(err)
		}
	}
	if opts.Policy == nil {
		nc.Unverifiable = append(nc.Unverifiable, "no witness policy was given: the witness cosignatures and quorum were not checked (a policy with \"quorum none\" accepts an unwitnessed checkpoint deliberately)")
		return nc
	}
	if ev, err := opts.Policy.Evaluate(n); err == nil {
		cr.QuorumMet = ev.Met
		for _, w := range ev.Witnesses {
			wr := WitnessReport{Name: w.Name, Key: fmt.Sprintf("%s+%08x", w.KeyName, w.KeyHash), Cosigned: w.Cosigned, Invalid: w.Invalid}
			if w.Cosigned {
				t := w.Time
				wr.Time = &t
			}
			cr.Witnesses = append(cr.Witnesses, wr)
		}
	}
	if len(logs) == 0 {
		return nc
	}
	s, err := opts.Policy.Verify(n, opts.Logs...)
	classify(err)
	if err == nil {
		nc.Signed = s
		cr.Verified, cr.LogSigned, cr.QuorumMet = true, true, true
	}
	return nc
}

// noteBody parses the checkpoint body of a signed note without checking
// any signature, to compare it with the header and to check proofs against.
func noteBody(n []byte) (checkpoint.Checkpoint, bool) {
	i := bytes.Index(n, []byte("\n\n"))
	if i < 0 {
		return checkpoint.Checkpoint{}, false
	}
	cp, err := checkpoint.Parse(n[:i+1])
	return cp, err == nil
}

func (v *verifier) runBlock(line []byte) {
	if v.inCases {
		v.stop(CheckOrder, "a run block follows the case blocks")
		return
	}
	if err := parseRunBlock(line, KindPackageRun, true, &v.blk); err != nil {
		v.stop(CheckFraming, "malformed run block: %v", err)
		return
	}
	run := v.blk.Run
	v.blocks.line(line, false)
	v.rep.Counts.Runs++
	if v.haveLast {
		switch c := bytes.Compare(v.lastRun[:], run[:]); {
		case c == 0:
			v.find(CheckDuplicateRun, &run, 0, "run carried twice")
		case c > 0:
			v.find(CheckOrder, &run, 0, "run blocks are not in ascending run order (after %s)", v.lastRun)
		}
	}
	if !v.haveLast || bytes.Compare(v.lastRun[:], run[:]) < 0 {
		v.lastRun, v.haveLast = run, true
	}
	// Selected runs are ascending and so are run blocks: one walk finds
	// every selected run that is not carried.
	for v.selIdx < len(v.sel.Runs) && bytes.Compare(v.sel.Runs[v.selIdx][:], run[:]) < 0 {
		missing := v.sel.Runs[v.selIdx]
		v.find(CheckSelection, &missing, 0, "selected run is not carried")
		v.selIdx++
	}
	v.explicit = v.selIdx < len(v.sel.Runs) && v.sel.Runs[v.selIdx] == run
	if v.explicit {
		v.selIdx++
	}
	v.remaining, v.nextSeq, v.prev, v.latest, v.hashBad = v.blk.Records, 1, store.ZeroDigest, "", false
	clear(v.hits)
	if v.blk.Records == 0 {
		v.find(CheckEmptyRun, &run, 0, "run block with no records: no run exists without its first record")
		v.finishRun()
	}
}

func (v *verifier) record(line []byte) {
	run := v.blk.Run
	seq := v.nextSeq
	// A worker examined most lines ahead (examine.go); its findings, the
	// line's parse included, are the same functions of the same bytes.
	x := v.lr.examined(len(line))
	var claimed store.Digest
	var raw []byte
	var rec recordFacts
	if x != nil {
		claimed, raw, rec = x.claimed, line[x.rawStart:x.rawEnd], x.rec
		v.rep.Counts.Records++
	} else {
		var err error
		claimed, raw, err = parseRecordLine(line)
		if err != nil {
			v.stop(CheckFraming, "expected record %d of %d of run %s: %v", seq, v.blk.Records, run, err)
			return
		}
		v.rep.Counts.Records++
		rec = examineBody(raw, &v.bodies, v.opts.RecordFilter)
	}
	if rec.err != nil {
		v.find(CheckRecordBody, &run, seq, "%v", rec.err)
	} else {
		if rec.run != run {
			v.find(CheckRunLabel, &run, seq, "the record names run %s", rec.run)
		}
		if rec.seq != seq {
			v.find(CheckChain, &run, seq, "the record says seq %d where seq %d follows", rec.seq, seq)
		}
		if rec.kind == store.KindRunConcluded {
			v.latest = rec.outcome
		}
		if v.opts.OnRecord != nil && (v.opts.RecordFilter == nil || rec.relevant) {
			v.opts.OnRecord(raw)
		}
		if !rec.caseID.IsZero() {
			if i, ok := slices.BinarySearchFunc(v.sel.Cases, rec.caseID, func(a, b store.CaseID) int { return bytes.Compare(a[:], b[:]) }); ok {
				v.hits[i] = true
			}
		}
	}
	// The chain is recomputed from the bytes alone; claimed hashes are
	// compared, never used. A worker's chain hash is taken only when it
	// chained from the very hash recomputed here.
	if x != nil && x.chained && x.used == v.prev {
		v.prev = x.chain
		v.chainedAhead++
	} else {
		v.prev = v.chain.sum(v.prev, raw)
	}
	if v.prev != claimed && !v.hashBad {
		v.find(CheckRecordHash, &run, seq, "SHA-256(prev_hash || raw) is %s, the line claims %s: the bytes were changed", v.prev, store.Digest(claimed))
		v.hashBad = true
	}
	v.nextSeq++
	v.remaining--
	if v.remaining == 0 {
		v.finishRun()
	}
}

func (v *verifier) finishRun() {
	run := v.blk.Run
	last := v.nextSeq - 1
	sealing := store.IsSealingOutcome(v.latest)
	v.blocks.head(v.prev)
	if v.blk.Sealed {
		v.rep.Counts.Sealed++
		// No set of the indexes seen is kept: two runs whose inclusion
		// verifies at one index have one terminal hash, so one last record,
		// which names its run, and run blocks are strictly ascending, so
		// the same run twice is a duplicate_run finding. Memory stays
		// independent of the number of blocks.
		if v.blk.Records > 0 && v.prev != v.blk.Seal {
			v.find(CheckSeal, &run, last, "the seal %s is not the terminal hash %s of the records carried", v.blk.Seal, v.prev)
		}
		if v.blk.Records > 0 && !sealing {
			v.find(CheckSealedConclusion, &run, last, "sealed, but its latest conclusion %q is not a sealing outcome", v.latest)
		}
		// The leaf checked is the one recomputed from the records: that
		// is what binds the records to the log. The memo accepts what
		// log.InclusionHolds accepts, which accepts what VerifyInclusion
		// accepts, without its allocations, hashing only where the path
		// leaves the last run's; the library names what is wrong with a
		// proof it refuses.
		if !v.incl.holds(log.Hash(v.prev), v.blk.Index, v.size, v.blk.Proof, v.root) {
			if err := log.VerifyInclusion(log.Hash(v.prev), v.blk.Index, v.size, v.blk.Proof, v.root); err != nil {
				v.find(CheckInclusion, &run, 0, "the records' terminal hash is not leaf %d of the checkpoint's tree: %v", v.blk.Index, err)
			}
		}
	} else {
		v.rep.Counts.Unsealed++
		if sealing {
			v.find(CheckLeafStripped, &run, last, "its latest conclusion %q seals, but the package gives it no log position: a leaf was stripped", v.latest)
		}
	}
	stamped := false
	for i, h := range v.hits {
		if h {
			stamped = true
			v.caseRuns[i]++
		}
	}
	if !v.explicit && !stamped {
		v.find(CheckSelection, &run, 0, "carried, but neither selected nor stamped with a selected case")
	}
}

// passSelection reports the selected runs no block carried.
func (v *verifier) passSelection() {
	for ; v.selIdx < len(v.sel.Runs); v.selIdx++ {
		missing := v.sel.Runs[v.selIdx]
		v.find(CheckSelection, &missing, 0, "selected run is not carried")
	}
}

func (v *verifier) caseBlock(line []byte) {
	if !v.inCases {
		v.passSelection()
		v.inCases = true
	}
	c, n, err := parseCaseBlock(line)
	if err != nil {
		v.stop(CheckFraming, "malformed case block: %v", err)
		return
	}
	v.blocks.line(line, false)
	if v.caseBlocks >= len(v.sel.Cases) || v.sel.Cases[v.caseBlocks] != c {
		v.stop(CheckOrder, "case block %s is not the next selected case", c)
		return
	}
	if n != v.caseRuns[v.caseBlocks] {
		v.find(CheckCaseCount, nil, 0, "case %s: the block counts %d runs, %d carried runs are stamped with it", c, n, v.caseRuns[v.caseBlocks])
	}
	v.caseBlocks++
	v.rep.Counts.Cases++
}

func (v *verifier) trailer(line []byte) {
	t, err := parseTrailer(line, KindPackageEnd)
	if err != nil {
		v.stop(CheckFraming, "malformed trailer: %v", err)
		return
	}
	v.passSelection()
	for i := v.caseBlocks; i < len(v.sel.Cases); i++ {
		v.find(CheckSelection, nil, 0, "selected case %s has no case block", v.sel.Cases[i])
	}
	c := v.rep.Counts
	if t.Runs != c.Runs || t.Sealed != c.Sealed || t.Records != c.Records || t.Cases != c.Cases {
		v.find(CheckTrailer, nil, 0, "the trailer counts %d runs, %d sealed, %d records, %d cases; the file holds %d, %d, %d, %d",
			t.Runs, t.Sealed, t.Records, t.Cases, c.Runs, c.Sealed, c.Records, c.Cases)
	}
	v.statement(t)
	v.ended = true
}

// statement checks the discloser's signed statement against what was read:
// the checkpoint, the selection, the counts and every block. The statement
// is what authenticates the framing; without a valid one a package is
// never Sound.
func (v *verifier) statement(t trailer) {
	sr := &StatementReport{}
	v.rep.Statement = sr
	if t.Statement == "" {
		v.find(CheckStatement, nil, 0, "the trailer carries no signed statement: the selection, the case blocks and the counts are not authenticated")
		return
	}
	signed, keys, err := openStatement([]byte(t.Statement), v.opts.Disclosure, v.origin)
	sr.Recipient = signed.Recipient
	switch {
	case errors.Is(err, errNoDisclosureKey):
		v.unverifiable(fmt.Sprintf("the discloser's statement: %v (give the journal's disclosure verifier key)", err))
	case err != nil:
		v.find(CheckStatement, nil, 0, "%v", err)
		return
	}
	for _, d := range v.opts.Disclosure {
		for _, l := range v.logKeys() {
			if d.Name() == l.Name() && d.KeyHash() == l.KeyHash() {
				v.unverifiable(fmt.Sprintf("the disclosure key %s+%08x given is also a log key: a statement must be signed by a key of its own", d.Name(), d.KeyHash()))
				return
			}
		}
	}
	c := v.rep.Counts
	read := Statement{Checkpoint: store.Checkpoint{Origin: v.origin, Size: v.size, Root: store.Digest(v.root)}, Recipient: signed.Recipient,
		Selection: selectionDigest(v.sel), Runs: c.Runs, Sealed: c.Sealed, Records: c.Records, Cases: c.Cases, Blocks: v.blocks.sum()}
	diff := sameStatement(signed, read)
	for _, d := range diff {
		v.find(CheckStatement, nil, 0, "the package is not the one the discloser signed: its %s differs", d)
	}
	if err == nil && len(diff) == 0 {
		sr.Verified, sr.Keys = true, keys
	}
}

// logKeys are the log keys given, directly and in the policy.
func (v *verifier) logKeys() []note.Verifier {
	logs := slices.Clone(v.opts.Logs)
	if v.opts.Policy != nil {
		logs = append(logs, v.opts.Policy.Logs()...)
	}
	return logs
}

func (v *verifier) finish() {
	r := v.rep
	r.Counts.Lines, r.Counts.Bytes = v.lr.line, v.lr.read
	if d, n := v.lr.digest(); n >= 0 {
		r.SHA256, r.Counts.Bytes = hex.EncodeToString(d[:]), n
	}
	if v.opts.Progress != nil {
		v.opts.Progress(r.Counts.Bytes)
	}
	r.Complete = v.ended && !v.stopped
	switch {
	case len(r.Findings) > 0 || r.FindingsOmitted > 0:
		r.Verdict = NotSound
	case len(r.Unverifiable) > 0 || !r.Complete:
		r.Verdict = Unverifiable
		if len(r.Unverifiable) == 0 {
			r.Unverifiable = append(r.Unverifiable, "the file was not read to its end")
		}
	default:
		r.Verdict = Sound
	}
	if r.Checkpoint == nil {
		return
	}
	v.proven()
	v.notChecked()
}

// proven lists what the checks established; each statement only when every
// check it rests on passed and the file was read completely.
func (v *verifier) proven() {
	r := v.rep
	cp := r.Checkpoint
	if v.cpLogOK {
		r.Proven = append(r.Proven, fmt.Sprintf("The checkpoint %s, size %d, root %s is signed by the log's key.", cp.Origin, cp.Size, cp.Root))
	}
	if v.cpQuorum {
		var who []string
		for _, w := range cp.Witnesses {
			if w.Cosigned {
				who = append(who, fmt.Sprintf("%s at %s", w.Name, w.Time.Format(time.RFC3339)))
			}
		}
		if len(who) == 0 {
			r.Proven = append(r.Proven, "The witness policy is met (it requires no cosignature).")
		} else {
			r.Proven = append(r.Proven, fmt.Sprintf("It is cosigned by %d witness(es) of the policy, meeting its quorum: %s (times by the witnesses' clocks).", len(who), strings.Join(who, ", ")))
		}
	}
	if !r.Complete || len(r.Findings) > 0 || r.FindingsOmitted > 0 {
		return
	}
	c := r.Counts
	r.Proven = append(r.Proven,
		fmt.Sprintf("All %d records are canonical record bodies, each hashing to its stated hash over its exact bytes, chained without a gap from seq 1 within runs that each name their own run.", c.Records))
	if c.Sealed > 0 && v.cpLogOK && v.cpQuorum {
		r.Proven = append(r.Proven,
			fmt.Sprintf("Each of the %d sealed runs ends in a sealing conclusion, and its terminal hash is the leaf at its stated index of the checkpoint's tree: its records are, completely and in order, the history the log committed to.", c.Sealed))
	}
	r.Proven = append(r.Proven,
		"No unsealed run ends in a sealing conclusion (no leaf was stripped), and no run or log index appears twice.",
		fmt.Sprintf("The package is whole: its trailer's counts (%d runs, %d records, %d case blocks) match what was read, every selected run and case is carried, and every run carried was selected.", c.Runs, c.Records, c.Cases))
	if st := r.Statement; st != nil && st.Verified {
		r.Proven = append(r.Proven, fmt.Sprintf("It is the package the discloser signed for %q with disclosure key %s: the statement covers its checkpoint, its selection, its counts and every run and case block with its records.",
			st.Recipient, strings.Join(st.Keys, ", ")))
	}
}

func (v *verifier) notChecked() {
	r := v.rep
	if r.Counts.Unsealed > 0 {
		r.NotChecked = append(r.NotChecked, fmt.Sprintf("The %d unsealed run(s): the log does not commit to them. Their records chain correctly from seq 1, but nothing proves they are all of the run's records, or that none were added later.", r.Counts.Unsealed))
	}
	r.NotChecked = append(r.NotChecked,
		"That the discloser's register holds this act: the statement proves who signed the package, not that it was recorded. Compare the package SHA-256 "+r.SHA256+" with the discloser's register entry (journal disclosures).",
		"That a selected case touched no run beyond those carried: the log does not commit to case membership.",
		"Consistency of this checkpoint with any other view of the log, beyond what the witnesses attest: check it against a checkpoint obtained independently with auditor consistency, or follow the log with auditor monitor.",
		"The rest of the log: only the carried runs' leaves were checked; no tree was rebuilt.",
		"Freshness: cosignature times are reported as the witnesses state them; no time bound was applied.",
		"The meaning of the records: fields of kinds other than those the store reads are opaque to this check.",
	)
}
