package disclosure

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"hash"
	"io"
	"sync"
)

// readBufSize is the read buffer. Lines up to it are returned without a
// copy; longer ones are gathered into a separate buffer up to MaxLine.
const readBufSize = 1 << 20

var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readBufSize) }}

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
// of waiting.
type lineReader struct {
	ahead    *aheadReader
	br       *bufio.Reader
	long     []byte // gathers a line longer than the read buffer
	line     int64  // 1-based number of the line last returned
	read     int64  // bytes consumed as lines
	progress func(int64)
	nextTick int64
}

const progressEvery = 4 << 20

func newLineReader(ctx context.Context, r io.Reader, progress func(int64)) *lineReader {
	a := newAheadReader(ctx, r)
	br := readers.Get().(*bufio.Reader)
	br.Reset(a)
	return &lineReader{ahead: a, br: br, progress: progress, nextTick: progressEvery}
}

// close returns the read buffer to the pool and stops reading ahead; the
// reader is unusable after.
func (l *lineReader) close() {
	if l.br != nil {
		l.br.Reset(nil)
		readers.Put(l.br)
		l.br = nil
	}
	l.ahead.close()
}

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
	for {
		frag, err := l.br.ReadSlice('\n')
		l.consume(frag)
		switch {
		case err == nil:
			l.line++
			if len(l.long) > 0 {
				l.long = append(l.long, frag...)
				if len(l.long) > MaxLine {
					return nil, errLineTooLong
				}
				return l.long[:len(l.long)-1], nil
			}
			if len(frag) > MaxLine {
				return nil, errLineTooLong
			}
			return frag[:len(frag)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			if len(l.long)+len(frag) > MaxLine {
				return nil, errLineTooLong
			}
			l.long = append(l.long, frag...)
		case errors.Is(err, io.EOF):
			if len(frag) > 0 || len(l.long) > 0 {
				return nil, errUnterminated
			}
			return nil, io.EOF
		default:
			return nil, err
		}
	}
}

func (l *lineReader) consume(b []byte) {
	if len(b) == 0 {
		return
	}
	l.read += int64(len(b))
	if l.progress != nil && l.read >= l.nextTick {
		l.progress(l.read)
		l.nextTick = l.read + progressEvery
	}
}

// digest returns the SHA-256 and the length of the input. It is the whole
// input's only after next returned io.EOF or drain returned nil.
func (l *lineReader) digest() ([32]byte, int64) { return l.ahead.digest() }

// aheadReader reads its input in chunks on its own goroutine, digesting
// each chunk there before handing it over, so that hashing the file runs
// beside parsing it. It holds aheadChunks chunks: memory stays constant.
type aheadReader struct {
	ctx  context.Context // ends a wait for input
	full chan chunk
	free chan []byte
	stop chan struct{}
	done chan struct{} // closed when the producer exits
	once sync.Once
	cur  chunk
	off  int
	sum  hash.Hash // the producer's until done
	n    int64
}

type chunk struct {
	b   []byte
	n   int
	err error
}

const (
	aheadChunks    = 3
	aheadChunkSize = 1 << 20
)

func newAheadReader(ctx context.Context, r io.Reader) *aheadReader {
	a := &aheadReader{ctx: ctx, full: make(chan chunk, aheadChunks), free: make(chan []byte, aheadChunks),
		stop: make(chan struct{}), done: make(chan struct{}), sum: sha256.New()}
	for range aheadChunks {
		a.free <- *chunkPool.Get().(*[]byte)
	}
	go a.produce(r)
	return a
}

func (a *aheadReader) produce(r io.Reader) {
	defer close(a.done)
	for {
		var b []byte
		select {
		case b = <-a.free:
		case <-a.stop:
			return
		}
		n, err := io.ReadFull(r, b)
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF
		}
		a.sum.Write(b[:n])
		a.n += int64(n)
		select {
		case a.full <- chunk{b: b, n: n, err: err}:
		case <-a.stop:
			return
		}
		if err != nil {
			return
		}
	}
}

// Read implements io.Reader for the consumer.
func (a *aheadReader) Read(p []byte) (int, error) {
	for a.off == a.cur.n {
		if a.cur.err != nil {
			return 0, a.cur.err
		}
		if err := a.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, a.cur.b[a.off:a.cur.n])
	a.off += n
	return n, nil
}

func (a *aheadReader) drain(ctx context.Context) error {
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
	if a.cur.b != nil {
		a.free <- a.cur.b
		a.cur = chunk{}
	}
	select {
	case c := <-a.full:
		a.cur, a.off = c, 0
		return nil
	case <-a.ctx.Done():
		return a.ctx.Err()
	}
}

// digest returns the input's SHA-256 and length once the consumer has met
// the end of the input (or a read error); before that, length -1.
func (a *aheadReader) digest() ([32]byte, int64) {
	var d [32]byte
	if a.cur.err == nil {
		return d, -1
	}
	<-a.done // the producer exits right after handing over its last chunk
	a.sum.Sum(d[:0])
	return d, a.n
}

// close stops the producer and, if it has finished, returns the chunks to
// the pool. It does not wait for a read in progress, which may block on a
// pipe; such a producer's chunks are left to the garbage collector.
func (a *aheadReader) close() {
	a.once.Do(func() {
		close(a.stop)
		select {
		case <-a.done:
		default:
			return
		}
		bufs := [][]byte{a.cur.b}
		for len(a.free) > 0 {
			bufs = append(bufs, <-a.free)
		}
		for len(a.full) > 0 {
			bufs = append(bufs, (<-a.full).b)
		}
		for _, b := range bufs {
			if b != nil {
				chunkPool.Put(&b)
			}
		}
	})
}

// chunkPool keeps read-ahead chunks between verifications: a test suite or
// a server verifying many small packages should not allocate megabytes each.
var chunkPool = sync.Pool{New: func() any { b := make([]byte, aheadChunkSize); return &b }}
