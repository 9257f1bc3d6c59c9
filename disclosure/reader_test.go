package disclosure

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"testing"
	"testing/iotest"
	"time"
)

// The line reader finds lines inside its read-ahead chunks and copies only
// those that span chunks: every line comes back exactly, whatever its
// length against the chunk size, up to MaxLine with its line feed.
func TestLineReader_LinesAcrossChunks(t *testing.T) {
	var want [][]byte
	for _, n := range []int{1, 0, aheadChunkSize - 1, aheadChunkSize, aheadChunkSize + 1, 3*aheadChunkSize + 17, 5, MaxLine - 1} {
		l := bytes.Repeat([]byte{byte('a' + len(want))}, n)
		want = append(want, l)
	}
	var in []byte
	for _, l := range want {
		in = append(append(in, l...), '\n')
	}
	for name, r := range map[string]io.Reader{"whole reads": bytes.NewReader(in), "half reads": iotest.HalfReader(bytes.NewReader(in))} {
		lr := newLineReader(context.Background(), r, nil)
		for i, w := range want {
			got, err := lr.next()
			if err != nil || !bytes.Equal(got, w) {
				t.Fatalf("%s: line %d: %d bytes, %v; want %d bytes", name, i+1, len(got), err, len(w))
			}
		}
		if _, err := lr.next(); !errors.Is(err, io.EOF) {
			t.Fatalf("%s: after the last line: %v", name, err)
		}
		if d, n := lr.digest(); d != sha256.Sum256(in) || n != int64(len(in)) {
			t.Fatalf("%s: digest of %d bytes", name, n)
		}
		lr.close()
	}
	// A line of MaxLine bytes before its line feed is one too many; a last
	// line without its line feed is a cut.
	for _, c := range []struct {
		in   []byte
		want error
	}{
		{append(bytes.Repeat([]byte{'x'}, MaxLine), '\n'), errLineTooLong},
		{append([]byte("a\n"), bytes.Repeat([]byte{'y'}, 2*aheadChunkSize)...), errUnterminated},
	} {
		lr := newLineReader(context.Background(), bytes.NewReader(c.in), nil)
		var err error
		for err == nil {
			_, err = lr.next()
		}
		if !errors.Is(err, c.want) {
			t.Fatalf("got %v, want %v", err, c.want)
		}
		lr.close()
	}
}

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
	// A chunk kept back fails the test at this deadline instead of hanging.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lr := newExaminingReader(ctx, pr, nil, &examiner{})
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
