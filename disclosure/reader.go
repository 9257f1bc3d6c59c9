package disclosure

import (
	"bufio"
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

// lineReader returns a file's lines one at a time, holding at most one line,
// and digests every byte it reads so the caller can report the SHA-256 of
// exactly what was verified.
type lineReader struct {
	br       *bufio.Reader
	long     []byte // gathers a line longer than the read buffer
	line     int64  // 1-based number of the line last returned
	read     int64  // bytes consumed
	sum      hash.Hash
	progress func(int64)
	nextTick int64
}

const progressEvery = 4 << 20

func newLineReader(r io.Reader, progress func(int64)) *lineReader {
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	return &lineReader{br: br, sum: sha256.New(), progress: progress, nextTick: progressEvery}
}

// close returns the read buffer to the pool; the reader is unusable after.
func (l *lineReader) close() {
	if l.br != nil {
		l.br.Reset(nil)
		readers.Put(l.br)
		l.br = nil
	}
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
	l.sum.Write(b)
	l.read += int64(len(b))
	if l.progress != nil && l.read >= l.nextTick {
		l.progress(l.read)
		l.nextTick = l.read + progressEvery
	}
}

// digest returns the SHA-256 of every byte read so far.
func (l *lineReader) digest() [32]byte {
	var d [32]byte
	l.sum.Sum(d[:0])
	return d
}
