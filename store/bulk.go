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
	// Leaf, if not zero, is the leaf the caller expects: the seal is
	// refused (and the bulk with it) unless the run's head is Leaf. A
	// restore passes the export's leaf, so a run whose replayed records
	// differ from the ones the export's log commits to is never sealed.
	Leaf Digest
}

// CheckLeaf refuses a bulk seal whose run's leaf (its head, or the leaf
// it was sealed with) is not the one the seal expects.
func (b BulkSeal) CheckLeaf(leaf Digest) error {
	if b.Leaf != (Digest{}) && leaf != b.Leaf {
		return &InvalidArgumentError{Field: "leaf", Detail: fmt.Sprintf("run %s's leaf would be %s, the seal expects %s", b.Run, leaf, b.Leaf)}
	}
	return nil
}

// BulkWriter is implemented by a backend that can commit many appends, or
// many seals, in one transaction: a restore writes a million runs for the
// price of a few thousand commits instead of two million. Each member gets
// exactly the checks of Append or Seal (the fence, the seal freeze, the
// chain, exactly-once, admission keys; for a seal the run's latest
// conclusion, and the leaf it expects); the first refusal fails the whole call, which then writes
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

// BulkReader is implemented by a backend that can read a tenant's runs in
// id order a page at a time, with range scans: an export of a million runs
// in a few hundred queries instead of three million point reads.
type BulkReader interface {
	// ScanRuns fills page, from one read snapshot, with the tenant's
	// records after the cursor in (run, seq) order, at most limit of them
	// and no more once maxBytes of raw bytes are read (at least one record
	// when any follows), and the run rows of every run from the cursor's
	// run (or the first run, for the zero cursor) to the last record's
	// run; or to the last run when the page reaches the end of the
	// records, so that a run row without records is in some page. Records
	// are not decoded: Raw and Hash are as stored, and the caller checks
	// the chain over the exact bytes (Export does; Restore checks every
	// record in full). The page's memory is reused: what the caller held
	// from its previous contents is overwritten.
	ScanRuns(ctx context.Context, page *RunsPage, after RunCursor, limit, maxBytes int) error
}
