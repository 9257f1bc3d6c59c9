package journalstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/internal/model"
	"github.com/runseal/runseal/store"
)

// The listings (ListOutboxPage, ListOutbox) are read a page at a time from
// derived rows the store keeps beside the journal (store/sqlite and
// store/postgres, derived.go), not from a view of the whole study:
//
//   - scope "lifecycle/study/<study>", pos 0: the study's summary
//     (studyRow), at the study run's seq it reflects;
//   - scope "lifecycle/outbox/<study>", pos TerminalSeq: the outbox record
//     as lifecycle.OutboxRecord JSON, at the study run's seq of its last
//     change.
//
// Every study run record is folded before it is written, and the rows it
// changes are written in the record's own transaction (AppendAtomic), so
// the rows never lag or lead the journal by a record. The rows are never
// evidence: a study whose rows are behind its study run (a journal written
// by an older runseal, or by one without derived rows) has them rebuilt
// from the fold, under the study's lock, before a page is read; the
// journal stays the authority (spec/lifecycle.md 14.9).

// rowStore is a store's derived rows: store/sqlite.Store and
// store/postgres.Store have it, found through wrappers' Unwrap or Inner.
type rowStore interface {
	PutDerived(ctx context.Context, tx store.AtomicTx, scope string, pos, at int64, body []byte) error
	ReadDerived(ctx context.Context, scope string, after, upto int64, limit int, each func(pos, at int64, body []byte) error) error
	WriteDerived(ctx context.Context, fn func(ctx context.Context, tx store.AtomicTx) error) error
}

// findRows returns j's derived rows, or nil when j (and what it wraps) has
// none.
func findRows(j Journal) rowStore {
	for x := j; x != nil; x = inner(x) {
		if r, ok := x.(rowStore); ok {
			return r
		}
	}
	return nil
}

// listingFormat is the version of the rows' bodies. A row of another
// format is rebuilt, as a row that is behind is.
const listingFormat = 1

// studyRow is a study's summary row.
type studyRow struct {
	Format int `json:"format"`
	// Trials counts the study's trial records (its trial numbers used).
	Trials uint64 `json:"trials"`
	// Outbox counts the outbox records: the highest TerminalSeq.
	Outbox uint64 `json:"outbox"`
	// OutboxOpen counts the outbox records not done.
	OutboxOpen uint64 `json:"outbox_open"`
	// Finalizer is the holder of the finalization claim, if held.
	Finalizer string `json:"finalizer,omitempty"`
}

func studyScope(id lifecycle.StudyID) string  { return "lifecycle/study/" + string(id) }
func outboxScope(id lifecycle.StudyID) string { return "lifecycle/outbox/" + string(id) }

// derivedRow is one row a write puts, at the study run's seq after it.
type derivedRow struct {
	scope string
	pos   int64
	body  []byte
}

// summaryRow is the view's summary row.
func (v *jview) summaryRow() (derivedRow, error) {
	r := studyRow{Format: listingFormat, Trials: v.Study.Trials, Outbox: uint64(len(v.Outbox)), OutboxOpen: uint64(v.outboxOpen)}
	if v.Fin.Held {
		r.Finalizer = v.Fin.Holder
	}
	b, err := json.Marshal(r)
	if err != nil {
		return derivedRow{}, err
	}
	return derivedRow{scope: studyScope(v.ID), pos: 0, body: b}, nil
}

// outboxRow is the row of the view's outbox record key.
func (v *jview) outboxRow(key lifecycle.OutboxKey) (derivedRow, error) {
	rec := v.records[key]
	if rec == nil {
		return derivedRow{}, fmt.Errorf("outbox record %v is not in the view", key)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return derivedRow{}, err
	}
	return derivedRow{scope: outboxScope(v.ID), pos: int64(rec.TerminalSeq), body: b}, nil
}

// changedRows are the rows a study run record with fields changes, read
// from the view after the record is folded: the summary and the outbox
// record it creates or moves, if any.
func (v *jview) changedRows(fields any) ([]derivedRow, error) {
	sum, err := v.summaryRow()
	if err != nil {
		return nil, err
	}
	rows := []derivedRow{sum}
	var key *lifecycle.OutboxKey
	switch f := fields.(type) {
	case fStudyTerminal:
		if f.Intent != nil {
			key = &lifecycle.OutboxKey{Trial: f.Trial, Epoch: f.OwnerEpoch}
		}
	case fOutboxAdvanced:
		key = &lifecycle.OutboxKey{Trial: f.Trial, Epoch: f.OwnerEpoch}
	case fEffectCompleted:
		key = &lifecycle.OutboxKey{Trial: f.Trial, Epoch: f.OwnerEpoch}
	case fReplacementCreated:
		key = &lifecycle.OutboxKey{Trial: f.Trial, Epoch: f.OwnerEpoch}
	}
	if key != nil {
		r, err := v.outboxRow(*key)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// allRows are every row of the view: what a rebuild writes.
func (v *jview) allRows() ([]derivedRow, error) {
	sum, err := v.summaryRow()
	if err != nil {
		return nil, err
	}
	rows := []derivedRow{sum}
	for _, key := range v.Outbox {
		r, err := v.outboxRow(key)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// putRows writes rows in tx at the study run's seq at.
func putRows(ctx context.Context, rs rowStore, tx store.AtomicTx, at store.Seq, rows []derivedRow) error {
	for _, r := range rows {
		if err := rs.PutDerived(ctx, tx, r.scope, r.pos, int64(at), r.body); err != nil {
			return err
		}
	}
	return nil
}

// readStudyRow reads a study's summary row: ok is false when there is
// none or it is of another format.
func readStudyRow(ctx context.Context, rs rowStore, id lifecycle.StudyID) (row studyRow, at store.Seq, ok bool, err error) {
	err = rs.ReadDerived(ctx, studyScope(id), -1, 0, 1, func(_, a int64, body []byte) error {
		if json.Unmarshal(body, &row) == nil && row.Format == listingFormat {
			at, ok = store.Seq(a), true
		}
		return nil
	})
	return row, at, ok, err
}

// syncRows makes the study's rows reflect its view, which is current
// under the study's lock, unless st.listed says they do: if the summary
// row is behind the view's study run head (an older journal, or a writer
// without derived rows), every row is written again from the view, in one
// transaction that first checks the study run is still at the view's
// head.
func (s *Storage) syncRows(ctx context.Context, st *jstudy) error {
	v := st.v
	if s.rows == nil || st.listed == v.head.Seq {
		return nil
	}
	_, at, ok, err := readStudyRow(ctx, s.rows, st.id)
	if err != nil {
		return err
	}
	if ok && at >= v.head.Seq {
		st.listed = v.head.Seq
		return nil
	}
	rows, err := v.allRows()
	if err != nil {
		return err
	}
	err = s.rows.WriteDerived(context.WithoutCancel(ctx), func(ctx context.Context, tx store.AtomicTx) error {
		if hc, ok := tx.(headChecker); ok {
			h, err := hc.Head(ctx, v.run)
			if err != nil {
				return err
			}
			if h != v.head {
				return &MovedError{Run: v.run, Folded: v.head, Actual: h}
			}
		}
		return putRows(ctx, s.rows, tx, v.head.Seq, rows)
	})
	if err != nil {
		return err
	}
	st.listed = v.head.Seq
	return nil
}

// currentRow returns a study's summary row once it reflects the study
// run's head: read directly when it does (the head first, so a write
// landing between the two reads leaves the row ahead, never behind), and
// otherwise after the study is opened, which rebuilds its rows.
func (s *Storage) currentRow(ctx context.Context, op string, id lifecycle.StudyID) (studyRow, error) {
	c, err := store.ParseCaseID(string(id))
	if err != nil || c.IsZero() || c.String() != string(id) {
		return studyRow{}, lifecycle.NewError(lifecycle.KindNotFound, op, "study %q", id)
	}
	h, err := s.j.Head(ctx, studyRunID(c))
	if err != nil {
		return studyRow{}, journalError(op, err)
	}
	if h.Seq == 0 {
		return studyRow{}, lifecycle.NewError(lifecycle.KindNotFound, op, "study %q", id)
	}
	row, at, ok, err := readStudyRow(ctx, s.rows, id)
	if err != nil {
		return studyRow{}, journalError(op, err)
	}
	if ok && at >= h.Seq {
		return row, nil
	}
	st, err := s.openStudy(ctx, op, id)
	if err != nil {
		return studyRow{}, err
	}
	defer st.unlock()
	st.listed = 0 // check again: another writer may have left them behind
	if err := s.syncRows(ctx, st); err != nil {
		return studyRow{}, journalError(op, err)
	}
	row, _, ok, err = readStudyRow(ctx, s.rows, id)
	if err == nil && !ok {
		err = errors.New("the study's summary row is missing after its rebuild")
	}
	if err != nil {
		return studyRow{}, journalError(op, err)
	}
	return row, nil
}

// errPageFull stops a page's row scan.
var errPageFull = errors.New("page full")

// outboxPage reads one page of a study's outbox rows: the records after
// position start up to horizon, within the request's limits (the rules of
// model.OutboxPage, which the view-backed listing uses).
func (s *Storage) outboxPage(ctx context.Context, op string, req lifecycle.OutboxPageRequest, horizon uint64) (lifecycle.OutboxPage, error) {
	start := uint64(0)
	if c := req.Cursor; c != nil {
		switch {
		case c.Study != req.Study:
			return lifecycle.OutboxPage{}, lifecycle.NewError(lifecycle.KindConflict, op, "cursor belongs to study %q", c.Study)
		case c.Horizon > horizon:
			return lifecycle.OutboxPage{}, lifecycle.NewError(lifecycle.KindConflict, op, "cursor horizon %d is beyond the study's %d records", c.Horizon, horizon)
		case c.AfterSeq == 0 || c.AfterSeq > c.Horizon:
			return lifecycle.OutboxPage{}, lifecycle.NewError(lifecycle.KindConflict, op, "cursor position %d is outside 1..%d", c.AfterSeq, c.Horizon)
		}
		horizon, start = c.Horizon, c.AfterSeq
	}
	scope := outboxScope(req.Study)
	page := lifecycle.OutboxPage{Records: []lifecycle.OutboxRecord{}}
	var used uint64
	i := start
	if req.Cursor != nil {
		// The cursor's record must be where it says: one row more.
		i--
	}
	checked := req.Cursor == nil
	for i < horizon && uint64(len(page.Records)) < req.MaxRecords {
		want := min(req.MaxRecords-uint64(len(page.Records)), uint64(store.MaxLimit-1)) + 1
		n := 0
		var stop error
		err := s.rows.ReadDerived(ctx, scope, int64(i), int64(horizon), int(want), func(pos, _ int64, body []byte) error {
			n++
			if uint64(pos) != i+1 {
				return fmt.Errorf("outbox row %d is missing (next row is %d)", i+1, pos)
			}
			var rec lifecycle.OutboxRecord
			if err := json.Unmarshal(body, &rec); err != nil || rec.TerminalSeq != uint64(pos) || rec.Study != req.Study {
				return fmt.Errorf("outbox row %d does not hold the study's record at terminal sequence %d", pos, pos)
			}
			if !checked {
				checked = true
				if rec.Key != req.Cursor.AfterKey {
					stop = lifecycle.NewError(lifecycle.KindConflict, op, "cursor names %v at position %d, which holds %v", req.Cursor.AfterKey, req.Cursor.AfterSeq, rec.Key)
					return errPageFull
				}
				i++
				return nil
			}
			if uint64(len(page.Records)) == req.MaxRecords {
				return errPageFull
			}
			size, err := lifecycle.RecordSize(rec)
			if err != nil {
				return err
			}
			if used+uint64(size) > req.MaxBytes {
				if len(page.Records) == 0 {
					stop = lifecycle.NewError(lifecycle.KindResourceLimit, op, "record %v is %d bytes, over max_bytes %d", rec.Key, size, req.MaxBytes)
				}
				return errPageFull
			}
			used += uint64(size)
			page.Records = append(page.Records, rec)
			i++
			return nil
		})
		if stop != nil {
			return lifecycle.OutboxPage{}, stop
		}
		if errors.Is(err, errPageFull) {
			break
		}
		if err != nil {
			return lifecycle.OutboxPage{}, journalError(op, err)
		}
		if n == 0 {
			return lifecycle.OutboxPage{}, journalError(op, fmt.Errorf("outbox row %d of study %s is missing", i+1, req.Study))
		}
	}
	if i < horizon {
		page.Next = &lifecycle.OutboxCursor{Study: req.Study, Horizon: horizon, AfterSeq: i, AfterKey: page.Records[len(page.Records)-1].Key}
	}
	return page, nil
}

// listOutboxRows lists every outbox record of the journal from the rows,
// study by study, in key order.
func (s *Storage) listOutboxRows(ctx context.Context, op string) ([]lifecycle.OutboxRecord, error) {
	ids, err := s.Studies(ctx)
	if err != nil {
		return nil, model.WithOp(op, err)
	}
	out := []lifecycle.OutboxRecord{}
	for _, id := range ids {
		row, err := s.currentRow(ctx, op, id)
		if lifecycle.KindOf(err) == lifecycle.KindNotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		if row.Outbox == 0 {
			continue
		}
		var cur *lifecycle.OutboxCursor
		for {
			page, err := s.outboxPage(ctx, op, lifecycle.OutboxPageRequest{Study: id, MaxRecords: store.MaxLimit, MaxBytes: 1 << 62, Cursor: cur}, row.Outbox)
			if err != nil {
				return nil, err
			}
			out = append(out, page.Records...)
			if cur = page.Next; cur == nil {
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b lifecycle.OutboxRecord) int { return a.Key.Compare(b.Key) })
	return out, nil
}
