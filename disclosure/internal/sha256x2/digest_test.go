package sha256x2

import (
	"crypto/sha256"
	"testing"
)

// checkWriteWith writes data to a Digest in the pieces cuts gives, each
// with the jobs not yet done beside it, then the jobs left over by
// SumPrefixed2, and compares every digest with crypto/sha256's.
func checkWriteWith(t *testing.T, data []byte, cuts []int, msgs [][]byte) {
	t.Helper()
	d := New()
	prefixes := make([][32]byte, len(msgs))
	sums := make([][32]byte, len(msgs))
	jobs := make([]Job, len(msgs))
	for i := range msgs {
		prefixes[i][0], prefixes[i][31] = byte(i), byte(i*7)
		jobs[i] = Job{Prefix: &prefixes[i], Data: msgs[i], Sum: &sums[i]}
	}
	next, prev := 0, 0
	for _, c := range append(cuts, len(data)) {
		c = min(max(c, prev), len(data))
		next += d.WriteWith(data[prev:c], jobs[next:])
		prev = c
	}
	for ; next < len(jobs); next++ {
		sums[next] = sumPrefixed(&prefixes[next], msgs[next])
	}
	if got, want := d.Sum(), sha256.Sum256(data); got != want {
		t.Fatalf("%d bytes written in pieces cut at %v: digest %x, crypto/sha256 %x", len(data), cuts, got, want)
	}
	for i := range msgs {
		if sums[i] != want(&prefixes[i], msgs[i]) {
			t.Fatalf("job %d of %d bytes, beside %d bytes cut at %v: its digest differs from crypto/sha256's", i, len(msgs[i]), len(data), cuts)
		}
	}
}

// TestDigest_WriteWith: a stream written in pieces that end inside a
// block and on one, with jobs that end before the stream, after it, and
// across pieces (a job begun and left is the caller's again).
func TestDigest_WriteWith(t *testing.T) {
	msgs := [][]byte{message(1000, 1), message(0, 2), message(31, 3), message(200, 4), message(5000, 5), message(64, 6)}
	for _, n := range []int{0, 1, 55, 56, 63, 64, 65, 127, 128, 1000, 4096, 131072, 131072 + 17} {
		for _, cuts := range [][]int{nil, {1}, {63}, {64}, {100, 200}, {n / 2}, {n / 3, 2 * n / 3}} {
			checkWriteWith(t, message(n, 9), cuts, msgs)
			checkWriteWith(t, message(n, 9), cuts, nil)
		}
	}
}

func FuzzDigestWriteWith(f *testing.F) {
	f.Add(message(300, 1), uint16(70), uint16(130), []byte{10, 200, 0, 3})
	f.Fuzz(func(t *testing.T, data []byte, c1, c2 uint16, lens []byte) {
		var msgs [][]byte
		for i, l := range lens {
			if i >= 8 {
				break
			}
			msgs = append(msgs, message(int(l)*5, byte(i)))
		}
		checkWriteWith(t, data, []int{int(c1), int(c2)}, msgs)
	})
}

// TestDigest_UnpairedBlocksViaCryptoSHA256: blocks with no job beside them
// go through crypto/sha256's own loop, the state carried across in its
// binary form. That form must be the one this build writes (else every
// such block silently falls back to a pair's cost), and the digest must
// be crypto/sha256's whatever the state before and the blocks' number.
func TestDigest_UnpairedBlocksViaCryptoSHA256(t *testing.T) {
	if !enabled {
		t.Skip("no SHA-NI: crypto/sha256 hashes everything")
	}
	d := New()
	d.Write(message(100, 1)) // a state that is not the IV, a partial block
	d.Write(message(28, 2))  // completes it: whole blocks from here
	if d.nx != 0 {
		t.Fatalf("%d bytes buffered, want none", d.nx)
	}
	if !d.viaStd(message(64*singleMin, 3)) {
		t.Fatal("crypto/sha256 did not take or give its state in the form expected")
	}
	d.len += 64 * singleMin
	want := sha256.Sum256(append(append(message(100, 1), message(28, 2)...), message(64*singleMin, 3)...))
	if got := d.Sum(); got != want {
		t.Fatalf("digest %x, crypto/sha256 %x", got, want)
	}
	for _, blocks := range []int{singleMin - 1, singleMin, 2047, 2048} {
		checkWriteWith(t, message(64*blocks+5, 4), []int{64 * blocks / 2}, nil)
	}
}
