// Package journalstore carries the trial lifecycle contract (package
// lifecycle) on a journal store (package store): a study is a case, a trial
// is a run, a trial's owner epoch is its run's lease epoch, each
// transition is a journal record appended under the fence, the outbox and
// the finalization claim are state derived from records, and a trial's
// terminal outcome seals its run, so a study is exported, disclosed and
// verified like any other runs. spec/lifecycle.md section 14 describes the
// records and the protocol; this package is what the spec calls
// JournalStorage.
//
// A per-study "study run" holds the records that commit every transition
// touching two runs; the trial run mirrors each, and a view rebuilt after a
// crash completes what a commit began. [ReadStudyView] shows a study from a
// journal without writing.
//
// # Invariants
//
//   - On a store one process writes (SQLite), one [Storage] at a time
//     serves a journal tenant. It holds an OS lock beside the journal's
//     file until Close; a second, in this process or another, is refused
//     with [ErrLocked] before it reads or writes.
//   - On a shared store (PostgreSQL), any number of Storages in any
//     processes serve one tenant: every operation on a study holds the
//     study's advisory lock (LockKey), first folds what others appended
//     since its view (only the records after the view's heads), and every
//     append commits through Atomic() only if its run's head, read inside
//     the transaction under the run's row lock, is the head the view
//     folded ([ErrMoved] otherwise). spec/lifecycle.md 14.2.
//   - Every operation on a study runs under the study's lock, validates
//     against the study's view (package lifecycle/internal/model holds the
//     rules), and only then appends; the view is updated by folding exactly
//     the records appended, with the function a rebuild uses.
//   - Every study run record commits in one transaction (AppendAtomic)
//     with the derived listing rows it changes, so a study's rows are at
//     its study run's head whatever fails; the outbox listings are read a
//     page at a time from them, never from a view of the whole study. The
//     rows are never evidence: rows behind the journal are rebuilt from the
//     fold (spec/lifecycle.md 14.9).
//   - A failure after a write began discards the view; the study's next
//     operation rebuilds it from the journal and completes what the
//     records call for first.
//   - The fold is strict: a history that is not a sequence of allowed
//     transitions is refused ([ErrInconsistent], naming the first record
//     that does not fold), never guessed at. [Storage.Repair] voids a
//     trial run's foreign records by a study run record an operator signs
//     with a reason; nothing is ever removed from the journal.
//
// # Files
//
// storage.go holds the type, its lock and the study loading; trials.go the
// trial operations; finalization.go and outbox.go the extensions; write.go
// how a transition is appended; recover.go the rebuild and roll-forward;
// view.go, foldstudy.go and foldtrial.go the fold; records.go the record
// formats; listing.go the derived listing rows the outbox pages are read
// from; show.go and list.go the operator's views; lock*.go the
// one-writer lock; shared.go the shared-store protocol; repair.go the
// operator's repair.
package journalstore
