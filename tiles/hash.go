package tiles

import (
	"crypto/sha256"
	"fmt"
	"strings"

	"github.com/transparency-dev/merkle/compact"

	"github.com/runseal/runseal/log"
)

// hashChildren is the RFC 6962 interior node hash, over a stack buffer.
func hashChildren(l, r []byte) []byte {
	var b [1 + 2*sha256.Size]byte
	b[0] = 0x01
	copy(b[1:], l)
	copy(b[1+sha256.Size:], r)
	h := sha256.Sum256(b[:])
	return h[:]
}

var rangeFactory = &compact.RangeFactory{Hash: hashChildren}

// subtreeHash is the RFC 6962 root of hs, a power-of-two count of
// complete subtree hashes of one level: the hash they make one level of
// tiles up (256 of them), or a node inside a tile (fewer).
func subtreeHash(hs []log.Hash) log.Hash {
	buf := make([]log.Hash, len(hs))
	copy(buf, hs)
	for n := len(buf); n > 1; n /= 2 {
		for i := 0; i < n/2; i++ {
			buf[i] = log.Hash(hashChildren(buf[2*i][:], buf[2*i+1][:]))
		}
	}
	return buf[0]
}

// edgeRefs returns the partial hash tiles that a tree of size has, one per
// level whose width at size is not a multiple of 256: together they hold
// every node of the compact range [0, size), so they alone give the root.
func edgeRefs(size uint64) []Ref {
	var out []Ref
	for l := 0; l < Levels(size); l++ {
		n := levelWidth(size, l)
		if w := int(n % Width); w != 0 {
			out = append(out, Ref{Level: l, Index: n / Width, W: w})
		}
	}
	return out
}

// rootFromEdge computes the root of the tree of size from its partial
// tiles (edge, keyed by level, as edgeRefs lists them).
func rootFromEdge(size uint64, edge map[int][]log.Hash) (log.Hash, error) {
	if size == 0 {
		return log.EmptyRoot(), nil
	}
	ids := compact.RangeNodes(0, size, nil)
	hs := make([][]byte, len(ids))
	for i, id := range ids {
		h, err := nodeInTile(id, edge[int(id.Level/8)])
		if err != nil {
			return log.Hash{}, err
		}
		hs[i] = h[:]
	}
	cr, err := rangeFactory.NewRange(0, size, hs)
	if err != nil {
		return log.Hash{}, err
	}
	root, err := cr.GetRootHash(nil)
	if err != nil {
		return log.Hash{}, err
	}
	return log.Hash(root), nil
}

// nodeInTile computes tree node id from the tile that holds it (the tile
// at level id.Level/8 whose hashes span its leaves): the subtree hash of
// the 2^(id.Level%8) tile hashes below it.
func nodeInTile(id compact.NodeID, hs []log.Hash) (log.Hash, error) {
	r := id.Level % 8
	first := (id.Index << r) % Width
	n := uint64(1) << r
	if first+n > uint64(len(hs)) {
		return log.Hash{}, fmt.Errorf("node (%d, %d) is beyond its tile's %d hashes", id.Level, id.Index, len(hs))
	}
	return subtreeHash(hs[first : first+n]), nil
}

func refList(rs []Ref) string {
	ps := make([]string, len(rs))
	for i, r := range rs {
		ps[i] = r.Path()
	}
	return strings.Join(ps, ", ")
}

// innerLevels returns the complete subtree hashes inside a tile: level 0
// is hs, level r holds the hashes of 2^r consecutive tile hashes, as many
// as are complete. A full tile's level 8 is its one subtree hash. It
// costs len(hs)-1 hashes, once per tile.
func innerLevels(hs []log.Hash) [][]log.Hash {
	lv := [][]log.Hash{hs}
	for r := 1; r <= 8; r++ {
		prev := lv[r-1]
		if len(prev) < 2 {
			break
		}
		cur := make([]log.Hash, len(prev)/2)
		for i := range cur {
			cur[i] = log.Hash(hashChildren(prev[2*i][:], prev[2*i+1][:]))
		}
		lv = append(lv, cur)
	}
	return lv
}

// nodeInLevels is nodeInTile over a tile's innerLevels.
func nodeInLevels(id compact.NodeID, lv [][]log.Hash) (log.Hash, error) {
	r := id.Level % 8
	j := id.Index % (Width >> r)
	if int(r) >= len(lv) || j >= uint64(len(lv[r])) {
		return log.Hash{}, fmt.Errorf("node (%d, %d) is beyond its tile", id.Level, id.Index)
	}
	return lv[r][j], nil
}
