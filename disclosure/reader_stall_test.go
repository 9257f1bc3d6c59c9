package disclosure

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"testing"
)

// TestAheadReader_StalledInputHandsOverDigestedChunk: a chunk read and
// digested reaches the consumer while the input after it has not come yet
// (a pipe, a slow disk), whatever the read-ahead pipeline batches. The
// writer sends exactly one chunk of lines and sends the rest only once the
// consumer has returned the last of them; a chunk kept back would leave
// both waiting (the test would then hang until go test's timeout). Handing
// chunks over in pairs without flushing before a wait was tried and fails
// it.
func TestAheadReader_StalledInputHandsOverDigestedChunk(t *testing.T) {
	line := append(bytes.Repeat([]byte{'r'}, 1023), '\n')
	first := bytes.Repeat(line, aheadChunkSize/len(line)) // exactly one chunk
	rest := bytes.Repeat(line, 10)
	pr, pw := io.Pipe()
	lr := newExaminingReader(context.Background(), pr, nil, &examiner{})
	defer lr.close()
	go pw.Write(first) // returns once the reader has taken all of it
	read := func(n int) {
		t.Helper()
		for range n {
			got, err := lr.next()
			if err != nil || !bytes.Equal(got, line[:len(line)-1]) {
				t.Fatalf("line %d: %d bytes, %v", lr.line, len(got), err)
			}
		}
	}
	read(len(first) / len(line))
	go func() {
		pw.Write(rest)
		pw.Close()
	}()
	read(len(rest) / len(line))
	if _, err := lr.next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last line: %v", err)
	}
	if d, n := lr.digest(); d != sha256.Sum256(append(first, rest...)) || n != int64(len(first)+len(rest)) {
		t.Fatalf("digest of %d bytes", n)
	}
}
