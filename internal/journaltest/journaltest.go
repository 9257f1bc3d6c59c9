// Package journaltest provides what makes a journal signed and witnessed,
// for tests: a log's key and its signed checkpoints, an RFC 6962 tree kept
// by golang.org/x/mod/sumdb/tlog (an implementation independent of this
// module's log package, so that proofs checked against it were not made by
// the code under test), witnesses' cosigning keys, and the witness policy
// naming them. (A clock the test moves is store/storetest's FakeClock.)
//
// It imports neither a store nor the witness package: the witness's own
// tests use it, and so can test binaries that must not link SQLite (the
// disclosure verifier's fuzz target).
package journaltest

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/runseal/runseal/checkpoint"
)

// Log is a log's key and a tree of its leaves.
type Log struct {
	Origin   string
	Signer   note.Signer   // signs the log's checkpoints
	VKey     string        // the verifier key, as a policy's log line and the witness's log list name it
	Verifier note.Verifier // verifies VKey's signatures
	Tree     *Tree         // the log's leaves; empty until grown
}

// NewLog makes a fresh key for the log origin and an empty tree.
func NewLog(t testing.TB, origin string) *Log {
	t.Helper()
	skey, vkey, err := checkpoint.GenerateLogKey(rand.Reader, origin)
	if err != nil {
		t.Fatal(err)
	}
	signer, _, err := checkpoint.SignerForOrigin(skey, origin)
	if err != nil {
		t.Fatal(err)
	}
	v, err := checkpoint.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return &Log{Origin: origin, Signer: signer, VKey: vkey, Verifier: v, Tree: &Tree{}}
}

// Note is the log's signed checkpoint at size with the root of tree
// (l.Tree when nil).
func (l *Log) Note(t testing.TB, size uint64, tree *Tree) []byte {
	t.Helper()
	if tree == nil {
		tree = l.Tree
	}
	n, err := checkpoint.Sign(checkpoint.Checkpoint{Origin: l.Origin, Size: size, Root: tree.Root(size)}, l.Signer)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Tree is an RFC 6962 tree kept with tlog. Its leaves are the big-endian
// index after a seed, so that a fork grows leaves of its own. It is safe
// for concurrent use.
type Tree struct {
	mu     sync.Mutex
	stored []tlog.Hash
	size   int64
	seed   string
}

func (t *Tree) reader() tlog.HashReader {
	return tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			if x >= int64(len(t.stored)) {
				return nil, fmt.Errorf("hash %d not stored", x)
			}
			out[i] = t.stored[x]
		}
		return out, nil
	})
}

// Grow appends n leaves and returns the new size.
func (t *Tree) Grow(n int) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	for range n {
		var leaf [8]byte
		binary.BigEndian.PutUint64(leaf[:], uint64(t.size))
		hs, err := tlog.StoredHashes(t.size, append([]byte(t.seed), leaf[:]...), t.reader())
		if err != nil {
			panic(err) // every hash it reads was stored before
		}
		t.stored = append(t.stored, hs...)
		t.size++
	}
	return uint64(t.size)
}

// Size is how many leaves the tree holds.
func (t *Tree) Size() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return uint64(t.size)
}

// Root is the tree's root at size (at most Size), the hash of the empty
// string at 0.
func (t *Tree) Root(size uint64) [32]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	if size == 0 {
		return sha256.Sum256(nil)
	}
	h, err := tlog.TreeHash(int64(size), t.reader())
	if err != nil {
		panic(fmt.Sprintf("root at %d of a tree of %d: %v", size, t.size, err))
	}
	return h
}

// Proof is the consistency proof from old to size (at most Size); none
// from 0 or between equal sizes.
func (t *Tree) Proof(old, size uint64) [][32]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old == 0 || old == size {
		return nil
	}
	p, err := tlog.ProveTree(int64(size), int64(old), t.reader())
	if err != nil {
		panic(fmt.Sprintf("proof %d to %d in a tree of %d: %v", old, size, t.size, err))
	}
	out := make([][32]byte, len(p))
	for i := range p {
		out[i] = p[i]
	}
	return out
}

// Fork is a copy of t that grows differently from t.
func (t *Tree) Fork(seed string) *Tree {
	t.mu.Lock()
	defer t.mu.Unlock()
	return &Tree{stored: append([]tlog.Hash(nil), t.stored...), size: t.size, seed: seed}
}

// Witness is a witness's cosigning key, under the name a policy gives it
// (also its key's name), and where it listens when it does.
type Witness struct {
	Name     string
	Cosigner *checkpoint.Cosigner
	VKey     string
	URL      string // the policy's witness line carries it when set
}

// NewWitness makes a fresh cosigning key named name.
func NewWitness(t testing.TB, name string) *Witness {
	t.Helper()
	skey, vkey, err := checkpoint.GenerateCosignerKey(rand.Reader, name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := checkpoint.NewCosigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return &Witness{Name: name, Cosigner: c, VKey: vkey}
}

// Policy is the witness policy with log's key (when log is not nil) and a
// line for each of ws, whose quorum is every one of ws (none without ws).
func Policy(t testing.TB, log *Log, ws ...*Witness) *checkpoint.Policy {
	t.Helper()
	var b strings.Builder
	if log != nil {
		fmt.Fprintf(&b, "log %s\n", log.VKey)
	}
	names := make([]string, len(ws))
	for i, w := range ws {
		names[i] = w.Name
		fmt.Fprintf(&b, "witness %s %s %s\n", w.Name, w.VKey, w.URL)
	}
	switch len(ws) {
	case 0:
		b.WriteString("quorum none\n")
	case 1:
		fmt.Fprintf(&b, "quorum %s\n", ws[0].Name)
	default:
		fmt.Fprintf(&b, "group every all %s\nquorum every\n", strings.Join(names, " "))
	}
	p, err := checkpoint.ParsePolicy([]byte(b.String()))
	if err != nil {
		t.Fatalf("policy %q: %v", b.String(), err)
	}
	return p
}
