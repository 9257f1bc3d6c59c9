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
// Memory is constant: runs are listed and read a page at a time, one chunk
// read ahead of the one being written. A store that is a store.BulkReader
// is read a page of runs per query (heads and records together,
// exportPageRecords records at most); any other store one run at a time.
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
	// Runs are read by one goroutine a chunk ahead of the one writing them,
	// so reading (the store, decoding) and writing (hashing, encoding) use
	// two cores.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	chunks := make(chan exportChunk, 1)
	go readChunks(ctx, j, chunks)
	for c := range chunks {
		if c.err != nil {
			return Summary{}, c.err
		}
		for i, run := range c.runs {
			if err := ctx.Err(); err != nil {
				return Summary{}, err
			}
			rw.pre = nil
			if c.pre != nil {
				rw.pre = &c.pre[i]
			}
			sealed, n, err := rw.writeRun(ctx, run, c.pos[i], nil)
			if err != nil {
				return Summary{}, err
			}
			sum.Runs++
			sum.Records += n
			if sealed {
				sum.Sealed++
			}
		}
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

const (
	exportPageRuns    = 500  // runs listed per query
	exportPageRecords = 2000 // records read ahead per query (store.BulkReader)
)

// exportChunk is a run of consecutive runs for the writer: their log
// positions and, from a store.BulkReader, their heads and first records.
type exportChunk struct {
	runs []store.RunID
	pos  []*store.Position
	pre  []prefetched // nil: the writer reads each run itself
	err  error
}

// readChunks lists the runs a page at a time and sends them in chunks,
// read ahead through store.BulkReader when the store is one; it closes out
// at the end, after sending an error, or when ctx is done.
func readChunks(ctx context.Context, j store.Journal, out chan<- exportChunk) {
	defer close(out)
	send := func(c exportChunk) bool {
		select {
		case out <- c:
			return c.err == nil
		case <-ctx.Done():
			return false
		}
	}
	br, _ := j.(store.BulkReader)
	var after *store.RunID
	for {
		runs, err := j.RunsByID(ctx, after, exportPageRuns)
		if err != nil || len(runs) == 0 {
			if err != nil {
				send(exportChunk{err: err})
			}
			return
		}
		pos, err := j.LogPositions(ctx, runs)
		if err != nil {
			send(exportChunk{err: err})
			return
		}
		if len(pos) != len(runs) {
			send(exportChunk{err: fmt.Errorf("export: asked the log positions of %d runs, the store answered %d", len(runs), len(pos))})
			return
		}
		if br == nil {
			if !send(exportChunk{runs: runs, pos: pos}) {
				return
			}
		}
		for i := 0; br != nil && i < len(runs); {
			a, err := readAhead(ctx, br, runs, i)
			if err != nil {
				send(exportChunk{err: err})
				return
			}
			if !send(exportChunk{runs: runs[a.from:a.end], pos: pos[a.from:a.end], pre: a.runs}) {
				return
			}
			i = a.end
		}
		last := runs[len(runs)-1]
		after = &last
	}
}

// prefetched is one run's head and its first records, read with its
// neighbours' by store.BulkReader.ReadRuns.
type prefetched struct {
	head store.Head
	recs []store.Record
}

// runsAhead is one ReadRuns answer, split by run: runs[from:end] have their
// head and records (the last of them perhaps only its first records).
type runsAhead struct {
	from, end int
	runs      []prefetched
}

// readAhead reads runs[from:] with one ReadRuns. The runs after the first
// one the limit cut are left for the next call.
func readAhead(ctx context.Context, br store.BulkReader, runs []store.RunID, from int) (*runsAhead, error) {
	heads, recs, err := br.ReadRuns(ctx, runs[from:], exportPageRecords)
	if err != nil {
		return nil, err
	}
	if len(heads) != len(runs)-from {
		return nil, fmt.Errorf("export: read %d runs, the store answered for %d", len(runs)-from, len(heads))
	}
	a := &runsAhead{from: from, runs: make([]prefetched, 0, len(heads))}
	k := 0
	for i, h := range heads {
		run := runs[from+i]
		start := k
		for k < len(recs) && recs[k].Run == run {
			k++
		}
		a.runs = append(a.runs, prefetched{head: h, recs: recs[start:k]})
		if uint64(k-start) < uint64(h.Seq) {
			break // cut here: this run reads on page by page, the next runs ask again
		}
	}
	if k != len(recs) {
		return nil, &store.CorruptError{Run: recs[k].Run, Detail: "ReadRuns returned records out of the order of the runs asked"}
	}
	a.end = from + len(a.runs)
	return a, nil
}
