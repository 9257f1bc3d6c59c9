package log

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
)

// Hash is a SHA-256 digest: a leaf value, a node hash, a root or a proof
// element. It is an array so that it compares with == and copies by value.
type Hash = [32]byte

// Node is one stored perfect subtree: its position and its hash. Level 0 nodes
// are leaf hashes, not leaf values.
type Node struct {
	ID   compact.NodeID
	Hash Hash
}

// NodeReader reads stored nodes. A backend implements it over its own tables,
// inside whatever transaction or snapshot the caller holds, which is what makes
// a proof consistent with the size the caller read in that transaction.
type NodeReader interface {
	// ReadNodes returns the hashes of ids, in the same order and exactly one
	// per id. A node the store does not hold is an error, preferably a
	// [*NodeNotFoundError], never a zero hash.
	ReadNodes(ctx context.Context, ids []compact.NodeID) ([]Hash, error)
}

// NodeWriter is a NodeReader that also stores nodes, as [Append] needs.
type NodeWriter interface {
	NodeReader
	// WriteNodes stores nodes, all or none. Rewriting a node with the hash it
	// already has must succeed; replacing it with a different hash should fail
	// with a [*NodeConflictError], because stored nodes never change in an
	// append-only tree.
	WriteNodes(ctx context.Context, nodes []Node) error
}

const (
	leafPrefix = 0x00 // RFC 6962 §2.1 domain separation for leaves
	nodePrefix = 0x01 // and for interior nodes
)

var emptyRoot = sha256.Sum256(nil)

// LeafHash returns the hash under which leafValue enters the tree,
// SHA-256(0x00 || leafValue). The prefix keeps a leaf from ever being taken
// for an interior node (second-preimage resistance, RFC 6962 §2.1).
func LeafHash(leafValue Hash) Hash {
	var b [1 + sha256.Size]byte
	b[0] = leafPrefix
	copy(b[1:], leafValue[:])
	return sha256.Sum256(b[:])
}

// EmptyRoot returns the root of the tree with no leaves, SHA-256(""). A
// checkpoint of size 0 must carry exactly this root.
func EmptyRoot() Hash { return emptyRoot }

// hashChildren is the RFC 6962 interior node hash in the shape the
// transparency-dev/merkle helpers take. It hashes a stack buffer rather than
// going through a hash.Hash, which halves the cost of an append; the tests
// check it against that library's rfc6962 hasher. Inputs are always 32 bytes
// here, as every hash in this package comes from a Hash.
func hashChildren(l, r []byte) []byte {
	var b [1 + 2*sha256.Size]byte
	b[0] = nodePrefix
	copy(b[1:1+sha256.Size], l)
	copy(b[1+sha256.Size:], r)
	h := sha256.Sum256(b[:])
	return h[:]
}

// rangeFactory builds the compact ranges Root and Append fold; it must be a
// single value because compact refuses to merge ranges of different factories.
var rangeFactory = &compact.RangeFactory{Hash: hashChildren}

var errNilStore = errors.New("nil node store")

// readNodes fetches ids in one call and checks the store kept its side of the
// contract, because a short or long answer would otherwise be folded into a
// wrong root instead of an error.
func readNodes(ctx context.Context, r NodeReader, ids []compact.NodeID) ([][]byte, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	hs, err := r.ReadNodes(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("reading %d nodes: %w", len(ids), err)
	}
	if len(hs) != len(ids) {
		return nil, fmt.Errorf("node store returned %d hashes for %d nodes", len(hs), len(ids))
	}
	out := make([][]byte, len(hs))
	for i := range hs {
		out[i] = hs[i][:]
	}
	return out, nil
}

func toHashes(hs [][]byte) []Hash {
	out := make([]Hash, len(hs))
	for i, h := range hs {
		copy(out[i][:], h)
	}
	return out
}

// Append adds leaves, given as leaf values, at positions size, size+1, ... of
// the tree whose first size leaves w already holds, and returns the root of
// the tree of size+len(leaves).
//
// It stores the leaf hash of each new leaf (level 0) and the hash of every
// subtree that becomes complete, in one WriteNodes call after all hashing is
// done; it reads only the O(log n) nodes of the compact range [0, size). size
// must be the committed size: the caller serializes appends, typically by
// running Append in the same transaction that records the new size. Appending
// no leaves returns the root at size and writes nothing.
func Append(ctx context.Context, w NodeWriter, size uint64, leaves ...Hash) (Hash, error) {
	const op = "Append"
	if w == nil {
		return Hash{}, fmt.Errorf("log: %s: %w", op, errNilStore)
	}
	if n := uint64(len(leaves)); n > math.MaxUint64-size {
		return Hash{}, &RangeError{Op: op, Value: n, Bound: math.MaxUint64 - size,
			Detail: fmt.Sprintf("appending %d leaves to size %d exceeds 2^64-1 leaves", n, size)}
	}
	if len(leaves) == 0 {
		return Root(ctx, w, size)
	}
	hs, err := readNodes(ctx, w, compact.RangeNodes(0, size, nil))
	if err != nil {
		return Hash{}, fmt.Errorf("log: %s at size %d: %w", op, size, err)
	}
	cr, err := rangeFactory.NewRange(0, size, hs)
	if err != nil {
		return Hash{}, fmt.Errorf("log: %s at size %d: %w", op, size, err)
	}
	// A tree of n leaves has 2n - popcount(n) perfect subtrees, so this is
	// exactly the number of nodes the append completes.
	end := size + uint64(len(leaves))
	nodes := make([]Node, 0, 2*len(leaves)-bits.OnesCount64(end)+bits.OnesCount64(size))
	visit := func(id compact.NodeID, h []byte) {
		n := Node{ID: id}
		copy(n.Hash[:], h)
		nodes = append(nodes, n)
	}
	for _, v := range leaves {
		lh := LeafHash(v)
		if err := cr.Append(lh[:], visit); err != nil {
			return Hash{}, fmt.Errorf("log: %s at size %d: %w", op, cr.End(), err)
		}
	}
	root, err := cr.GetRootHash(nil)
	if err != nil {
		return Hash{}, fmt.Errorf("log: %s: %w", op, err)
	}
	if err := w.WriteNodes(ctx, nodes); err != nil {
		return Hash{}, fmt.Errorf("log: %s at size %d: writing %d nodes: %w", op, size, len(nodes), err)
	}
	return toHashes([][]byte{root})[0], nil
}

// Root returns the root of the tree of the given size, which may be any size
// up to the store's current one. It reads the popcount(size) perfect subtrees
// of the compact range [0, size) and folds them right to left, so it costs at
// most 64 reads and 63 hashes whatever the size. Size 0 reads nothing and
// returns [EmptyRoot].
func Root(ctx context.Context, r NodeReader, size uint64) (Hash, error) {
	const op = "Root"
	if r == nil {
		return Hash{}, fmt.Errorf("log: %s: %w", op, errNilStore)
	}
	if size == 0 {
		return emptyRoot, nil
	}
	hs, err := readNodes(ctx, r, compact.RangeNodes(0, size, nil))
	if err != nil {
		return Hash{}, fmt.Errorf("log: %s(%d): %w", op, size, err)
	}
	cr, err := rangeFactory.NewRange(0, size, hs)
	if err != nil {
		return Hash{}, fmt.Errorf("log: %s(%d): %w", op, size, err)
	}
	root, err := cr.GetRootHash(nil)
	if err != nil {
		return Hash{}, fmt.Errorf("log: %s(%d): %w", op, size, err)
	}
	return toHashes([][]byte{root})[0], nil
}

// InclusionProof returns the RFC 6962 audit path for leaf index in the tree of
// the given size, siblings from the leaf upwards. Any past size works, as long
// as the store holds that size. It reads the O(log size) proof nodes and the
// leaf's own hash, so that a size beyond the store's fails with a missing
// node. index >= size is a [*RangeError].
func InclusionProof(ctx context.Context, r NodeReader, index, size uint64) ([]Hash, error) {
	const op = "InclusionProof"
	if r == nil {
		return nil, fmt.Errorf("log: %s: %w", op, errNilStore)
	}
	if index >= size {
		return nil, &RangeError{Op: op, Value: index, Bound: size,
			Detail: fmt.Sprintf("index %d out of range for tree size %d", index, size)}
	}
	nodes, err := proof.Inclusion(index, size)
	if err != nil {
		return nil, fmt.Errorf("log: %s(%d, %d): %w", op, index, size, err)
	}
	// The proof covers every leaf but the one proved, so for index ==
	// size-1 one past the stored size it would be answered from nodes that
	// all exist. Reading the leaf too, in the same call, makes that a
	// missing node like every other size the store does not hold.
	return fetchProof(ctx, r, op, nodes, compact.NewNodeID(0, index))
}

// ConsistencyProof returns the RFC 6962 consistency proof that the tree of
// oldSize is a prefix of the tree of newSize. Both may be any sizes the store
// holds. oldSize > newSize is a [*RangeError]. oldSize 0 and oldSize ==
// newSize give an empty proof and read nothing: RFC 9162 defines no proof
// for them, and the verifier checks those cases from the roots alone. So
// they alone do not notice a newSize beyond the store's; every other call
// fails with a missing node for such a size.
func ConsistencyProof(ctx context.Context, r NodeReader, oldSize, newSize uint64) ([]Hash, error) {
	const op = "ConsistencyProof"
	if r == nil {
		return nil, fmt.Errorf("log: %s: %w", op, errNilStore)
	}
	if oldSize > newSize {
		return nil, &RangeError{Op: op, Value: oldSize, Bound: newSize,
			Detail: fmt.Sprintf("old size %d is larger than new size %d", oldSize, newSize)}
	}
	// Handled here rather than left to the library, whose answer for size 0
	// differs between versions.
	if oldSize == 0 || oldSize == newSize {
		return []Hash{}, nil
	}
	nodes, err := proof.Consistency(oldSize, newSize)
	if err != nil {
		return nil, fmt.Errorf("log: %s(%d, %d): %w", op, oldSize, newSize, err)
	}
	return fetchProof(ctx, r, op, nodes)
}

// ConsistencyNodes returns the nodes [ConsistencyProof] reads for
// oldSize and newSize, in the order it reads them, so that a backend can
// fetch them ahead in the same round trip as the size it checks newSize
// against. It is empty where the proof is (oldSize 0 or equal sizes).
func ConsistencyNodes(oldSize, newSize uint64) ([]compact.NodeID, error) {
	if oldSize > newSize {
		return nil, &RangeError{Op: "ConsistencyNodes", Value: oldSize, Bound: newSize,
			Detail: fmt.Sprintf("old size %d is larger than new size %d", oldSize, newSize)}
	}
	if oldSize == 0 || oldSize == newSize {
		return nil, nil
	}
	nodes, err := proof.Consistency(oldSize, newSize)
	if err != nil {
		return nil, fmt.Errorf("log: ConsistencyNodes(%d, %d): %w", oldSize, newSize, err)
	}
	return nodes.IDs, nil
}

// fetchProof reads the nodes a proof needs, plus any extra nodes whose only
// purpose is to be present, in one call, and rehashes the ephemeral node (the
// root of the incomplete right subtree) from them.
func fetchProof(ctx context.Context, r NodeReader, op string, nodes proof.Nodes, extra ...compact.NodeID) ([]Hash, error) {
	ids := append(nodes.IDs[:len(nodes.IDs):len(nodes.IDs)], extra...)
	hs, err := readNodes(ctx, r, ids)
	if err != nil {
		return nil, fmt.Errorf("log: %s: %w", op, err)
	}
	hs, err = nodes.Rehash(hs[:len(nodes.IDs)], hashChildren)
	if err != nil {
		return nil, fmt.Errorf("log: %s: %w", op, err)
	}
	return toHashes(hs), nil
}
