package disclosure

import (
	"bytes"
	"crypto/sha256"
	"hash"

	"github.com/runseal/runseal/disclosure/internal/sha256x2"
	"github.com/runseal/runseal/store"
)

// The verifier's two costs per byte beyond the file's own digest are each
// record's chain hash and the check of its body. Both are functions of a
// record line alone, given the hash it chains from, so they are computed
// for whole chunks while the verifier checks the chunks before: the body
// checks by workers, the chain hashes by the file digest's goroutine,
// beside the file's blocks (aheadReader). The verifier uses these results
// only for the exact line examined, and a chain hash only when the hash it
// chained from is the one the verifier recomputed itself: a record line's
// claimed hash is never trusted, only used to start a computation whose
// input the verifier then compares.

// examiner configures the workers of a verification.
type examiner struct {
	// filter is Options.RecordFilter.
	filter func(key, value []byte) bool
}

func (x *examiner) worker() *worker { return &worker{filter: x.filter} }

// worker is one worker's state; its cache and hasher are its own.
type worker struct {
	filter func(key, value []byte) bool
	cache  bodyCache
	chain  chainHasher
	jobs   []sha256x2.Job // reused
}

// examined is what a worker found in one record line of a chunk.
type examined struct {
	off, end int // the line, without its newline, is the chunk's [off:end]
	// chained says chain is SHA-256(used || raw): the line follows a run
	// block (used is the zero digest) or another record line (used is
	// that line's claimed hash) in the same chunk.
	chained     bool
	used, chain store.Digest
	// claimed and raw are what parseRecordLine returned for the line
	// (raw as offsets in the line), so the verifier does not parse it again.
	claimed          store.Digest
	rawStart, rawEnd int
	rec              recordFacts
}

// recordLinePrefix starts every record line.
var recordLinePrefix = []byte(`{"hash":"`)

// chunk examines the record lines found whole in b, appending to ex. When
// lineStart is false, b starts inside a line, which it skips. The chained
// lines' hashes run beside the file's digest: turn is called once with
// their jobs, must add b to the file's digest (in file order, so it may
// wait for the chunks before) and returns how many jobs it completed
// (sha256x2.Digest.WriteWith); the rest are hashed here, two at a time.
// It is scan, the digest and check in one goroutine; the read-ahead runs
// the digest on a goroutine of its own (aheadReader.digest).
func (w *worker) chunk(b []byte, lineStart bool, ex []examined, turn func([]sha256x2.Job) int) []examined {
	first := len(ex)
	ex = w.scan(b, lineStart, ex)
	jobs := chainJobs(w.jobs[:0], b, ex[first:])
	w.jobs = jobs[:0]
	w.chainAll(jobs[turn(jobs):])
	clear(jobs) // the jobs point into b and ex
	w.check(b, ex[first:])
	return ex
}

// chainJobs appends to jobs the chain hashes of the chained lines of ex,
// found in b: each job's Sum is its line's chain.
func chainJobs(jobs []sha256x2.Job, b []byte, ex []examined) []sha256x2.Job {
	for i := range ex {
		if e := &ex[i]; e.chained {
			jobs = append(jobs, sha256x2.Job{Prefix: (*[32]byte)(&e.used), Data: b[e.off+e.rawStart : e.off+e.rawEnd], Sum: (*[32]byte)(&e.chain)})
		}
	}
	return jobs
}

// scan finds the record lines whole in b and parses their framing,
// appending them to ex, without their chain hashes or body checks: what
// the file's digest needs to run the chain hashes beside it, found in one
// quick pass so that the digest need not wait for the body checks.
func (w *worker) scan(b []byte, lineStart bool, ex []examined) []examined {
	pos := 0
	if !lineStart {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return ex
		}
		pos = i + 1
	}
	const (
		unknown = iota
		afterRunBlock
		afterRecord
	)
	state := unknown
	var prevClaimed store.Digest
	for pos < len(b) {
		i := bytes.IndexByte(b[pos:], '\n')
		if i < 0 {
			break
		}
		off, line := pos, b[pos:pos+i]
		pos += i + 1
		if !bytes.HasPrefix(line, recordLinePrefix) {
			state = unknown
			if isRunBlock(line, KindPackageRun) {
				state = afterRunBlock
			}
			continue
		}
		claimed, raw, err := parseRecordLine(line)
		if err != nil {
			state = unknown
			continue
		}
		// raw aliases line: its offsets in it follow from the capacities.
		rawStart := cap(line) - cap(raw)
		e := examined{off: off, end: off + i, claimed: claimed, rawStart: rawStart, rawEnd: rawStart + len(raw)}
		switch state {
		case afterRunBlock:
			e.chained = true
		case afterRecord:
			e.chained, e.used = true, prevClaimed
		}
		ex = append(ex, e)
		state, prevClaimed = afterRecord, claimed
	}
	return ex
}

// check checks the bodies of the lines scan found in b. It writes only
// their rec, so it may run while another goroutine computes their chain.
func (w *worker) check(b []byte, ex []examined) {
	for i := range ex {
		e := &ex[i]
		e.rec = examineBody(b[e.off+e.rawStart:e.off+e.rawEnd], &w.cache, w.filter)
	}
}

// chainAll computes the jobs' chain hashes: two at a time where the CPU
// runs two SHA-256 messages together (sha256x2), which costs little more
// than one.
func (w *worker) chainAll(jobs []sha256x2.Job) {
	for len(jobs) >= 2 && sha256x2.Enabled {
		*jobs[0].Sum, *jobs[1].Sum = sha256x2.SumPrefixed2(jobs[0].Prefix, jobs[0].Data, jobs[1].Prefix, jobs[1].Data)
		jobs = jobs[2:]
	}
	for _, j := range jobs {
		*j.Sum = w.chain.sum(*j.Prefix, j.Data)
	}
}

// chainHasher computes store.ChainHash, SHA-256(prev || raw). A record of
// up to chainCopyMax bytes is copied after prev into one reused buffer and
// hashed with sha256.Sum256, which keeps its state on the stack: the
// streaming hash.Hash costs an allocation and an interface call per
// record in Sum, more than copying a kilobyte. Larger records stream
// through one reused hasher, so the buffer stays small.
type chainHasher struct {
	buf []byte
	h   hash.Hash
	out []byte
}

// chainCopyMax bounds the records hashed through chainHasher's buffer.
const chainCopyMax = 64 << 10

func (c *chainHasher) sum(prev store.Digest, raw []byte) store.Digest {
	if len(raw) <= chainCopyMax {
		c.buf = append(append(c.buf[:0], prev[:]...), raw...)
		return sha256.Sum256(c.buf)
	}
	if c.h == nil {
		c.h, c.out = sha256.New(), make([]byte, 0, sha256.Size)
	}
	c.h.Reset()
	c.h.Write(prev[:])
	c.h.Write(raw)
	c.out = c.h.Sum(c.out[:0])
	return store.Digest(c.out)
}

// recordFacts is what the verifier needs of a record's body.
type recordFacts struct {
	err      error // the body is not a canonical, valid record body
	run      store.RunID
	seq      store.Seq
	kind     string
	caseID   store.CaseID
	outcome  string // a RunConcluded record's outcome
	relevant bool   // a top-level member passed the filter
}

// examineBody decodes a record body (decodeRecord) into what the verifier
// needs of it.
func examineBody(raw []byte, c *bodyCache, filter func(key, value []byte) bool) recordFacts {
	body, facts, relevant, err := decodeRecord(raw, c, filter)
	if err != nil {
		return recordFacts{err: err}
	}
	return recordFacts{run: body.Run, seq: body.Seq, kind: body.Kind, caseID: body.Case, outcome: facts.Outcome, relevant: relevant}
}
