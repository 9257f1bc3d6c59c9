package disclosure

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"hash"
	"io"
	"sync"
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
type lineReader struct {
	ahead    *aheadReader
	long     []byte // gathers a line that spans chunks
	line     int64  // 1-based number of the line last returned
	read     int64  // bytes consumed as lines
	progress func(int64)
	nextTick int64
}

const progressEvery = 4 << 20

func newLineReader(ctx context.Context, r io.Reader, progress func(int64)) *lineReader {
	return &lineReader{ahead: newAheadReader(ctx, r), progress: progress, nextTick: progressEvery}
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
	a := l.ahead
	for {
		if a.off < a.cur.n {
			buf := a.cur.b[a.off:a.cur.n]
			if i := bytes.IndexByte(buf, '\n'); i >= 0 {
				seg := buf[:i+1]
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
	}
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
