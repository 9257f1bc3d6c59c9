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
// the store would refuse is refused before anything is written.
func precheck(op string, head store.Head, epoch store.Epoch, batch []store.Append, slack int) error {
	ps, err := store.BuildBatch(head, epoch, batch)
	var tl *store.RecordTooLargeError
	switch {
	case errors.As(err, &tl):
		return lifecycle.NewError(lifecycle.KindResourceLimit, op, "the transition's journal record would be %d bytes, over the %d-byte limit", tl.Bytes, tl.Limit)
	case err != nil:
		return lifecycle.NewError(lifecycle.KindInvalid, op, "the transition cannot be recorded: %v", err)
	}
	for _, p := range ps {
		if len(p.Raw) > store.MaxRecordBytes-slack {
			return lifecycle.NewError(lifecycle.KindResourceLimit, op, "the transition's journal record would be %d bytes, leaving less than %d of the %d-byte limit", len(p.Raw), slack, store.MaxRecordBytes)
		}
	}
	return nil
}

// transition commits one study run record (the authority of a transition)
// and completes what it calls for. fields is the kind's fields.
func (s *Storage) transition(ctx context.Context, op string, st *jstudy, kind string, fields any) error {
	v := st.v
	raw, err := encodeFields(fields)
	if err != nil {
		return lifecycle.StorageError(op, err)
	}
	a := store.Append{Run: v.run, Case: v.caseID, Kind: kind, Fields: raw}
	if err := precheck(op, v.head, v.epoch, []store.Append{a}, mirrorSlack); err != nil {
		return err
	}
	recs, err := s.appendAt(ctx, v.run, v.head, v.epoch, []store.Append{a})
	if err == nil && len(recs) != 1 {
		err = fmt.Errorf("append of one record returned %d", len(recs))
	}
	if err == nil {
		err = v.applyStudy(recs[0])
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
	if err := precheck(op, t.head, epoch, batch, 0); err != nil {
		return err
	}
	return s.appendTrial(ctx, op, st, t, epoch, batch)
}

func (s *Storage) appendTrial(ctx context.Context, op string, st *jstudy, t *jtrial, epoch store.Epoch, batch []store.Append) error {
	recs, err := s.appendAt(ctx, t.run, t.head, epoch, batch)
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
