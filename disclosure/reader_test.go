package disclosure

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"testing"
	"testing/iotest"
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
