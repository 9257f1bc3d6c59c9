package disclosure

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"testing"

	"github.com/runseal/runseal/store"
)

// Issue 11 item 9: the verifier's memory grew with the number of run
// blocks when their log indexes were sparse (a word of a sparse bitmap per
// run, about 58 bytes each). A file of 150,000 sealed run blocks whose
// indexes are 64 apart is streamed in; the live heap, sampled as it is
// read, must not grow with it. The blocks need not verify: a verifier's
// memory must be bounded for hostile files too, and findings are capped.
func TestVerify_SparseIndexesConstantMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("streams about 60 MB")
	}
	const runs = 150_000
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeSparse(pw, runs)) }()
	var samples []uint64
	var ms runtime.MemStats
	opts := Options{Progress: func(int64) {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		samples = append(samples, ms.HeapAlloc)
	}}
	rep, err := Verify(context.Background(), pr, opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != NotSound || rep.Counts.Runs != runs {
		t.Fatalf("read %d runs, verdict %s", rep.Counts.Runs, rep.Verdict)
	}
	if len(samples) < 8 {
		t.Fatalf("only %d samples", len(samples))
	}
	// The first samples include the reader's buffers; after them, the heap
	// stays flat while 150,000 blocks go by.
	base := samples[2]
	peak := uint64(0)
	for _, s := range samples[2:] {
		peak = max(peak, s)
	}
	t.Logf("live heap %d KiB after the first blocks, %d KiB at most over %d samples", base>>10, peak>>10, len(samples))
	if peak > base+1<<20 {
		t.Fatalf("live heap grew by %d KiB while reading %d run blocks: memory depends on the package", (peak-base)>>10, runs)
	}
}

// writeSparse writes a package-shaped file of n sealed run blocks, one
// record each, at log indexes 64 apart.
func writeSparse(w io.Writer, n int) error {
	id := func(i int) store.RunID {
		var r store.RunID
		r[0] = 0x01
		for b := range 8 {
			r[15-b] = byte(uint64(i+1) >> (8 * b))
		}
		return r
	}
	hdr, err := marshalHeader(&header{Kind: KindPackage, Version: Version, Canon: CanonVersion,
		Checkpoint: store.Checkpoint{Origin: "example.com/sparse", Size: 1 << 40}, Note: []byte("example.com/sparse\n1099511627776\n"),
		Selection: Selection{Runs: []store.RunID{id(0)}}})
	if err != nil {
		return err
	}
	var b bytes.Buffer
	b.Write(hdr)
	zero := store.ZeroDigest.String()
	for i := range n {
		b.WriteString(`{"index":`)
		b.WriteString(strconv.Itoa(i * 64))
		fmt.Fprintf(&b, `,"kind":"runseal.disclosure.run","proof":[],"records":1,"run":"%s","seal":"%s"}`+"\n", id(i), zero)
		fmt.Fprintf(&b, `{"hash":"%s","raw":{"epoch":1,"kind":"Note","run":"%s","seq":1,"v":1}}`+"\n", zero, id(i))
		if b.Len() > 1<<20 {
			if _, err := w.Write(b.Bytes()); err != nil {
				return err
			}
			b.Reset()
		}
	}
	fmt.Fprintf(&b, `{"cases":0,"kind":"runseal.disclosure.end","records":%d,"runs":%d,"sealed":%d}`+"\n", n, n, n)
	_, err = w.Write(b.Bytes())
	return err
}
