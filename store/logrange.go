package store

import (
	"fmt"

	"github.com/runseal/runseal/log"
)

// MaxLogRange bounds one read of log leaves or nodes by position, so that
// no caller (a tiles request, say) can make one read hold an unbounded
// result; tiles read 256 at a time.
const MaxLogRange = 1 << 16

// ValidateLogRange refuses a range of log positions [start, end) that is
// reversed, longer than MaxLogRange, or beyond any possible log.
func ValidateLogRange(start, end uint64) error {
	if end < start || end-start > MaxLogRange || end > 1<<62 {
		return &InvalidArgumentError{Field: "range", Detail: fmt.Sprintf("[%d, %d) is not a range of at most %d log positions", start, end, MaxLogRange)}
	}
	return nil
}

// LogRange collects the rows of a read of log positions [Start, End), as
// (index, hash) pairs in index order, and checks them: each position
// exactly once, in order, none missing (NotFound, never skipped), each hash
// 32 bytes (Corrupt). Both backends scan their rows into it, so the rule is
// written once.
type LogRange struct {
	What       string // "log leaf" or "log node", for messages
	Start, End uint64
	out        []Digest
}

// Add takes the next row.
func (r *LogRange) Add(idx int64, h []byte) error {
	want := r.Start + uint64(len(r.out))
	if idx < 0 || uint64(idx) != want {
		return &NotFoundError{What: fmt.Sprintf("%s %d", r.What, want)}
	}
	if len(h) != len(Digest{}) {
		return &CorruptError{Detail: fmt.Sprintf("%s %d is %d bytes", r.What, idx, len(h))}
	}
	r.out = append(r.out, Digest(h))
	return nil
}

// Done returns the hashes once every row was added, or NotFound naming the
// first position the rows did not hold.
func (r *LogRange) Done() ([]Digest, error) {
	if uint64(len(r.out)) != r.End-r.Start {
		return nil, &NotFoundError{What: fmt.Sprintf("%s %d", r.What, r.Start+uint64(len(r.out)))}
	}
	return r.out, nil
}

// BeyondLog is the error for a size argument (named by field) above the
// log's committed size: a proof or root at a size the log has not reached.
func BeyondLog(field string, n, size uint64) error {
	return &InvalidArgumentError{Field: field, Detail: fmt.Sprintf("%d is beyond the log's %d leaves", n, size)}
}

// ProofSize is the tree size an inclusion proof is taken at: the committed
// size, or at when the caller names one, which must not be beyond it.
func ProofSize(committed uint64, at *uint64) (uint64, error) {
	if at == nil {
		return committed, nil
	}
	if *at > committed {
		return 0, BeyondLog("size", *at, committed)
	}
	return *at, nil
}

// Digests converts the log package's hashes to the store's digests.
func Digests(hs []log.Hash) []Digest {
	out := make([]Digest, len(hs))
	for i, h := range hs {
		out[i] = Digest(h)
	}
	return out
}
