package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runseal/runseal/store"
)

// snapshot runs the queued reads in one REPEATABLE READ transaction, sent
// as one pipeline with its BEGIN and COMMIT, so they see one state of the
// database in one round trip. read consumes the results in order.
func (s *Store) snapshot(ctx context.Context, queue func(b *pgx.Batch), read func(br pgx.BatchResults) error) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer pc.Release() // a connection left mid-transaction is destroyed, not reused
	b := &pgx.Batch{}
	b.Queue("begin isolation level repeatable read read only")
	queue(b)
	b.Queue("commit")
	br := pc.Conn().SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return err
	}
	if err := read(br); err != nil {
		br.Close()
		return err
	}
	if _, err := br.Exec(); err != nil {
		br.Close()
		return err
	}
	return br.Close()
}

// Head implements store.Journal.
func (s *Store) Head(ctx context.Context, run store.RunID) (store.Head, error) {
	if err := s.check(ctx); err != nil {
		return store.Head{}, err
	}
	h, _, err := s.readHead(s.pool.QueryRow(ctx, s.q.head, s.tenant, run.String()), run)
	return h, s.readErr("read head of run "+run.String(), err)
}

func (s *Store) readHead(row pgx.Row, run store.RunID) (store.Head, bool, error) {
	var seq int64
	var hash []byte
	err := row.Scan(&seq, &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Head{}, false, nil
	}
	if err != nil {
		return store.Head{}, false, err
	}
	if len(hash) != 32 || seq < 1 {
		return store.Head{}, false, &store.CorruptError{Run: run, Detail: "run head row is malformed"}
	}
	return store.Head{Seq: store.Seq(seq), Hash: store.Digest(hash)}, true, nil
}

// Read implements store.Journal.
func (s *Store) Read(ctx context.Context, run store.RunID, from store.Seq) ([]store.Record, error) {
	return s.readRange(ctx, run, from, -1)
}

// ReadPage implements store.Journal.
func (s *Store) ReadPage(ctx context.Context, run store.RunID, from store.Seq, limit int) ([]store.Record, error) {
	if err := store.ValidateLimit(limit); err != nil {
		return nil, err
	}
	return s.readRange(ctx, run, from, limit)
}

// ReadStored implements store.Journal: the query sends no row that starts
// past the byte bound, so at most one record beyond the page is read.
func (s *Store) ReadStored(ctx context.Context, run store.RunID, from store.Seq, limit, maxBytes int) ([]store.Record, store.Seq, error) {
	page, err := store.NewStoredPage(from, limit, maxBytes)
	if err != nil {
		return nil, 0, err
	}
	err = s.scanRecords(ctx, run, from, limit, maxBytes, nil, nil, func(r store.Record) error {
		if !page.Add(r) {
			return errPageComplete
		}
		return nil
	})
	if err != nil && !errors.Is(err, errPageComplete) {
		return nil, 0, s.readErr("read run "+run.String(), err)
	}
	recs, next := page.Records()
	return recs, next, nil
}

// errPageComplete stops a scan whose page is complete.
var errPageComplete = errors.New("page complete")

func (s *Store) readRange(ctx context.Context, run store.RunID, from store.Seq, limit int) ([]store.Record, error) {
	if from == 0 {
		return nil, &store.InvalidArgumentError{Field: "from", Detail: "seqs start at 1"}
	}
	out := []store.Record{}
	err := s.scanRecords(ctx, run, from, limit, 0, nil, nil, func(r store.Record) error {
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, s.readErr("read run "+run.String(), err)
	}
	return out, nil
}

// scanRecords streams a run's records from seq from, at most limit of them
// (all when limit < 0), checking each against its hash and its
// predecessor's link as it goes, in one snapshot with the run's head. A row
// missing at the end is as much a gap as one missing in the middle. With
// maxBytes > 0 only the rows that start within maxBytes of stored bytes are
// read, and fn must stop the scan (with an error) at the first row that
// crosses it. headFn, if set, sees the run's row first. leaves, if set,
// receives, read in the same snapshot, every record of the run the log
// holds as a leaf.
func (s *Store) scanRecords(ctx context.Context, run store.RunID, from store.Seq, limit, maxBytes int, headFn func(verifyRow) error, leaves *[]store.LeafAt, fn func(store.Record) error) error {
	if from > math.MaxInt64 {
		return nil
	}
	var lim any // nil: LIMIT NULL, which is no limit
	if limit >= 0 {
		lim = int64(limit)
	}
	id := run.String()
	return s.snapshot(ctx, func(b *pgx.Batch) {
		b.Queue(s.q.verifyRun, s.tenant, id)
		if maxBytes > 0 {
			b.Queue(s.q.recordsWithin, s.tenant, id, int64(from), lim, int64(maxBytes))
		} else {
			b.Queue(s.q.records, s.tenant, id, int64(from), lim)
		}
		if leaves != nil {
			b.Queue(s.q.runLeaves, s.tenant, id)
		}
	}, func(br pgx.BatchResults) error {
		var v verifyRow
		var seq int64
		var hash []byte
		err := br.QueryRow().Scan(&seq, &hash, &v.outcome, &v.sealedOutcome, &v.leaf, &v.logIndex)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		case len(hash) != 32 || seq < 1:
			return &store.CorruptError{Run: run, Detail: "run head row is malformed"}
		default:
			v.exists = true
			v.head = store.Head{Seq: store.Seq(seq), Hash: store.Digest(hash)}
		}
		if headFn != nil {
			if err := headFn(v); err != nil {
				return err
			}
		}
		end := v.head.Seq
		if limit >= 0 && from+store.Seq(limit)-1 < end {
			end = from + store.Seq(limit) - 1
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		defer rows.Close()
		chain := store.NewChainCheck(run, from)
		for rows.Next() {
			var seq int64
			var ph, h, raw []byte
			if err := rows.Scan(&seq, &ph, &h, &raw); err != nil {
				return err
			}
			r, err := chain.Next(seq, ph, h, raw)
			if err != nil {
				return err
			}
			if err := fn(r); err != nil {
				return err
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()
		if expect := chain.Expect(); from <= end && expect-1 != end {
			return &store.CorruptError{Run: run, Seq: expect, Detail: fmt.Sprintf("records missing: the run's head is seq %d", v.head.Seq)}
		}
		if leaves != nil {
			return readRunLeaves(br, leaves)
		}
		return nil
	})
}

// verifyRow is a run's row as Verify needs it.
type verifyRow struct {
	exists        bool
	head          store.Head
	outcome       *string
	sealedOutcome *string
	leaf          []byte
	logIndex      *int64
}

// Verify implements store.Journal: it re-checks the whole chain from
// genesis, in constant memory, against the run's recorded head and, for a
// sealed run, against its leaf; and against the log, which must hold the
// head of a sealed run at its index and no record of an open one (a seal
// removed by editing the database, unsealed.go); all in one snapshot.
func (s *Store) Verify(ctx context.Context, run store.RunID) (store.Digest, error) {
	var row verifyRow
	v := store.NewChainVerifier(run)
	var concluded store.Conclusion
	var leaves []store.LeafAt
	err := s.scanRecords(ctx, run, 1, -1, 0, func(r verifyRow) error {
		row = r
		if !r.exists {
			return &store.NotFoundError{What: "run " + run.String()}
		}
		return nil
	}, &leaves, func(r store.Record) error {
		if r.Seq > row.head.Seq {
			return &store.CorruptError{Run: run, Seq: r.Seq, Detail: fmt.Sprintf("record beyond the run's head (seq %d)", row.head.Seq)}
		}
		if err := v.Next(r); err != nil {
			return err
		}
		return concluded.Next(r)
	})
	if err != nil {
		return store.Digest{}, s.readErr("verify run "+run.String(), err)
	}
	if v.Head() != row.head {
		return store.Digest{}, &store.CorruptError{Run: run, Seq: v.Head().Seq, Detail: fmt.Sprintf("chain ends at seq %d but the run's head says seq %d", v.Head().Seq, row.head.Seq)}
	}
	if row.sealedOutcome != nil && (len(row.leaf) != 32 || store.Digest(row.leaf) != row.head.Hash) {
		return store.Digest{}, &store.CorruptError{Run: run, Seq: row.head.Seq, Detail: "sealed leaf is not the run's terminal hash"}
	}
	if err := concluded.Check(run, row.outcome, row.sealedOutcome); err != nil {
		return store.Digest{}, err
	}
	if err := store.CheckRunLeaves(run, row.head, row.sealedOutcome != nil, row.logIndex, leaves); err != nil {
		return store.Digest{}, err
	}
	return row.head.Hash, nil
}

func parseRun(s string) (store.RunID, error) {
	r, err := store.ParseRunID(s)
	if err != nil || r.String() != s {
		return r, &store.CorruptError{Detail: fmt.Sprintf("stored run id %q does not parse", s)}
	}
	return r, nil
}

func (s *Store) listRuns(ctx context.Context, query string, args ...any) ([]store.RunID, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.CollectRows(rows, scanRun)
}

// scanRun maps a row of one run id.
func scanRun(row store.Rows) (store.RunID, error) {
	var id string
	if err := row.Scan(&id); err != nil {
		return store.RunID{}, err
	}
	return parseRun(id)
}

func (s *Store) listActivity(ctx context.Context, query string, args ...any) ([]store.Activity, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.CollectRows(rows, scanActivity)
}

func scanActivity(row store.Rows) (store.Activity, error) { return store.ScanActivity(row, parseRun) }

// RunsByOutcome implements store.Journal.
func (s *Store) RunsByOutcome(ctx context.Context, outcome string, limit int) ([]store.RunID, error) {
	if err := store.ValidateOutcome(outcome); err != nil {
		return nil, err
	}
	if err := store.ValidateLimit(limit); err != nil {
		return nil, err
	}
	out, err := s.listRuns(ctx, s.q.byOutcome, s.tenant, outcome, limit)
	return out, s.readErr("runs by outcome", err)
}

// CountByOutcome implements store.Journal.
func (s *Store) CountByOutcome(ctx context.Context, outcome string) (uint64, error) {
	if err := store.ValidateOutcome(outcome); err != nil {
		return 0, err
	}
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	// Every row is read, not counted blind: a row whose run id does not
	// parse is corruption, refused as RunsByOutcome refuses it, never
	// counted (store.Journal.CountByOutcome).
	var n uint64
	err := func() error {
		rows, err := s.pool.Query(ctx, s.q.countOutcome, s.tenant, outcome)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			if _, err := parseRun(id); err != nil {
				return err
			}
			n++
		}
		return rows.Err()
	}()
	if err != nil {
		return 0, s.readErr(fmt.Sprintf("count outcome %q", outcome), err)
	}
	return n, nil
}

func validateKey(key string) error {
	if key == "" || len(key) > 512 {
		return &store.InvalidArgumentError{Field: "admission_key", Detail: "must be 1 to 512 bytes"}
	}
	return nil
}

// AdmittedAs implements store.Journal.
func (s *Store) AdmittedAs(ctx context.Context, key string) (store.RunID, bool, error) {
	if err := validateKey(key); err != nil {
		return store.RunID{}, false, err
	}
	runs, err := s.listRuns(ctx, s.q.admittedAs, s.tenant, key)
	if err != nil || len(runs) == 0 {
		return store.RunID{}, false, s.readErr("admitted as", err)
	}
	return runs[0], true, nil
}

// ForgetAdmissions implements store.Journal.
func (s *Store) ForgetAdmissions(ctx context.Context, olderThan time.Time) (int, error) {
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	// timestamptz ends in the year 294276; anything later retires all.
	var cut any = olderThan
	if olderThan.Year() > 200000 {
		cut = "infinity"
	} else if olderThan.Year() < -4000 {
		cut = "-infinity"
	}
	tag, err := s.pool.Exec(ctx, s.q.forget, s.tenant, cut)
	if err != nil {
		return 0, s.readErr("forget admissions", err)
	}
	return int(tag.RowsAffected()), nil
}

// RecentRuns implements store.Journal.
func (s *Store) RecentRuns(ctx context.Context, after *store.Activity, limit int) ([]store.Activity, error) {
	if err := store.ValidateLimit(limit); err != nil {
		return nil, err
	}
	var out []store.Activity
	var err error
	if after == nil {
		out, err = s.listActivity(ctx, s.q.recent, s.tenant, limit)
	} else {
		out, err = s.listActivity(ctx, s.q.recentAfter, s.tenant, clampAt(after.At), after.Run.String(), limit)
	}
	return out, s.readErr("recent runs", err)
}

// RecentRunsFrom implements store.Journal.
func (s *Store) RecentRunsFrom(ctx context.Context, source string, after *store.Activity, limit int) ([]store.Activity, error) {
	if source == "" || len(source) > 256 {
		return nil, &store.InvalidArgumentError{Field: "source", Detail: "must be 1 to 256 bytes"}
	}
	if err := store.ValidateLimit(limit); err != nil {
		return nil, err
	}
	var out []store.Activity
	var err error
	if after == nil {
		out, err = s.listActivity(ctx, s.q.recentFrom, s.tenant, source, limit)
	} else {
		out, err = s.listActivity(ctx, s.q.recentFromAfter, s.tenant, source, clampAt(after.At), after.Run.String(), limit)
	}
	return out, s.readErr("recent runs from "+source, err)
}

func clampAt(at uint64) int64 {
	if at > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(at)
}

// RunsByID implements store.Journal.
func (s *Store) RunsByID(ctx context.Context, after *store.RunID, limit int) ([]store.RunID, error) {
	if err := store.ValidateLimit(limit); err != nil {
		return nil, err
	}
	cursor := ""
	if after != nil {
		cursor = after.String()
	}
	out, err := s.listRuns(ctx, s.q.runsByID, s.tenant, cursor, limit)
	return out, s.readErr("runs by id", err)
}

// CaseHistory implements store.Journal.
func (s *Store) CaseHistory(ctx context.Context, c store.CaseID, limit int) ([]store.Record, error) {
	if c.IsZero() {
		return nil, &store.InvalidArgumentError{Field: "case", Detail: "is missing"}
	}
	if err := store.ValidateLimit(limit); err != nil {
		return nil, err
	}
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.q.caseHistory, s.tenant, c.String(), limit)
	if err != nil {
		return nil, s.readErr("case history "+c.String(), err)
	}
	defer rows.Close()
	out := []store.Record{}
	for rows.Next() {
		var id string
		var seq int64
		var ph, h, raw []byte
		if err := rows.Scan(&id, &seq, &ph, &h, &raw); err != nil {
			return nil, s.readErr("case history "+c.String(), err)
		}
		run, err := parseRun(id)
		if err != nil {
			return nil, err
		}
		if len(ph) != 32 || len(h) != 32 || seq < 1 {
			return nil, &store.CorruptError{Run: run, Seq: store.Seq(seq), Detail: "stored record row is malformed"}
		}
		r, err := store.DecodeRecord(run, store.Seq(seq), store.Digest(ph), store.Digest(h), raw)
		if err != nil {
			return nil, err
		}
		if r.Case != c {
			return nil, &store.CorruptError{Run: run, Seq: r.Seq, Detail: "case index names a record of another case"}
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.readErr("case history "+c.String(), err)
	}
	return out, nil
}

// CaseRuns implements store.Journal.
func (s *Store) CaseRuns(ctx context.Context, c store.CaseID, after *store.RunID, limit int) ([]store.RunID, error) {
	if c.IsZero() {
		return nil, &store.InvalidArgumentError{Field: "case", Detail: "is missing"}
	}
	if err := store.ValidateLimit(limit); err != nil {
		return nil, err
	}
	cursor := ""
	if after != nil {
		cursor = after.String()
	}
	out, err := s.listRuns(ctx, s.q.caseRuns, s.tenant, c.String(), cursor, limit)
	return out, s.readErr("runs of case "+c.String(), err)
}

// WaitingRuns implements store.Journal.
func (s *Store) WaitingRuns(ctx context.Context, limit int) ([]store.WaitingRun, error) {
	if err := store.ValidateLimit(limit); err != nil {
		return nil, err
	}
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.q.waiting, s.tenant, limit)
	if err != nil {
		return nil, s.readErr("waiting runs", err)
	}
	defer rows.Close()
	out := []store.WaitingRun{}
	for rows.Next() {
		var id, awaiting, event string
		var until *string
		if err := rows.Scan(&id, &awaiting, &event, &until); err != nil {
			return nil, s.readErr("waiting runs", err)
		}
		run, err := parseRun(id)
		if err != nil {
			return nil, err
		}
		w := store.WaitingRun{Run: run, Reason: store.Suspension{Awaiting: store.Awaiting(awaiting), Event: event}}
		if until != nil {
			t, err := time.Parse(untilLayout, *until)
			if err != nil {
				return nil, &store.CorruptError{Run: run, Detail: fmt.Sprintf("stored wait deadline %q does not parse", *until)}
			}
			w.Reason.Until = t
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, s.readErr("waiting runs", err)
	}
	return out, nil
}
