package journalstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/store"
)

// maxEpoch is the widest epoch, used to size a record before the
// epoch it is written under is known.
const maxEpoch = store.Epoch(1 << 62)

// mirrorSlack is the room an authority record leaves for its mirror, which
// repeats a subset of its fields plus a reference to it (at most a few
// hundred bytes more): refusing an authority that leaves less keeps a
// committed transition from owing a mirror too large to write.
const mirrorSlack = 1024

// precheck builds batch on head exactly as the store will, so that a record
// the store would refuse is refused before anything is written. It returns
// the records as a store that writes what it is handed writes them.
func precheck(op string, head store.Head, epoch store.Epoch, batch []store.Append, slack int) ([]store.Prepared, error) {
	ps, err := store.BuildBatch(head, epoch, batch)
	var tl *store.RecordTooLargeError
	switch {
	case errors.As(err, &tl):
		return nil, lifecycle.NewError(lifecycle.KindResourceLimit, op, "the transition's journal record would be %d bytes, over the %d-byte limit", tl.Bytes, tl.Limit)
	case err != nil:
		return nil, lifecycle.NewError(lifecycle.KindInvalid, op, "the transition cannot be recorded: %v", err)
	}
	for _, p := range ps {
		if len(p.Raw) > store.MaxRecordBytes-slack {
			return nil, lifecycle.NewError(lifecycle.KindResourceLimit, op, "the transition's journal record would be %d bytes, leaving less than %d of the %d-byte limit", len(p.Raw), slack, store.MaxRecordBytes)
		}
	}
	return ps, nil
}

// transition commits one study run record (the authority of a transition)
// and completes what it calls for. fields is the kind's fields.
//
// The record is folded into the view before it is written, as the store
// will write it, so that the derived rows it changes (listing.go) are read
// from the view and written in the record's own transaction; once written,
// the view is rebased on the record the store returned (a sealing store
// writes other bytes, so another hash). Any failure discards the view.
func (s *Storage) transition(ctx context.Context, op string, st *jstudy, kind string, fields any) error {
	v := st.v
	raw, err := encodeFields(fields)
	if err != nil {
		return lifecycle.StorageError(op, err)
	}
	a := store.Append{Run: v.run, Case: v.caseID, Kind: kind, Fields: raw}
	ps, err := precheck(op, v.head, v.epoch, []store.Append{a}, mirrorSlack)
	if err != nil {
		return err
	}
	head, want := v.head, ps[0].Record
	err = v.applyStudy(want)
	var rows []derivedRow
	if err == nil && s.rows != nil {
		rows, err = v.changedRows(fields)
	}
	var recs []store.Record
	if err == nil {
		recs, err = s.appendAt(ctx, v.run, head, v.epoch, []store.Append{a}, rows)
	}
	if err == nil && len(recs) != 1 {
		err = fmt.Errorf("append of one record returned %d", len(recs))
	}
	if err == nil {
		err = v.rebase(want, recs[0])
	}
	if err == nil {
		st.listed = max(st.listed, v.head.Seq)
	}
	if err == nil {
		err = s.settle(ctx, v)
	}
	if err != nil {
		st.v = nil
		return journalError(op, err)
	}
	return nil
}

// trialWrite appends records to a trial run under epoch and folds them.
func (s *Storage) trialWrite(ctx context.Context, op string, st *jstudy, t *jtrial, epoch store.Epoch, batch []store.Append) error {
	if _, err := precheck(op, t.head, epoch, batch, 0); err != nil {
		return err
	}
	return s.appendTrial(ctx, op, st, t, epoch, batch)
}

func (s *Storage) appendTrial(ctx context.Context, op string, st *jstudy, t *jtrial, epoch store.Epoch, batch []store.Append) error {
	recs, err := s.appendAt(ctx, t.run, t.head, epoch, batch, nil)
	for i := 0; err == nil && i < len(recs); i++ {
		err = st.v.applyTrial(t, recs[i])
	}
	if err == nil && len(recs) != len(batch) {
		err = fmt.Errorf("append of %d records returned %d", len(batch), len(recs))
	}
	if err != nil {
		st.v = nil
		return journalError(op, err)
	}
	return nil
}

func (v *jview) trialAppend(t *jtrial, kind string, fields any) (store.Append, error) {
	raw, err := encodeFields(fields)
	if err != nil {
		return store.Append{}, err
	}
	return store.Append{Run: t.run, Case: v.caseID, Kind: kind, Fields: raw}, nil
}

// rebase makes the view, which folded want before it was written, hold
// got, the record the store wrote in its place: the same record, unless
// the store wrote other bytes (a sealing store), whose hash the view's
// head and the mirrors owed to it then take.
func (v *jview) rebase(want, got store.Record) error {
	if got.Run != want.Run || got.Seq != want.Seq || got.Kind != want.Kind || got.Epoch != want.Epoch || got.PrevHash != want.PrevHash {
		return corrupt(got, "the store wrote %s at seq %d epoch %d, not the %s at seq %d epoch %d the view folded", got.Kind, got.Seq, got.Epoch, want.Kind, want.Seq, want.Epoch)
	}
	if got.Hash == want.Hash {
		return nil
	}
	if v.head.Seq != want.Seq {
		return corrupt(got, "the view moved past the record before it was written")
	}
	v.head.Hash = got.Hash
	for _, a := range v.todo {
		if a.rec.Run == got.Run && a.rec.Seq == got.Seq {
			m, err := a.build(refOf(got))
			if err != nil {
				return err
			}
			a.rec, a.mirror = got, m
		}
	}
	return nil
}
