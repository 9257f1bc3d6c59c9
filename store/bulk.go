package store

import (
	"context"
	"fmt"
)

// BulkAppend is one Append of a bulk write: a batch of one run under an
// epoch.
type BulkAppend struct {
	Epoch Epoch
	Batch []Append
}

// BulkSeal is one Seal of a bulk write.
type BulkSeal struct {
	Run     RunID
	Epoch   Epoch
	Outcome string
}

// BulkWriter is implemented by a backend that can commit many appends, or
// many seals, in one transaction: a restore writes a million runs for the
// price of a few thousand commits instead of two million. Each member gets
// exactly the checks of Append or Seal (the fence, the seal freeze, the
// chain, exactly-once, admission keys; for a seal the run's latest
// conclusion); the first refusal fails the whole call, which then writes
// nothing. A call names each run at most once (else InvalidArgumentError).
type BulkWriter interface {
	// AppendBulk appends each member as Append would, in order, in one
	// transaction, and returns each member's records.
	AppendBulk(ctx context.Context, appends []BulkAppend) ([][]Record, error)
	// SealBulk seals each run as Seal would, in order, in one transaction:
	// the runs newly sealed take consecutive log indexes in the order
	// given. It returns each run's leaf.
	SealBulk(ctx context.Context, seals []BulkSeal) ([]Digest, error)
}

// CheckBulk refuses an empty bulk write, or one naming a run twice.
func CheckBulk(n int, run func(i int) RunID) error {
	if n == 0 {
		return &InvalidArgumentError{Field: "bulk", Detail: "empty"}
	}
	seen := make(map[RunID]struct{}, n)
	for i := range n {
		r := run(i)
		if _, dup := seen[r]; dup {
			return &InvalidArgumentError{Field: "bulk", Detail: "run " + r.String() + " is named twice; a bulk write names each run at most once"}
		}
		seen[r] = struct{}{}
	}
	return nil
}

// CheckSeal refuses what Seal refuses before reading the store: an invalid
// epoch or outcome, or an outcome that does not seal.
func CheckSeal(epoch Epoch, outcome string) error {
	if err := ValidateEpoch(epoch); err != nil {
		return err
	}
	if err := ValidateOutcome(outcome); err != nil {
		return err
	}
	if !IsSealingOutcome(outcome) {
		return &InvalidArgumentError{Field: "outcome", Detail: fmt.Sprintf("%q does not seal; only %v do, and a failed or exhausted run stays open for resume", outcome, SealingOutcomes)}
	}
	return nil
}

// BulkReader is implemented by a backend that can read many runs in one
// query: an export of a million runs in a few thousand queries instead of
// three million.
type BulkReader interface {
	// ReadRuns returns, from one read snapshot, the head of each run asked
	// (in the order asked; the genesis head for a run with no records) and
	// the runs' records from seq 1, in the order of runs then of seqs, at
	// most limit records in all: a run whose records were cut by the limit
	// has fewer than its head's seq, and the runs after it none. runs must
	// be in ascending id order. Records are not decoded as ReadPage decodes
	// them: Raw, PrevHash and Hash are as stored, Run and Seq those of the
	// row, Kind and Case the store's own columns, and only a RunConcluded
	// record's body is decoded (and checked against its hash), for its
	// outcome. The caller checks the chain over the exact bytes (Export
	// does; Restore checks every record in full).
	ReadRuns(ctx context.Context, runs []RunID, limit int) ([]Head, []Record, error)
}
