package disclosure

import (
	"context"
	"fmt"
	"io"

	"github.com/runseal/runseal/store"
)

// Export writes every run of j's tenant to w, each with every record's
// exact stored bytes and, for a run sealed below the log's size when the
// export began, its log index and seal, in the format of spec/disclosure.md
// section 6. Restore rebuilds a journal from it. Runs sealed after the
// export began are exported as unsealed, so the export's log is exactly the
// log at its header's checkpoint. The disclosure register is not exported.
//
// Memory is constant. A store that is a store.BulkReader is read in pages
// of runs and records in (run, seq) order, two range scans a page, by one
// goroutine while another checks and writes the page before (so reading
// and writing use two cores), at most exportPageBytes of record bytes a
// page and exportPagesAhead pages ahead. Any other store is listed a page
// of runs at a time and read one run at a time. Both write the same bytes.
func Export(ctx context.Context, j store.Journal, w io.Writer) (Summary, error) {
	cp, err := j.Checkpoint(ctx)
	if err != nil {
		return Summary{}, err
	}
	hdr, err := marshalHeader(&header{Kind: KindExport, Version: Version, Canon: CanonVersion, Checkpoint: cp, Tenant: j.Tenant()})
	if err != nil {
		return Summary{}, err
	}
	lw := newLineWriter(w)
	if err := lw.write(hdr); err != nil {
		return Summary{}, err
	}
	rw := &runWriter{j: j, lw: lw, kind: KindExportRun, cp: cp}
	sum := Summary{Checkpoint: cp}
	if br, ok := j.(store.BulkReader); ok {
		err = exportPages(ctx, br, rw, &sum)
	} else {
		err = exportRuns(ctx, j, rw, &sum)
	}
	if err != nil {
		return Summary{}, err
	}
	if err := ctx.Err(); err != nil {
		return Summary{}, err
	}
	if sum.Sealed != cp.Size {
		return Summary{}, &store.CorruptError{Detail: fmt.Sprintf("the log has %d leaves but %d runs hold one of them", cp.Size, sum.Sealed)}
	}
	if err := lw.write(appendTrailer(lw.buf[:0], KindExportEnd, trailer{Runs: sum.Runs, Sealed: sum.Sealed, Records: sum.Records})); err != nil {
		return Summary{}, err
	}
	return sum, lw.finish(&sum)
}

// The size of an export's pages through store.BulkReader. Variables, not
// constants, so that a test can cut runs across many page boundaries.
var (
	exportPageRecords = store.MaxLimit // records a page at most
	exportPageBytes   = 4 << 20        // record bytes a page, about
)

// exportPagesAhead is how many pages the reading goroutine may hold ready
// beyond the one being written.
const exportPagesAhead = 1

// exportRunsPage is how many runs the per-run path lists per query.
const exportRunsPage = 500

// add counts one run written into sum.
func (s *Summary) add(sealed bool, records uint64) {
	s.Runs++
	s.Records += records
	if sealed {
		s.Sealed++
	}
}

// exportRuns lists the runs a page at a time with their log positions and
// writes each run from its own reads.
func exportRuns(ctx context.Context, j store.Journal, rw *runWriter, sum *Summary) error {
	var after *store.RunID
	for {
		runs, err := j.RunsByID(ctx, after, exportRunsPage)
		if err != nil || len(runs) == 0 {
			return err
		}
		pos, err := j.LogPositions(ctx, runs)
		if err != nil {
			return err
		}
		if len(pos) != len(runs) {
			return fmt.Errorf("export: asked the log positions of %d runs, the store answered %d", len(runs), len(pos))
		}
		for i, run := range runs {
			if err := ctx.Err(); err != nil {
				return err
			}
			sealed, n, err := rw.writeRun(ctx, run, pos[i], nil)
			if err != nil {
				return err
			}
			sum.add(sealed, n)
		}
		last := runs[len(runs)-1]
		after = &last
	}
}

// scanned is one page from the reading goroutine, or the error that ended
// the scan.
type scanned struct {
	page *store.RunsPage
	err  error
}

// The pages of an export circulate between the two goroutines: the reader
// fills a free page, the writer writes it and frees it. Their buffers are
// reused, so the export allocates per page only what a page outgrows.

// exportPages writes the runs of br's pages, read by another goroutine
// while this one writes. A run cut by a page's end continues in the next
// page (its row there again, its head then perhaps newer: the records past
// the head first read were appended after it, and are not exported).
func exportPages(ctx context.Context, br store.BulkReader, rw *runWriter, sum *Summary) error {
	ctx, cancel := context.WithCancel(ctx)
	pages := make(chan scanned, exportPagesAhead)
	free := make(chan *store.RunsPage, exportPagesAhead+2)
	for range cap(free) {
		free <- &store.RunsPage{}
	}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		scanPages(ctx, br, free, pages)
	}()
	defer func() { // the reader is gone before Export returns
		cancel()
		<-finished
	}()
	open := false // a run is begun and not ended
	for sc := range pages {
		if sc.err != nil {
			return sc.err
		}
		for i := range sc.page.Runs {
			r := &sc.page.Runs[i]
			if err := ctx.Err(); err != nil {
				return err
			}
			if !open || r.Run != rw.blk.Run {
				if open {
					sealed, n, err := rw.end(nil)
					if err != nil {
						return err
					}
					sum.add(sealed, n)
				}
				blk := runBlock{Run: r.Run}
				rw.exportPosition(&blk, r.Log)
				if err := rw.begin(&blk, r.Head); err != nil {
					return err
				}
				open = true
			}
			for _, rec := range r.Records {
				if rec.Seq > rw.head.Seq {
					break // appended after the head was read
				}
				if err := rw.record(rec.Seq, rec.Hash, rec.Raw, rec.Concluded, store.CaseID{}); err != nil {
					return err
				}
			}
		}
		free <- sc.page // runWriter kept no reference into it
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if open {
		sealed, n, err := rw.end(nil)
		if err != nil {
			return err
		}
		sum.add(sealed, n)
	}
	return nil
}

// scanPages reads br's pages from the first, into pages taken from free,
// into out until the last, an
// error (sent), or ctx's end; then it closes out.
func scanPages(ctx context.Context, br store.BulkReader, free <-chan *store.RunsPage, out chan<- scanned) {
	defer close(out)
	var at store.RunCursor
	for {
		var p *store.RunsPage
		select {
		case p = <-free:
		case <-ctx.Done():
			return
		}
		err := br.ScanRuns(ctx, p, at, exportPageRecords, exportPageBytes)
		next, done := p.Next, p.Done // read before the writer has the page
		select {
		case out <- scanned{page: p, err: err}:
		case <-ctx.Done():
			return
		}
		if err != nil || done {
			return
		}
		if next == at {
			select {
			case out <- scanned{err: &store.CorruptError{Run: at.Run, Seq: at.Seq, Detail: "the store's scan did not advance past a page that is not the last"}}:
			case <-ctx.Done():
			}
			return
		}
		at = next
	}
}
