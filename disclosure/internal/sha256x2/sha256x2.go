// Package sha256x2 computes two SHA-256 digests at once, their rounds
// interleaved on one core.
//
// SHA-NI's round instruction waits several cycles for its own result, so
// one message leaves the unit mostly idle; two independent messages run
// through it together in little more time than one (about 1.6 times the
// bytes per CPU-second on the bench machine). A verifier has such pairs:
// the chain hashes of two records are independent once each has the hash
// it chains from.
//
// Where the CPU lacks SHA-NI, and on other architectures or with the
// purego tag, SumPrefixed2 hashes the two messages one after the other
// with crypto/sha256, and Enabled is false. The digests are the same
// either way: every length is tested against crypto/sha256.
package sha256x2

import (
	"crypto/sha256"
	"encoding/binary"
)

// Enabled reports whether SumPrefixed2 interleaves the two messages. When
// it is false, a caller with a cheaper way to hash one message at a time
// should use that.
var Enabled = enabled

// SumPrefixed2 returns SHA-256(pa || a) and SHA-256(pb || b). The data is
// read in place; only the first block and the last one or two, with the
// padding, are copied.
func SumPrefixed2(pa *[32]byte, a []byte, pb *[32]byte, b []byte) (da, db [32]byte) {
	if !enabled {
		return sumPrefixed(pa, a), sumPrefixed(pb, b)
	}
	return sum2(pa, a, pb, b)
}

// sumPrefixed is SHA-256(p || m) by crypto/sha256.
func sumPrefixed(p *[32]byte, m []byte) [32]byte {
	h := sha256.New()
	h.Write(p[:])
	h.Write(m)
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// iv is SHA-256's initial hash value.
var iv = [8]uint32{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19}

// lane is one message as up to three runs of whole blocks: the first block
// (the prefix and the data's first 32 bytes, copied), the data's whole
// blocks after it, in place, and the rest with the padding (copied). Runs
// name their bytes by offset, not by slice: a lane pointing into itself
// would escape to the heap, an allocation per message.
type lane struct {
	h    [8]uint32
	head [64]byte
	tail [128]byte
	m    []byte
	runs [3]blockRun
	i    int // the run being hashed
}

// The bytes a blockRun is in.
const (
	inHead = iota
	inData
	inTail
)

// blockRun is n whole blocks at off in head, data or tail.
type blockRun struct {
	in, off, n int
}

// init lays out SHA-256(p || m) in l.
func (l *lane) init(p *[32]byte, m []byte) {
	l.h, l.i, l.m = iv, 0, m
	total := uint64(32 + len(m))
	var rest []byte // the bytes after the last whole block, before the padding
	k := 0
	off := 0 // where rest goes in the tail
	if len(m) >= 32 {
		copy(l.head[:32], p[:])
		copy(l.head[32:], m[:32])
		l.runs[k] = blockRun{in: inHead, n: 1}
		k++
		if n := (len(m) - 32) / 64; n > 0 {
			l.runs[k] = blockRun{in: inData, off: 32, n: n}
			k++
		}
		rest = m[32+(len(m)-32)/64*64:]
	} else {
		// The whole message fits in the tail: the prefix and m, then the
		// padding.
		copy(l.tail[:32], p[:])
		rest, off = m, 32
	}
	t := l.tail[:]
	copy(t[off:], rest)
	r := off + len(rest) // bytes in the tail before the padding, < 64
	t[r] = 0x80
	n := 1
	if r+1+8 > 64 {
		n = 2
	}
	clear(t[r+1 : 64*n-8])
	binary.BigEndian.PutUint64(t[64*n-8:], total*8)
	l.runs[k] = blockRun{in: inTail, n: n}
	k++
	for ; k < len(l.runs); k++ {
		l.runs[k] = blockRun{}
	}
}

// more reports whether blocks are left.
func (l *lane) more() bool { return l.i < len(l.runs) && l.runs[l.i].n > 0 }

// next returns the current run's first block and its blocks left.
func (l *lane) next() (*byte, int) {
	r := l.runs[l.i]
	switch r.in {
	case inHead:
		return &l.head[r.off], r.n
	case inData:
		return &l.m[r.off], r.n
	default:
		return &l.tail[r.off], r.n
	}
}

// advance passes n blocks of the current run.
func (l *lane) advance(n int) {
	r := &l.runs[l.i]
	r.off, r.n = r.off+64*n, r.n-n
	if r.n == 0 {
		l.i++
	}
}

func (l *lane) sum() (d [32]byte) {
	for i, v := range l.h {
		binary.BigEndian.PutUint32(d[4*i:], v)
	}
	return d
}
