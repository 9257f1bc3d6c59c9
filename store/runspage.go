package store

import (
	"bytes"
	"fmt"
)

// RunCursor is a position in a tenant's records in (run, seq) order: just
// after record Seq of Run. The zero cursor is before the first run.
type RunCursor struct {
	Run RunID
	Seq Seq
}

// RunsPage is one page of a BulkReader's scan. A backend fills it with
// Begin, then Record for each record of its scan in (run, seq) order, then
// Run for each run row in id order, then End. The page checks what the two
// scans must agree on: contiguous seqs from the cursor, 32-byte hashes,
// well-formed run rows in ascending order, and no record without its run's
// row. Its buffers are reused from page to page.
type RunsPage struct {
	// Runs are the run rows of the page, in ascending id order, each with
	// its records in the page (the first run's may continue a run the
	// previous page began; the last run's may continue in the next).
	Runs []PagedRun
	// Next is the cursor of the next page: after the page's last record.
	Next RunCursor
	// Done is set on the page that reaches the end of the records: no run
	// follows it.
	Done bool

	after RunCursor
	arena []byte
	ends  []int // ends[i]: the end of record i's raw in arena
	recs  []PagedRecord
	spans []recordSpan
	span  int // the first span not yet matched to a run row
}

// PagedRun is one run row of a RunsPage and its records in the page.
type PagedRun struct {
	Run  RunID
	Head Head
	Log  *Position // its log position; nil when the run is not sealed
	// Records are the run's records in the page, ascending and
	// contiguous in seq; Raw slices share the page's memory.
	Records []PagedRecord
}

// PagedRecord is one record as a BulkReader reads it.
type PagedRecord struct {
	Seq       Seq
	Hash      Digest
	Raw       []byte
	Concluded bool // the store's kind column says RunConcluded
}

// recordSpan is the records of one run in the page: recs[first:end].
type recordSpan struct {
	run        RunID
	text       string
	first, end int
}

// Begin empties the page for a scan after the cursor.
func (p *RunsPage) Begin(after RunCursor) {
	clear(p.Runs)
	p.Runs, p.Next, p.Done = p.Runs[:0], after, false
	p.after, p.arena, p.ends, p.recs, p.spans, p.span = after, p.arena[:0], p.ends[:0], p.recs[:0], p.spans[:0], 0
}

// Bytes returns the raw bytes the page holds.
func (p *RunsPage) Bytes() int { return len(p.arena) }

// LastRun returns the column text of the last record's run ("" before the
// first record): the upper bound of the run rows to read.
func (p *RunsPage) LastRun() string {
	if len(p.spans) == 0 {
		return ""
	}
	return p.spans[len(p.spans)-1].text
}

// Record adds the next record of the scan: its run column, seq, whether its
// kind is RunConcluded, and its hash and raw bytes (copied: the caller's
// buffers may be the driver's).
func (p *RunsPage) Record(run []byte, seq int64, concluded bool, hash, raw []byte) error {
	n := len(p.spans)
	if n == 0 || string(run) != p.spans[n-1].text {
		id, err := ParseRunID(string(run))
		if err != nil {
			return &CorruptError{Detail: fmt.Sprintf("record row names run %q", short(string(run)))}
		}
		if n > 0 && bytes.Compare(p.spans[n-1].run[:], id[:]) >= 0 {
			return &CorruptError{Run: id, Detail: "the store's scan returned runs out of order"}
		}
		want := Seq(1)
		if id == p.after.Run && p.after != (RunCursor{}) {
			want = p.after.Seq + 1
		}
		if seq != int64(want) {
			return &CorruptError{Run: id, Seq: want, Detail: fmt.Sprintf("seq gap: found %d", seq)}
		}
		p.spans = append(p.spans, recordSpan{run: id, text: string(run), first: len(p.recs)})
		n++
	}
	sp := &p.spans[n-1]
	if len(p.recs) > sp.first && seq != int64(p.recs[len(p.recs)-1].Seq)+1 {
		return &CorruptError{Run: sp.run, Seq: p.recs[len(p.recs)-1].Seq + 1, Detail: fmt.Sprintf("seq gap: found %d", seq)}
	}
	if len(hash) != len(Digest{}) {
		return &CorruptError{Run: sp.run, Seq: Seq(seq), Detail: "stored hash is not 32 bytes"}
	}
	p.arena = append(p.arena, raw...)
	p.ends = append(p.ends, len(p.arena))
	p.recs = append(p.recs, PagedRecord{Seq: Seq(seq), Hash: Digest(hash), Concluded: concluded})
	sp.end = len(p.recs)
	p.Next = RunCursor{Run: sp.run, Seq: Seq(seq)}
	return nil
}

// Run adds the next run row: its run column, head seq and hash, and its
// log index and leaf when it is sealed (hasIndex).
func (p *RunsPage) Run(run []byte, headSeq int64, headHash []byte, index int64, hasIndex bool, leaf []byte) error {
	id, err := ParseRunID(string(run))
	if err != nil {
		return &CorruptError{Detail: fmt.Sprintf("run row %q is malformed", short(string(run)))}
	}
	if k := len(p.Runs); k > 0 && bytes.Compare(p.Runs[k-1].Run[:], id[:]) >= 0 {
		return &CorruptError{Run: id, Detail: "the store's scan returned run rows out of order"}
	}
	if len(headHash) != len(Digest{}) || headSeq < 1 {
		return &CorruptError{Run: id, Detail: "run head row is malformed"}
	}
	r := PagedRun{Run: id, Head: Head{Seq: Seq(headSeq), Hash: Digest(headHash)}}
	if hasIndex {
		if len(leaf) != len(Digest{}) || index < 0 {
			return &CorruptError{Run: id, Detail: "malformed log position"}
		}
		r.Log = &Position{Index: uint64(index), Leaf: Digest(leaf)}
	}
	if err := p.orphans(&id); err != nil {
		return err
	}
	if p.span < len(p.spans) && p.spans[p.span].run == id {
		sp := p.spans[p.span]
		r.Records = p.recs[sp.first:sp.end:sp.end]
		p.span++
	}
	p.Runs = append(p.Runs, r)
	return nil
}

// orphans fails if a record's run sorts before run (or, at the end of the
// page (run nil), if any record is left): its run row is missing, and a
// walk over the listed runs would never check its chain.
func (p *RunsPage) orphans(run *RunID) error {
	if p.span == len(p.spans) {
		return nil
	}
	sp := p.spans[p.span]
	if run != nil && bytes.Compare(sp.run[:], run[:]) >= 0 {
		return nil
	}
	return &CorruptError{Run: sp.run, Seq: p.recs[sp.first].Seq, Detail: "records without a run row"}
}

// End completes the page; done says the record scan reached the end of
// the tenant's records.
func (p *RunsPage) End(done bool) error {
	if err := p.orphans(nil); err != nil {
		return err
	}
	start := 0
	for i := range p.recs {
		p.recs[i].Raw = p.arena[start:p.ends[i]:p.ends[i]]
		start = p.ends[i]
	}
	p.Done = done
	return nil
}
