package disclosure

import (
	"slices"

	"github.com/runseal/runseal/log"
)

// inclusionMemo checks the inclusion proofs of a package's sealed runs
// against its one checkpoint, remembering the last proof that held. The
// runs of a package are leaves in ascending order, often neighbours, so
// their proofs share most of their paths: a proof reaches, after a step or
// two, the state the last one reached (the same node of the same tree,
// with the same hash) and has from there the same remaining proof hashes;
// the rest of its computation is then the last one's, step for step, and
// ends in the same root. Only the steps before are hashed: about two
// instead of one per level of the tree.
//
// What it accepts, log.InclusionHolds accepts: the path is RFC 9162
// section 2.1.3.2's, as log.InclusionHolds computes it, state for state;
// a proof no remembered state shortens is checked by log.InclusionHolds
// itself as well, and remembered only when both hold
// (FuzzInclusionMemo_AgreesWithLog).
type inclusionMemo struct {
	size  uint64
	root  log.Hash
	steps []log.InclusionPath // the last proof that held: the state before each step
	proof []log.Hash          // its proof hashes
	cur   []log.InclusionPath // the proof being checked, reused
	hits  int                 // proofs a remembered state shortened
}

// holds reports whether proof proves leafValue is leaf index of the tree
// of size with root, as log.InclusionHolds does.
func (m *inclusionMemo) holds(leafValue log.Hash, index, size uint64, proof []log.Hash, root log.Hash) bool {
	if index >= size {
		return false
	}
	// The remembered path is of one tree: another size or root finds
	// nothing in it, and replaces it if it holds.
	same := size == m.size && root == m.root
	path := log.NewInclusionPath(leafValue, index, size)
	cur := m.cur[:0]
	for i := range proof {
		cur = append(cur, path)
		if j := m.reached(path); same && j >= 0 && slices.Equal(proof[i:], m.proof[j:]) {
			// From here the computation is the last proof's from its step
			// j, which held. Its later states are this one's too.
			m.cur = append(cur[:i], m.steps[j:]...)
			m.steps, m.cur = m.cur, m.steps
			m.proof = append(m.proof[:0], proof...)
			m.hits++
			return true
		}
		if !path.Step(&proof[i]) {
			m.cur = cur
			return false
		}
	}
	m.cur = cur
	if !path.AtRoot() || path.Hash != root || !log.InclusionHolds(leafValue, index, size, proof, root) {
		return false
	}
	m.steps, m.cur = cur, m.steps
	m.proof = append(m.proof[:0], proof...)
	m.size, m.root = size, root
	return true
}

// reached returns the step of the last proof that held whose state was
// at, or -1. Along one path Last strictly falls, so at most one step
// matches.
func (m *inclusionMemo) reached(at log.InclusionPath) int {
	for j := range m.steps {
		if s := &m.steps[j]; s.Last == at.Last {
			if s.Index == at.Index && s.Hash == at.Hash {
				return j
			}
			return -1
		}
	}
	return -1
}
