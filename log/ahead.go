package log

import (
	"context"
	"fmt"

	"github.com/transparency-dev/merkle/compact"
)

// Ahead returns a NodeReader that answers from nodes, read ahead by a
// backend in the same statement as whatever else a proof needed (the size,
// the run's position), and reads any other node from next, in one call.
// Put a [NodeCache] in front of it, never behind: the cache keeps what the
// reader returns. nodes must be committed nodes, as next's are.
func Ahead(nodes []Node, next NodeReader) NodeReader {
	return ahead{nodes: nodes, next: next}
}

type ahead struct {
	nodes []Node // a proof's few: a scan beats a map
	next  NodeReader
}

func (a ahead) ReadNodes(ctx context.Context, ids []compact.NodeID) ([]Hash, error) {
	out := make([]Hash, len(ids))
	var miss []int
next:
	for i, id := range ids {
		for _, n := range a.nodes {
			if n.ID == id {
				out[i] = n.Hash
				continue next
			}
		}
		miss = append(miss, i)
	}
	if len(miss) == 0 {
		return out, nil
	}
	want := make([]compact.NodeID, len(miss))
	for k, i := range miss {
		want[k] = ids[i]
	}
	got, err := a.next.ReadNodes(ctx, want)
	if err != nil {
		return nil, err
	}
	if len(got) != len(want) {
		return nil, fmt.Errorf("node store returned %d hashes for %d nodes", len(got), len(want))
	}
	for k, i := range miss {
		out[i] = got[k]
	}
	return out, nil
}
