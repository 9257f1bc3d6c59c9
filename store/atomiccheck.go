package store

import (
	"context"
	"fmt"
)

// CheckAtomic refuses an AppendAtomic call that no backend runs: a missing
// run, an epoch ValidateEpoch refuses, or no work. Backends call it before
// they touch their transaction.
func CheckAtomic(run RunID, epoch Epoch, work func(ctx context.Context, tx AtomicTx) ([]Append, error)) error {
	if run.IsZero() {
		return &InvalidArgumentError{Field: "run", Detail: "is missing"}
	}
	if err := ValidateEpoch(epoch); err != nil {
		return err
	}
	if work == nil {
		return &InvalidArgumentError{Field: "work", Detail: "is nil"}
	}
	return nil
}

// CheckAtomicBatch refuses what an AppendAtomic's work returned unless it
// is at least one record, every one of run: the transaction locked run and
// checked its fence only.
func CheckAtomicBatch(run RunID, batch []Append) error {
	if len(batch) == 0 {
		return &InvalidArgumentError{Field: "batch", Detail: "work returned no records; an atomic append writes at least one"}
	}
	for i, a := range batch {
		if a.Run != run {
			return &InvalidArgumentError{Field: fmt.Sprintf("batch[%d].run", i), Detail: fmt.Sprintf("work returned a record of run %s inside the transaction of run %s", a.Run, run)}
		}
	}
	return nil
}
