// Package acked keeps what a journal acknowledged, records by hash and
// seals by leaf, and checks afterwards that all of it is still there: the
// check of every crash and fault test (cmd/journal's SIGKILL tests, the
// fault campaign). An acknowledgement is a promise that the write is
// durable, so nothing acknowledged may be missing or different after a
// crash, a restart or a full disk.
package acked

import (
	"context"
	"fmt"
	"sync"

	"github.com/runseal/runseal/store"
)

// Set is what a journal acknowledged. It is safe for concurrent use.
type Set struct {
	mu      sync.Mutex
	records map[store.RunID]map[store.Seq]store.Digest
	seals   map[store.RunID]store.Digest
	n       int
}

// New returns an empty Set.
func New() *Set {
	return &Set{records: map[store.RunID]map[store.Seq]store.Digest{}, seals: map[store.RunID]store.Digest{}}
}

// Record notes an acknowledged record.
func (a *Set) Record(run store.RunID, seq store.Seq, hash store.Digest) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.records[run] == nil {
		a.records[run] = map[store.Seq]store.Digest{}
	}
	a.records[run][seq] = hash
	a.n++
}

// Seal notes an acknowledged seal.
func (a *Set) Seal(run store.RunID, leaf store.Digest) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seals[run] = leaf
}

// Counts returns how many records and seals were acknowledged.
func (a *Set) Counts() (records, seals int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n, len(a.seals)
}

// Reader is what Check reads of a journal.
type Reader interface {
	Head(ctx context.Context, run store.RunID) (store.Head, error)
	ReadPage(ctx context.Context, run store.RunID, from store.Seq, limit int) ([]store.Record, error)
	LogPositions(ctx context.Context, runs []store.RunID) ([]*store.Position, error)
}

// Check returns an error naming the first acknowledged record that is
// missing or stored with another hash, or the first acknowledged seal
// missing from the log or with another leaf; nil when all are there.
func (a *Set) Check(ctx context.Context, s Reader) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for run, seqs := range a.records {
		var maxSeq store.Seq
		for seq := range seqs {
			maxSeq = max(maxSeq, seq)
		}
		h, err := s.Head(ctx, run)
		if err != nil {
			return fmt.Errorf("run %s: %w", run, err)
		}
		if h.Seq < maxSeq {
			return fmt.Errorf("run %s: acknowledged seq %d lost: head is seq %d", run, maxSeq, h.Seq)
		}
		found := 0
		for from := store.Seq(1); from <= maxSeq; {
			page, err := s.ReadPage(ctx, run, from, store.MaxLimit)
			if err != nil {
				return fmt.Errorf("run %s: %w", run, err)
			}
			if len(page) == 0 {
				break
			}
			for _, r := range page {
				if want, ok := seqs[r.Seq]; ok {
					if want != r.Hash {
						return fmt.Errorf("run %s seq %d: acknowledged hash %s, stored %s", run, r.Seq, want, r.Hash)
					}
					found++
				}
			}
			from += store.Seq(len(page))
		}
		if found != len(seqs) {
			return fmt.Errorf("run %s: %d of %d acknowledged records found", run, found, len(seqs))
		}
	}
	runs := make([]store.RunID, 0, len(a.seals))
	for run := range a.seals {
		runs = append(runs, run)
	}
	pos, err := s.LogPositions(ctx, runs)
	if err != nil {
		return err
	}
	for i, p := range pos {
		if p == nil || p.Leaf != a.seals[runs[i]] {
			return fmt.Errorf("run %s: acknowledged seal lost or changed: %+v", runs[i], p)
		}
	}
	return nil
}
