package sha256x2

import (
	"crypto/sha256"
	"testing"
)

func want(p *[32]byte, m []byte) [32]byte {
	return sha256.Sum256(append(append([]byte{}, p[:]...), m...))
}

func message(n int, seed byte) []byte {
	m := make([]byte, n)
	for i := range m {
		m[i] = byte(i*31) ^ seed
	}
	return m
}

// TestSumPrefixed2_EveryLength compares both digests with crypto/sha256's
// for every pair of lengths around the block and padding boundaries: a
// lane whose tail takes one block or two, a message inside the first
// block, lanes of different lengths (one finishing first, with either).
func TestSumPrefixed2_EveryLength(t *testing.T) {
	pa, pb := [32]byte{1, 2, 3}, [32]byte{0xff, 0xfe}
	var lens []int
	for n := range 200 {
		lens = append(lens, n)
	}
	lens = append(lens, 1000, 1023, 1024, 1025, 4096+7, 70000)
	for _, na := range lens {
		for _, nb := range []int{0, 1, 31, 32, 33, 55, 56, 64, 87, 88, 95, 96, 97, 150, 1031} {
			a, b := message(na, 1), message(nb, 2)
			da, db := SumPrefixed2(&pa, a, &pb, b)
			if da != want(&pa, a) || db != want(&pb, b) {
				t.Fatalf("lengths %d and %d: the digests differ from crypto/sha256's (enabled %v)", na, nb, Enabled)
			}
			// The same message on both lanes, and the lanes swapped.
			db2, da2 := SumPrefixed2(&pb, b, &pa, a)
			if da2 != da || db2 != db {
				t.Fatalf("lengths %d and %d: the lanes swapped give other digests", na, nb)
			}
		}
	}
}

// TestSumPrefixed2_Aliased hashes one buffer on both lanes and messages
// that overlap: the data is only read.
func TestSumPrefixed2_Aliased(t *testing.T) {
	m := message(500, 9)
	var p [32]byte
	da, db := SumPrefixed2(&p, m, &p, m[100:])
	if da != want(&p, m) || db != want(&p, m[100:]) {
		t.Fatal("overlapping messages: digests differ from crypto/sha256's")
	}
}

func FuzzSumPrefixed2(f *testing.F) {
	f.Add([]byte("prefix-a"), []byte("a"), []byte("prefix-b"), []byte("bb"))
	f.Add([]byte{}, message(119, 3), []byte{1}, message(56, 4))
	f.Fuzz(func(t *testing.T, qa, a, qb, b []byte) {
		var pa, pb [32]byte
		copy(pa[:], qa)
		copy(pb[:], qb)
		da, db := SumPrefixed2(&pa, a, &pb, b)
		if da != want(&pa, a) || db != want(&pb, b) {
			t.Fatalf("lengths %d and %d: the digests differ from crypto/sha256's", len(a), len(b))
		}
	})
}

// BenchmarkSumPrefixed2 hashes pairs of 1 kB messages, the size of a
// bench record, beside crypto/sha256 hashing the same two one at a time.
func BenchmarkSumPrefixed2(b *testing.B) {
	var p [32]byte
	x, y := message(1030, 1), message(1030, 2)
	b.Run("pair", func(b *testing.B) {
		b.SetBytes(2 * (32 + 1030))
		for b.Loop() {
			SumPrefixed2(&p, x, &p, y)
		}
	})
	b.Run("crypto-sha256", func(b *testing.B) {
		buf := make([]byte, 32+1030)
		b.SetBytes(2 * (32 + 1030))
		for b.Loop() {
			copy(buf[32:], x)
			sha256.Sum256(buf)
			copy(buf[32:], y)
			sha256.Sum256(buf)
		}
	})
}
