package disclosure

import (
	"errors"
	"fmt"

	"github.com/runseal/runseal/store"
)

// SelectionError refuses a selection that cannot be disclosed: empty, over
// the bounds, or naming a run or case the journal does not have.
type SelectionError struct {
	Detail string
}

func (e *SelectionError) Error() string { return "disclosure selection: " + e.Detail }

// CheckpointMismatchError refuses a signed checkpoint that is not a state
// of this journal's log: another origin, a size the log has not reached, or
// a root the log does not have at that size. Proofs served by the journal
// would not verify against it.
type CheckpointMismatchError struct {
	Detail string
}

func (e *CheckpointMismatchError) Error() string {
	return "signed checkpoint does not match the journal's log: " + e.Detail
}

// UnplacedRunError refuses a package in which a run would look stripped of
// its leaf: its latest conclusion seals, but it has no leaf below the
// checkpoint's size, because it was sealed after that checkpoint or is not
// sealed yet. Seal it if need be, then write the package against a newer
// witnessed checkpoint. What was written before the error is not a package.
type UnplacedRunError struct {
	Run     store.RunID
	Outcome string
	Index   *uint64 // the run's leaf index, if it is sealed (at or beyond the checkpoint size)
	Size    uint64  // the checkpoint size
}

func (e *UnplacedRunError) Error() string {
	if e.Index != nil {
		return fmt.Sprintf("run %s is leaf %d, not below the checkpoint size %d: write the package against a newer checkpoint", e.Run, *e.Index, e.Size)
	}
	return fmt.Sprintf("run %s concluded %q but is not sealed: seal it, then write the package against a checkpoint that includes it", e.Run, e.Outcome)
}

// ErrSigning is matched by a *SigningError.
var ErrSigning = errors.New("disclosure statement cannot be signed")

// SigningError refuses to write a package whose statement cannot be signed
// as spec/disclosure.md requires: no disclosure key, or the log's own
// checkpoint key offered as the disclosure key.
type SigningError struct {
	Detail string
}

func (e *SigningError) Error() string { return "disclosure statement: " + e.Detail }

// Unwrap returns ErrSigning.
func (e *SigningError) Unwrap() error { return ErrSigning }

// ErrNotAnExport is matched by the error Restore returns for a file that is
// a disclosure package: packages carry a selection, never a whole journal,
// and are never restored.
var ErrNotAnExport = errors.New("not a whole export")

// FormatError reports a file that does not follow the format: a malformed
// line, a line out of place, counts that disagree, a record whose bytes do
// not hash to its claimed hash. Line is 1-based; 0 means the whole file.
type FormatError struct {
	Line   int64
	Detail string
}

func (e *FormatError) Error() string {
	if e.Line == 0 {
		return "malformed file: " + e.Detail
	}
	return fmt.Sprintf("malformed file: line %d: %s", e.Line, e.Detail)
}

// UnknownFormatError reports a file of a kind or version this build does not
// read. It is not evidence of damage: a newer writer may have made it.
type UnknownFormatError struct {
	Kind    string
	Version uint64
}

func (e *UnknownFormatError) Error() string {
	return fmt.Sprintf("file of kind %q version %d is not a format this build reads (%s or %s, version %d)", e.Kind, e.Version, KindPackage, KindExport, Version)
}

// CutError reports a file that ends before its trailer: it was cut short,
// in transfer or on disk, and what it lacks is unknown.
type CutError struct {
	Line int64 // the last complete line
}

func (e *CutError) Error() string {
	return fmt.Sprintf("file is cut: it ends after line %d without its trailer", e.Line)
}

// RestoreRefusedError reports why Restore wrote nothing. Err, when set, is
// the validation error behind the refusal (a *FormatError, *CutError,
// *UnknownFormatError, or one matching ErrNotAnExport).
type RestoreRefusedError struct {
	Reason string
	Err    error
}

func (e *RestoreRefusedError) Error() string { return "restore refused, nothing written: " + e.Reason }

// Unwrap returns the validation error behind the refusal, if any.
func (e *RestoreRefusedError) Unwrap() error { return e.Err }

// UnfaithfulRestoreError reports a restore that replayed every record but
// whose rebuilt log differs from the export's checkpoint.
type UnfaithfulRestoreError struct {
	Expected, Rebuilt store.Checkpoint
}

func (e *UnfaithfulRestoreError) Error() string {
	return fmt.Sprintf("restore is not faithful: the export's log is %d leaves with root %s, the rebuilt log %d leaves with root %s",
		e.Expected.Size, e.Expected.Root, e.Rebuilt.Size, e.Rebuilt.Root)
}

// UndeliveredError reports an act of disclosure that was recorded in the
// register but whose package could not be moved into place. The register
// errs on the side of saying more was disclosed than was.
type UndeliveredError struct {
	Act store.Disclosure
	Err error
}

func (e *UndeliveredError) Error() string {
	return fmt.Sprintf("disclosure %s recorded but not delivered: %v", e.Act.ID, e.Err)
}

// Unwrap returns why the package could not be moved into place.
func (e *UndeliveredError) Unwrap() error { return e.Err }
