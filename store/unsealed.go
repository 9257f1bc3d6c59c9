package store

import (
	"cmp"
	"fmt"
	"slices"
)

// A run's seal lives in two places: the columns of its run row (outcome,
// time, log index, leaf) and the leaf its head hash became in the Merkle
// log. An edit of the journal that sets the seal columns back to NULL
// (spec/records.md, "What each check catches") leaves the run looking
// open to everything that reads only its row, while the log, which the
// published checkpoints commit to, still holds its leaf. A record's chain
// hash binds its run (the run id is in the hashed bytes), so a leaf value
// equal to one of a run's record hashes means the run was sealed at that
// record. Backends find such leaves by the leaf hash (log.LeafHash of the
// record hash) in an index of the log's level-0 nodes, and refuse to
// append to, re-seal or verify a run whose head or records the log holds
// while its row says it is open.

// LeafAt says that the log holds record Seq of a run as leaf Index: the
// record's chain hash is that leaf's value.
type LeafAt struct {
	Seq   Seq
	Index uint64
}

// LoggedUnsealed is the refusal of a run whose record seq the log holds
// as leaf index while its row says it is not sealed: the journal was
// edited. It is corruption, not ErrRunSealed: a caller that takes "sealed"
// as a normal answer would carry on over a tampered file, and the
// operator must check the whole journal and restore it.
func LoggedUnsealed(run RunID, seq Seq, index uint64) *CorruptError {
	return &CorruptError{Run: run, Seq: seq, Detail: fmt.Sprintf(
		"the log holds this record as leaf %d, but the run's row says it is not sealed: the seal was removed by editing the journal; "+
			"nothing was written; run `journal verify --all` and restore the journal from a backup", index)}
}

// CheckRunLeaves is Verify's check of a run against the log: found is
// every (seq, index) where the log holds one of the run's records (up to
// head) as a leaf. An open run (sealed false) must have none; a sealed run
// exactly one, its head at its seal's log index (index; nil when the row
// has none).
func CheckRunLeaves(run RunID, head Head, sealed bool, index *int64, found []LeafAt) error {
	found = slices.Clone(found)
	slices.SortFunc(found, func(a, b LeafAt) int {
		return cmp.Or(cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.Index, b.Index))
	})
	if !sealed {
		if len(found) > 0 {
			return LoggedUnsealed(run, found[0].Seq, found[0].Index)
		}
		return nil
	}
	if index == nil || *index < 0 {
		return &CorruptError{Run: run, Detail: "sealed run has no valid log index"}
	}
	headFound := false
	for _, f := range found {
		switch {
		case f.Seq != head.Seq:
			return &CorruptError{Run: run, Seq: f.Seq, Detail: fmt.Sprintf("the log holds this record as leaf %d, but the run is sealed at seq %d: the run was sealed twice, its first seal removed by editing the journal", f.Index, head.Seq)}
		case f.Index != uint64(*index):
			return &CorruptError{Run: run, Seq: f.Seq, Detail: fmt.Sprintf("the log holds the run's sealed leaf as leaf %d, but its seal names log index %d", f.Index, *index)}
		}
		headFound = true
	}
	if !headFound {
		return &CorruptError{Run: run, Seq: head.Seq, Detail: fmt.Sprintf("the run is sealed at log index %d, but no leaf of the log holds its sealed leaf", *index)}
	}
	return nil
}
