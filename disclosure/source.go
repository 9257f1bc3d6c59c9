package disclosure

import (
	"context"

	"github.com/runseal/runseal/store"
)

// Source is what WritePackage reads from a journal: the runs a selection
// names (their heads and records, and the runs of a case), the log's
// checkpoint, and the proofs and positions of the runs it carries. Any
// store.Journal is one; a double implements these methods and no others.
type Source interface {
	Head(ctx context.Context, run store.RunID) (store.Head, error)
	ReadPage(ctx context.Context, run store.RunID, from store.Seq, limit int) ([]store.Record, error)
	CaseRuns(ctx context.Context, c store.CaseID, after *store.RunID, limit int) ([]store.RunID, error)
	Checkpoint(ctx context.Context) (store.Checkpoint, error)
	ConsistencyProof(ctx context.Context, oldSize, newSize uint64) ([]store.Digest, error)
	InclusionProofAt(ctx context.Context, run store.RunID, size uint64) (*store.Inclusion, error)
	LogPositions(ctx context.Context, runs []store.RunID) ([]*store.Position, error)
}
