package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// The writer remembers, for the runs it appended to last, what a batch of
// appends reads of them: each run's head, its lease epoch, and the activity
// second and wait its row holds. The remembered runs of a batch of appends
// skip the read of their rows and leases (loadBatchRuns), the largest
// statement of a group after the inserts; a bulk append (restore) neither
// reads nor fills the memory.
//
// The memory is never trusted, as PostgreSQL's is not (store/postgres,
// known.go): the statement that moves a remembered run's head moves it only
// if the row still holds the remembered head, is unsealed, its lease
// (or the absence of one) is still the remembered epoch, and the log holds
// no leaf of the remembered head, and the batch fails unless every
// remembered run moved. Another process's append or seal, a seal whose
// columns were then edited away (unsealed.go), a lease taken anew (renewing or releasing one keeps its epoch,
// which is all the fence compares), a write of this process by another
// path, or a group rolled back after the memory was updated (a failed
// commit leaves it ahead of the file), all fail that check; the group then
// rolls back whole and its appends run again one by one, reading their
// runs (groupcommit's fallback), and the memory is dropped. Nothing else
// guards a run's seqs in the group's writes (the records have no unique
// key on them), hence every remembered run must move, not some. An append that
// the remembered state would refuse (fenced, sealed, a restored record at
// another seq) is decided again on the stored state before anything is
// written, so the memory never refuses an append the store would take.

// maxKnownRuns bounds the memory: when it is full it is dropped whole, and
// the runs written after refill it.
const maxKnownRuns = 4096

// knownRun is what the writer remembers of a run after appending to it.
type knownRun struct {
	head     store.Head
	leased   bool
	epoch    store.Epoch
	activeAt int64
	waiting  bool
}

// errKnownStale fails a batch whose remembered runs moved, or were sealed
// or leased anew, since the writer last wrote them.
var errKnownStale = errors.New("a remembered run changed since this writer last wrote it")

func knownKey(tenant, run string) string { return tenant + "\x00" + run }

// recall returns the remembered state of run as a batch's starting state,
// or false. Only the writer calls it, inside a group.
func (s *Store) recall(run store.RunID, runText string) (batchRun, bool) {
	k, ok := s.known[knownKey(s.tenant, runText)]
	if !ok {
		return batchRun{}, false
	}
	return batchRun{
		run: run, runText: runText,
		st:       runState{exists: true, head: k.head},
		leased:   k.leased,
		epoch:    k.epoch,
		activeAt: sql.NullInt64{Int64: k.activeAt, Valid: true},
		waiting:  k.waiting,
		known:    true,
		was:      k.head,
	}, true
}

// remember records the runs a batch wrote, as it left them.
func (s *Store) remember(touched []*batchRun, activeAt int64) {
	if len(touched) > maxKnownRuns {
		s.forget()
		return
	}
	if s.known == nil || len(s.known)+len(touched) > maxKnownRuns {
		s.known = make(map[string]knownRun, len(touched))
	}
	for _, br := range touched {
		s.known[knownKey(s.tenant, br.runText)] = knownRun{
			head: br.st.head, leased: br.leased, epoch: br.epoch,
			activeAt: activeAt, waiting: br.wait != nil,
		}
	}
}

// forget drops the whole memory: after a failed batch, whatever it said.
func (s *Store) forget() { s.known = nil }

// moveKnownHeads moves the heads of the remembered runs among touched, each
// only if its row still holds the remembered head, unsealed, under the
// remembered lease, and the log holds no leaf of that head. It fails with errKnownStale unless every one moved.
func (s *Store) moveKnownHeads(ctx context.Context, tx *sql.Tx, touched []*batchRun) error {
	var rows []any
	tenant := any(s.tenant)
	for _, br := range touched {
		if !br.known {
			continue
		}
		var epoch any // no lease row: the row must still have none
		if br.leased {
			epoch = int64(br.epoch)
		}
		leaf := log.LeafHash(log.Hash(br.was.Hash))
		rows = append(rows, tenant, br.runText, int64(br.st.head.Seq), br.st.head.Hash[:], int64(br.was.Seq), br.was.Hash[:], epoch, leaf[:])
	}
	if len(rows) == 0 {
		return nil
	}
	var moved int64
	if _, err := s.execRowsCounted(ctx, tx, qMoveKnownHead, qMoveKnownHeads, 8, rows, &moved); err != nil {
		return fmt.Errorf("update the heads of %d runs: %w", len(rows)/8, err)
	}
	if want := int64(len(rows) / 8); moved != want {
		return fmt.Errorf("%w (%d of %d moved)", errKnownStale, moved, want)
	}
	return nil
}
