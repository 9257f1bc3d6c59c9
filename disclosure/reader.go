package disclosure

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"hash"
	"io"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/runseal/runseal/disclosure/internal/sha256x2"
)

// errLineTooLong and errUnterminated are what lineReader.next reports for a
// line over MaxLine and for a last line without its newline (a cut file).
var (
	errLineTooLong  = errors.New("line longer than the format's limit")
	errUnterminated = errors.New("the file ends inside a line")
)

// lineReader returns a file's lines one at a time, holding at most one
// line. Its input is digested as it is read, ahead of the lines, on another
// goroutine (see aheadReader), so the caller can report the SHA-256 of the
// file it checked without a second pass and without a second core's worth
// of waiting. Lines are found in the read-ahead chunks themselves and
// returned as slices of them: only a line that spans two chunks is copied.
//
// With an examiner, worker goroutines also look at each chunk's record
// lines before the caller reads them (see examine.go): what they found for
// the line last returned is at examined.
type lineReader struct {
	ahead    *aheadReader
	long     []byte // gathers a line that spans chunks
	line     int64  // 1-based number of the line last returned
	read     int64  // bytes consumed as lines
	progress func(int64)
	nextTick int64

	lineOff int // the offset in the current chunk of the line last returned; -1 when gathered in long
	exIdx   int // the current chunk's first examined line not yet passed
}

const progressEvery = 4 << 20

func newLineReader(ctx context.Context, r io.Reader, progress func(int64)) *lineReader {
	return newExaminingReader(ctx, r, progress, nil)
}

// newExaminingReader is newLineReader with workers that examine each
// chunk's record lines with x ahead of the caller (nil: none).
func newExaminingReader(ctx context.Context, r io.Reader, progress func(int64), x *examiner) *lineReader {
	return &lineReader{ahead: newAheadReader(ctx, r, x), progress: progress, nextTick: progressEvery, lineOff: -1}
}

// close stops reading ahead; the reader is unusable after.
func (l *lineReader) close() { l.ahead.close() }

// drain reads the rest of the input, so that the digest and the byte count
// cover the whole file even when checking stopped early. It returns ctx's
// error or a read error.
func (l *lineReader) drain(ctx context.Context) error {
	return l.ahead.drain(ctx)
}

// next returns the next line without its newline. The slice is valid until
// the next call. At a clean end of input it returns io.EOF; a last line
// without a newline is errUnterminated; a line over MaxLine is
// errLineTooLong; read errors are returned as they are.
func (l *lineReader) next() ([]byte, error) {
	l.long = l.long[:0]
	l.lineOff = -1
	a := l.ahead
	for {
		if a.off < a.cur.n {
			buf := a.cur.b[a.off:a.cur.n]
			if i := l.lineEnd(buf); i >= 0 {
				seg := buf[:i+1]
				start := a.off
				a.off += i + 1
				l.consume(len(seg))
				if len(l.long)+len(seg) > MaxLine {
					return nil, errLineTooLong
				}
				l.line++
				if len(l.long) > 0 {
					l.long = append(l.long, seg...)
					return l.long[:len(l.long)-1], nil
				}
				l.lineOff = start
				return seg[:len(seg)-1], nil
			}
			// The line goes on in the next chunk: gather it.
			if len(l.long)+len(buf) > MaxLine {
				return nil, errLineTooLong
			}
			l.long = append(l.long, buf...)
			a.off = a.cur.n
			l.consume(len(buf))
		}
		if a.cur.err != nil {
			if !errors.Is(a.cur.err, io.EOF) {
				return nil, a.cur.err
			}
			if len(l.long) > 0 {
				return nil, errUnterminated
			}
			return nil, io.EOF
		}
		if err := a.next(); err != nil {
			return nil, err
		}
		l.exIdx = 0
	}
}

// lineEnd returns the index of the first newline in buf, the rest of the
// current chunk from a.off: where a worker examined the line that starts
// there, the end it found by the same search over the same bytes, so the
// chunk's record lines are searched once, not twice.
func (l *lineReader) lineEnd(buf []byte) int {
	a := l.ahead
	if len(l.long) == 0 {
		ex := a.cur.ex
		for l.exIdx < len(ex) && ex[l.exIdx].off < a.off {
			l.exIdx++
		}
		if l.exIdx < len(ex) && ex[l.exIdx].off == a.off {
			return ex[l.exIdx].end - a.off
		}
	}
	return bytes.IndexByte(buf, '\n')
}

// examined returns what a worker found in the line last returned, n bytes
// long, or nil when no worker examined it (a line spanning chunks, the
// first record after one, a reader without an examiner). The result is
// valid until the next call to next.
func (l *lineReader) examined(n int) *examined {
	if l.lineOff < 0 {
		return nil
	}
	ex := l.ahead.cur.ex
	for l.exIdx < len(ex) && ex[l.exIdx].off < l.lineOff {
		l.exIdx++
	}
	if l.exIdx < len(ex) && ex[l.exIdx].off == l.lineOff && ex[l.exIdx].end == l.lineOff+n {
		return &ex[l.exIdx]
	}
	return nil
}

func (l *lineReader) consume(n int) {
	if n == 0 {
		return
	}
	l.read += int64(n)
	if l.progress != nil && l.read >= l.nextTick {
		l.progress(l.read)
		l.nextTick = l.read + progressEvery
	}
}

// digest returns the SHA-256 and the length of the input. It is the whole
// input's only after next returned io.EOF or drain returned nil.
func (l *lineReader) digest() ([32]byte, int64) { return l.ahead.sha256() }

// aheadReader reads its input in chunks on its own goroutine and hands
// them over in input order. Without an examiner it digests each chunk
// there before handing it over, so that hashing the file runs beside
// parsing it. With one, each chunk goes to a pool of workers, which find
// its record lines (scan) and check their bodies while the chunks before
// it are read and checked, and, in input order, to one digest goroutine,
// which adds the chunk to the file's digest, its blocks beside the
// chunk's chain hashes (sha256x2: two SHA-256 messages on one core cost
// little more than one). The digest is the one stage that cannot run in
// parallel, so it has a goroutine of its own that waits only for the
// quick scan of the chunk it is at, never for body checks, and no other
// stage waits for it but the consumer: on two cores, the workers' checks
// fill the time the digest leaves. A chunk is handed over once both are
// done. It holds a fixed number of chunks, which it reuses: memory stays
// constant.
type aheadReader struct {
	ctx     context.Context // ends a wait for input
	full    chan *chunk     // in input order
	work    chan *chunk     // to the workers; nil without an examiner
	order   chan *chunk     // to the digest goroutine, in input order; nil without an examiner
	free    chan *chunk
	stop    chan struct{}
	done    chan struct{} // closed when the producer exits
	workers sync.WaitGroup
	idle    atomic.Bool // draining: workers need not examine
	once    sync.Once
	cur     *chunk
	off     int
	sum     hash.Hash        // without workers: the producer's until done
	fileSum *sha256x2.Digest // with workers: the digest goroutine's
	n       int64
}

// chunk is a piece of the input, and what workers found in it.
type chunk struct {
	b         []byte
	n         int
	err       error
	lineStart bool       // b[0] starts a line
	ex        []examined // the record lines found whole in b[:n], in order
	// With an examiner: scanned is closed once ex holds every record line
	// (their bodies not yet checked), checked once their bodies are; nil
	// without one. A chunk is handed to the consumer once the digest
	// goroutine added it to the file's digest and set its chain hashes.
	scanned, checked chan struct{}
}

// aheadChunkSize is small enough that the chunks in flight stay in the
// caches shared by the reader, the workers and the verifier (a chunk is
// read, digested, examined and checked, four passes), large enough that
// handing one over costs nothing beside them. On the 2-core bench machine
// 128 KiB took about 6% less CPU than 256 KiB and 1 MiB 12% more; mapping
// the file instead of reading it into these reused, cache-warm buffers
// took 25% more (every pass then met cold pages).
const aheadChunkSize = 128 << 10

// noChunk is the current chunk before the first.
var noChunk chunk

func newAheadReader(ctx context.Context, r io.Reader, x *examiner) *aheadReader {
	workers, chunks := 0, 3
	if x != nil {
		// Two chunks per worker keep each busy while the producer reads,
		// the digest goroutine digests and the consumer checks.
		workers = min(runtime.GOMAXPROCS(0), 4)
		chunks = 2*workers + 4
	}
	a := &aheadReader{ctx: ctx, full: make(chan *chunk, chunks), free: make(chan *chunk, chunks),
		stop: make(chan struct{}), done: make(chan struct{}), sum: sha256.New(), cur: &noChunk}
	for range chunks {
		a.free <- chunkPool.Get().(*chunk)
	}
	if workers > 0 {
		a.sum, a.fileSum = nil, sha256x2.New()
		a.work, a.order = make(chan *chunk, chunks), make(chan *chunk, chunks)
		a.workers.Add(workers + 1)
		for range workers {
			go a.examine(x.worker())
		}
		go a.digest(x.worker())
	}
	go a.produce(r)
	return a
}

func (a *aheadReader) produce(r io.Reader) {
	defer close(a.done)
	if a.work != nil {
		defer close(a.work)
		defer close(a.order)
	}
	lineStart := true
	for {
		var c *chunk
		select {
		case c = <-a.free:
		case <-a.stop:
			return
		}
		n, err := io.ReadFull(r, c.b)
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF
		}
		a.n += int64(n)
		c.n, c.err, c.lineStart, c.ex = n, err, lineStart, c.ex[:0]
		if n > 0 {
			lineStart = c.b[n-1] == '\n'
		}
		if a.work != nil {
			c.scanned, c.checked = make(chan struct{}), make(chan struct{})
			// Neither send blocks: each channel holds every chunk. The
			// digest goroutine hands the chunk to the consumer.
			a.work <- c
			a.order <- c
		} else {
			a.sum.Write(c.b[:n])
			select {
			case a.full <- c:
			case <-a.stop:
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// examine is a worker: it scans chunks and checks their record lines
// until the producer is done; draining or stopped, it finds none.
func (a *aheadReader) examine(w *worker) {
	defer a.workers.Done()
	for c := range a.work {
		if !a.idle.Load() {
			c.ex = w.scan(c.b[:c.n], c.lineStart, c.ex)
		}
		close(c.scanned)
		w.check(c.b[:c.n], c.ex)
		close(c.checked)
	}
}

// digest adds the chunks to the file's digest in input order, each once
// its record lines were scanned, computing their chain hashes beside it
// (those left over when the chunk's blocks ran out two at a time), and
// hands them to the consumer. The scan is the only wait, and it is short.
func (a *aheadReader) digest(w *worker) {
	defer a.workers.Done()
	for c := range a.order {
		<-c.scanned // a worker never blocks, so this wait ends
		b := c.b[:c.n]
		jobs := chainJobs(w.jobs[:0], b, c.ex)
		w.chainAll(jobs[a.fileSum.WriteWith(b, jobs):])
		clear(jobs) // the jobs point into b and ex
		w.jobs = jobs[:0]
		a.full <- c // never blocks: it holds every chunk
	}
}

func (a *aheadReader) drain(ctx context.Context) error {
	a.idle.Store(true)
	for {
		if a.cur.err != nil {
			if errors.Is(a.cur.err, io.EOF) {
				return nil
			}
			return a.cur.err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := a.next(); err != nil {
			return err
		}
	}
}

// next hands the current chunk back and waits for the following one, or
// for the context to end (input from a pipe may never come).
func (a *aheadReader) next() error {
	if a.cur != &noChunk {
		a.free <- a.cur
		a.cur = &noChunk
	}
	select {
	case c := <-a.full:
		if c.checked != nil {
			<-c.checked // a worker never blocks, so this wait ends
		}
		a.cur, a.off = c, 0
		return nil
	case <-a.ctx.Done():
		return a.ctx.Err()
	}
}

// digest returns the input's SHA-256 and length once the consumer has met
// the end of the input (or a read error); before that, length -1.
func (a *aheadReader) sha256() ([32]byte, int64) {
	var d [32]byte
	if a.cur.err == nil {
		return d, -1
	}
	<-a.done // the producer exits right after handing over its last chunk
	if a.fileSum != nil {
		// The consumer met the last chunk once the digest goroutine had
		// added it to the digest, the chunks before it first.
		return a.fileSum.Sum(), a.n
	}
	a.sum.Sum(d[:0])
	return d, a.n
}

// close stops the producer and the workers and, if the producer has
// finished, returns the chunks to the pool. It does not wait for a read in
// progress, which may block on a pipe; such a reader's chunks are left to
// the garbage collector, and its workers end when the read does.
func (a *aheadReader) close() {
	a.once.Do(func() {
		close(a.stop)
		a.idle.Store(true)
		select {
		case <-a.done:
		default:
			return
		}
		a.workers.Wait() // the producer closed work and order; stopped workers skip what is left
		var cs []*chunk
		if a.cur != &noChunk {
			cs = append(cs, a.cur)
		}
		for len(a.free) > 0 {
			cs = append(cs, <-a.free)
		}
		for len(a.full) > 0 {
			cs = append(cs, <-a.full)
		}
		for _, c := range cs {
			*c = chunk{b: c.b, ex: c.ex[:0]}
			chunkPool.Put(c)
		}
	})
}

// chunkPool keeps read-ahead chunks between verifications: a test suite or
// a server verifying many small packages should not allocate megabytes each.
// A chunk's record lines grow to what its lines need, at most
// aheadChunkSize/minRecordLine+1 of them, and keep that room as the chunks
// go round: typical records of a kilobyte need a twelfth of the worst
// case, and the garbage collector scans and the kernel maps only that.
var chunkPool = sync.Pool{New: func() any {
	return &chunk{b: make([]byte, aheadChunkSize), ex: make([]examined, 0, 64)}
}}

// minRecordLine is the length of the shortest line parseRecordLine
// accepts, its newline included: the prefix, the hash, `","raw":`, one
// byte and the closing brace.
const minRecordLine = len(`{"hash":"`) + 64 + len(`","raw":`) + 1 + 1 + 1
