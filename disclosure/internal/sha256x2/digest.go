package sha256x2

import (
	"crypto/sha256"
	"encoding"
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
	std hash.Hash // when !enabled: the digest; else hashes blocks without a partner (single)
	st  []byte    // single's marshalled state, reused
}

// New returns a Digest of nothing yet.
func New() *Digest {
	return &Digest{h: iv, std: sha256.New()}
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
		d.single(p[pos : pos+64*nb])
		pos += 64 * nb
	}
	d.nx = copy(d.x[:], p[pos:])
	return done
}

// singleMin is the fewest blocks single hands to crypto/sha256; fewer go
// through blocks2 beside a scratch partner.
const singleMin = 4

// single adds whole blocks p to the digest when no job is left to pair
// them with. blocks2 with a scratch partner costs what a pair costs,
// about 1.7 times one message's blocks through crypto/sha256's own
// SHA-NI loop on the bench machine, and the tail of a chunk beyond its
// records (run blocks, the first record, the line cut at its end) is a
// tenth of it; so the state goes into crypto/sha256 and back (its
// documented binary form: magic, the eight words, the partial block, the
// length), at the cost of two copies of 108 bytes.
func (d *Digest) single(p []byte) {
	if len(p) < 64*singleMin || !d.viaStd(p) {
		var scratch [8]uint32
		blocks2(&d.h, &scratch, &p[0], &p[0], len(p)/64)
	}
}

// viaStd adds whole blocks p to the digest through crypto/sha256. It
// reports false, having changed nothing, if crypto/sha256 does not take
// or give its state in the form this build knows.
func (d *Digest) viaStd(p []byte) bool {
	u, ok1 := d.std.(encoding.BinaryUnmarshaler)
	a, ok2 := d.std.(encoding.BinaryAppender)
	if !ok1 || !ok2 {
		return false
	}
	st := append(d.st[:0], "sha\x03"...)
	for _, v := range d.h {
		st = binary.BigEndian.AppendUint32(st, v)
	}
	st = append(st, make([]byte, 64+8)...) // no partial block; a length that is a whole number of blocks
	if u.UnmarshalBinary(st) != nil {
		return false
	}
	d.std.Write(p)
	st, err := a.AppendBinary(st[:0])
	d.st = st
	if err != nil || len(st) != len("sha\x03")+32+64+8 {
		// crypto/sha256 has hashed p; the digest has not.
		return false
	}
	for i := range d.h {
		d.h[i] = binary.BigEndian.Uint32(st[4+4*i:])
	}
	return true
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
