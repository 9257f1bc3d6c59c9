package sha256x2

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
)

// Job is one message, SHA-256(Prefix || Data), whose digest goes to Sum.
type Job struct {
	Prefix *[32]byte
	Data   []byte
	Sum    *[32]byte
}

// Digest is a streaming SHA-256 whose blocks can run beside Jobs' (see
// WriteWith). Its zero value is not ready: use New.
type Digest struct {
	h   [8]uint32
	x   [64]byte // a partial block
	nx  int
	len uint64
	std hash.Hash // when !enabled
}

// New returns a Digest of nothing yet.
func New() *Digest {
	d := &Digest{h: iv}
	if !enabled {
		d.std = sha256.New()
	}
	return d
}

// Write adds p to the digest.
func (d *Digest) Write(p []byte) { d.WriteWith(p, nil) }

// WriteWith adds p to the digest and, beside its blocks, hashes jobs in
// order until p's blocks run out. It returns how many jobs it completed
// (their Sums are set); the rest are the caller's, the one it had begun
// included. Without SHA-NI it writes p alone and completes no job.
func (d *Digest) WriteWith(p []byte, jobs []Job) int {
	if !enabled {
		d.std.Write(p)
		return 0
	}
	d.len += uint64(len(p))
	var scratch [8]uint32
	if d.nx > 0 {
		n := copy(d.x[d.nx:], p)
		d.nx += n
		p = p[n:]
		if d.nx < 64 {
			return 0
		}
		blocks2(&d.h, &scratch, &d.x[0], &d.x[0], 1)
		d.nx = 0
	}
	nb, pos, done := len(p)/64, 0, 0
	var l lane
	for nb > 0 && done < len(jobs) {
		j := &jobs[done]
		l.init(j.Prefix, j.Data)
		for nb > 0 && l.more() {
			q, n := l.next()
			n = min(n, nb)
			blocks2(&d.h, &l.h, &p[pos], q, n)
			l.advance(n)
			pos, nb = pos+64*n, nb-n
		}
		if l.more() {
			break
		}
		*j.Sum = l.sum()
		done++
	}
	if nb > 0 {
		blocks2(&d.h, &scratch, &p[pos], &p[pos], nb)
		pos += 64 * nb
	}
	d.nx = copy(d.x[:], p[pos:])
	return done
}

// Sum returns the digest of what was written so far.
func (d *Digest) Sum() (s [32]byte) {
	if !enabled {
		d.std.Sum(s[:0])
		return s
	}
	var t [128]byte
	copy(t[:], d.x[:d.nx])
	t[d.nx] = 0x80
	n := 1
	if d.nx+1+8 > 64 {
		n = 2
	}
	binary.BigEndian.PutUint64(t[64*n-8:], d.len*8)
	h, scratch := d.h, [8]uint32{}
	blocks2(&h, &scratch, &t[0], &t[0], n)
	for i, v := range h {
		binary.BigEndian.PutUint32(s[4*i:], v)
	}
	return s
}
