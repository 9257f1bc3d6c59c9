package disclosure

import (
	"testing"

	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"

	"github.com/runseal/runseal/log"
)

// memoTree is a tree of n leaves built by transparency-dev/merkle's
// reference implementation, with inclusion proofs for any leaf.
type memoTree struct {
	t      *testonly.Tree
	values []log.Hash
}

func newMemoTree(n int) *memoTree {
	m := &memoTree{t: testonly.New(rfc6962.DefaultHasher)}
	for i := range n {
		var v log.Hash
		v[0], v[1], v[31] = byte(i), byte(i>>8), 0x5a
		m.values = append(m.values, v)
		m.t.AppendData(v[:])
	}
	return m
}

func (m *memoTree) proof(t testing.TB, index uint64) ([]log.Hash, log.Hash) {
	t.Helper()
	ps, err := m.t.InclusionProof(index, m.t.Size())
	if err != nil {
		t.Fatal(err)
	}
	out := make([]log.Hash, len(ps))
	for i, p := range ps {
		out[i] = log.Hash(p)
	}
	return out, log.Hash(m.t.Hash())
}

// checkMemo asks the memo and log.InclusionHolds the same question; they
// must agree.
func checkMemo(t *testing.T, m *inclusionMemo, leaf log.Hash, index, size uint64, proof []log.Hash, root log.Hash) bool {
	t.Helper()
	got, want := m.holds(leaf, index, size, proof, root), log.InclusionHolds(leaf, index, size, proof, root)
	if got != want {
		t.Fatalf("leaf %d of %d, %d proof hashes: the memo says %v, log.InclusionHolds %v", index, size, len(proof), got, want)
	}
	return got
}

// The sealed runs of a package, leaves in ascending order (neighbours,
// gaps, the tree's right edge): every genuine proof holds, and every
// proof changed in one hash, wherever the change falls against the part
// shared with the proof before, does not; nor does a genuine proof under
// another root, or for another leaf value.
func TestInclusionMemo_NeighboursAndDamage(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 8, 33, 100} {
		tr := newMemoTree(n)
		var m inclusionMemo
		for i := 0; i < n; i += 1 + i%3 {
			proof, root := tr.proof(t, uint64(i))
			if !checkMemo(t, &m, tr.values[i], uint64(i), uint64(n), proof, root) {
				t.Fatalf("n=%d: the genuine proof of leaf %d does not hold", n, i)
			}
			for k := range proof {
				bad := append([]log.Hash(nil), proof...)
				bad[k][k%32] ^= 1
				if checkMemo(t, &m, tr.values[i], uint64(i), uint64(n), bad, root) {
					t.Fatalf("n=%d leaf %d: proof hash %d changed, still holds", n, i, k)
				}
			}
			other := tr.values[i]
			other[5] ^= 0x80
			if checkMemo(t, &m, other, uint64(i), uint64(n), proof, root) {
				t.Fatalf("n=%d leaf %d: another leaf value holds", n, i)
			}
			badRoot := root
			badRoot[0] ^= 1
			if checkMemo(t, &m, tr.values[i], uint64(i), uint64(n), proof, badRoot) {
				t.Fatalf("n=%d leaf %d: holds under another root", n, i)
			}
			// Another size: whatever log.InclusionHolds says (a proof can
			// fit two sizes; the checkpoint's signature binds its size).
			checkMemo(t, &m, tr.values[i], uint64(i), uint64(n+1), proof, root)
			if len(proof) > 0 && checkMemo(t, &m, tr.values[i], uint64(i), uint64(n), proof[:len(proof)-1], root) {
				t.Fatalf("n=%d leaf %d: holds without its last proof hash", n, i)
			}
			if checkMemo(t, &m, tr.values[i], uint64(i), uint64(n), append(append([]log.Hash(nil), proof...), root), root) {
				t.Fatalf("n=%d leaf %d: holds with a hash too many", n, i)
			}
		}
		// Genuine proofs alone, of every leaf in order, as a package's
		// runs come: each after the first meets the path of the one
		// before below the root, but where the tree's two halves meet.
		// The memo saves work.
		var g inclusionMemo
		for i := range n {
			proof, root := tr.proof(t, uint64(i))
			checkMemo(t, &g, tr.values[i], uint64(i), uint64(n), proof, root)
		}
		if n >= 3 && g.hits < n-2 {
			t.Fatalf("n=%d: %d of %d genuine proofs were shortened", n, g.hits, n)
		}
	}
}

// FuzzInclusionMemo_AgreesWithLog: a sequence of questions, genuine and
// damaged, to one memo: each answer is log.InclusionHolds's.
func FuzzInclusionMemo_AgreesWithLog(f *testing.F) {
	f.Add(uint8(20), []byte{0, 1, 2, 3, 5, 8, 13, 19}, []byte{0, 0, 7, 0, 0, 1, 0, 0})
	f.Add(uint8(64), []byte{63, 62, 1, 0, 32, 31}, []byte{0, 3, 0, 9, 0, 0})
	trees := map[uint8]*memoTree{}
	f.Fuzz(func(t *testing.T, n uint8, leaves, damage []byte) {
		if n == 0 {
			return
		}
		tr := trees[n]
		if tr == nil {
			tr = newMemoTree(int(n))
			trees[n] = tr
		}
		var m inclusionMemo
		for k, l := range leaves {
			i := uint64(l) % uint64(n)
			proof, root := tr.proof(t, i)
			leaf, size := tr.values[i], uint64(n)
			if k < len(damage) && damage[k] != 0 {
				d := damage[k]
				switch d % 5 {
				case 0:
					if len(proof) > 0 {
						proof[int(d/5)%len(proof)][d%32] ^= 1
					}
				case 1:
					leaf[d%32] ^= 1
				case 2:
					root[d%32] ^= 1
				case 3:
					size = uint64(d) % 300
				case 4:
					i = uint64(d) % 300
				}
			}
			checkMemo(t, &m, leaf, i, size, proof, root)
		}
	})
}
