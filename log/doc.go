// Package log is the Merkle tree of a runseal tenant's sealed runs: an
// append-only RFC 6962 / RFC 9162 tree kept in an abstract node store, the
// inclusion and consistency proofs it serves, and the verifiers an auditor
// runs offline.
//
// Leaf i of the tree holds a leaf value (a sealed run's terminal chain hash).
// The tree hashes it as SHA-256(0x00 || value), an interior node as
// SHA-256(0x01 || left || right), and the empty tree as SHA-256("") (which is
// not 32 zero bytes). Proofs are the RFC 6962 audit path and consistency proof,
// byte for byte, so any RFC 6962 verifier accepts them.
//
// # Invariants
//
//   - The store holds perfect subtrees only, addressed by [compact.NodeID]
//     (level, index): the leaf hashes at level 0 and every interior node whose
//     subtree is complete. A node is written once, when it becomes complete, and
//     never changes afterwards, so one store answers for every past tree size:
//     [Root], [InclusionProof] and [ConsistencyProof] work at any size up to the
//     current one.
//   - The package does not know the store's size. The caller (a backend, inside
//     the transaction that seals a run) keeps the committed size, passes it to
//     [Append], serializes appends to one store, and never asks about a size
//     larger than the committed one. A size too large is reported as a missing
//     node, never answered (only the empty consistency proofs, from size 0 or
//     between equal sizes, read nothing and so check nothing).
//   - Nothing scans leaves: [Root], [Append] and the proofs each read O(log n)
//     nodes in a single [NodeReader.ReadNodes] call.
//   - [Append] computes everything before it writes, then writes in a single
//     [NodeWriter.WriteNodes] call, so a backend that runs it inside a
//     transaction commits a seal and its leaf together or not at all.
//   - The verifiers trust nothing but their arguments, and any non-nil error
//     from them means "not verified". Sizes near 2^64 are handled; no input
//     makes a function of this package panic.
//   - A proof binds a leaf (or an old root) to a root, not to a tree size: an
//     RFC 6962 proof for (index, size) also verifies, against the same root,
//     for any other size that gives the same proof shape. Verify only against
//     a size and root that come together from a signed checkpoint, never
//     against a size taken from the party that supplied the proof.
//
// Tree shape, proof node selection and proof checking come from
// github.com/transparency-dev/merkle; this package adds the store contract,
// the edge cases that library leaves to its callers (size 0, equal sizes), and
// typed errors.
package log
