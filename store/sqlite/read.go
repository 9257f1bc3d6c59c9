package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/runseal/runseal/store"
)

// Head implements store.Journal.
func (s *Store) Head(ctx context.Context, run store.RunID) (store.Head, error) {
	st, err := s.loadRun(ctx, s.rdb, run)
	if err != nil {
		return store.Head{}, err
	}
	return st.head, nil
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

// ReadStored implements store.Journal. The rows stream one at a time, so
// stopping at the first record past the byte bound leaves every later row
// unread.
func (s *Store) ReadStored(ctx context.Context, run store.RunID, from store.Seq, limit, maxBytes int) ([]store.Record, store.Seq, error) {
	page, err := store.NewStoredPage(from, limit, maxBytes)
	if err != nil {
		return nil, 0, err
	}
	err = s.scanRecords(ctx, run, from, limit, func(r store.Record) error {
		if !page.Add(r) {
			return errPageComplete
		}
		return nil
	})
	if err != nil && !errors.Is(err, errPageComplete) {
		return nil, 0, err
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
	var out []store.Record
	err := s.scanRecords(ctx, run, from, limit, func(r store.Record) error {
		out = append(out, r)
		return nil
	})
	return out, err
}

// qReadRun reads a run's records from a seq, in seq order, at most a limit.
var qReadRun = keyedRecords(`k.seq, r.id, r.seq, r.prev_hash, r.hash, r.raw`, `k.tenant=? AND k.run=? AND k.seq>=? AND r.seq>=?`) + `
ORDER BY 1, 2 LIMIT ?`

// scanRecords streams a run's records from seq from, at most limit of them
// (all when limit < 0), checking each against its hash and its predecessor's
// link as it goes, in one read snapshot.
func (s *Store) scanRecords(ctx context.Context, run store.RunID, from store.Seq, limit int, fn func(store.Record) error) error {
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("read run %s: %w", run, err)
	}
	defer tx.Rollback()
	return s.scanRecordsTx(ctx, tx, run, from, limit, fn)
}

// scanRecordsTx is scanRecords inside the caller's read transaction.
func (s *Store) scanRecordsTx(ctx context.Context, tx *sql.Tx, run store.RunID, from store.Seq, limit int, fn func(store.Record) error) error {
	st, err := s.loadRun(ctx, tx, run)
	if err != nil {
		return err
	}
	// The last seq this read must reach: a row missing at the end is as
	// much a gap as one missing in the middle.
	end := st.head.Seq
	if limit >= 0 && from+store.Seq(limit)-1 < end {
		end = from + store.Seq(limit) - 1
	}
	rows, err := s.query(ctx, tx, qReadRun, append(twice(s.tenant, run.String(), int64(from), int64(from)), limit)...)
	if err != nil {
		return fmt.Errorf("read run %s: %w", run, err)
	}
	defer rows.Close()
	chain := store.NewChainCheck(run, from)
	for rows.Next() {
		var seq int64
		var ph, h, raw []byte
		var keySeq, id int64 // the order's
		if err := rows.Scan(&keySeq, &id, &seq, &ph, &h, &raw); err != nil {
			return fmt.Errorf("read run %s: %w", run, err)
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
		return fmt.Errorf("read run %s: %w", run, err)
	}
	expect := chain.Expect()
	switch last := expect - 1; {
	case from <= end && last < end:
		return &store.CorruptError{Run: run, Seq: expect, Detail: fmt.Sprintf("records missing: the run's head is seq %d", st.head.Seq)}
	case limit < 0 && last > st.head.Seq:
		return &store.CorruptError{Run: run, Seq: st.head.Seq + 1, Detail: fmt.Sprintf("record stored past the run's head (seq %d)", st.head.Seq)}
	}
	return nil
}

// Verify implements store.Journal: it re-checks the whole chain from
// genesis, in constant memory, against the run's recorded head and, for a
// sealed run, against its leaf; and against the log, which must hold the
// head of a sealed run at its index and no record of an open one (a seal
// removed by editing the file, unsealed.go). The head, the records and
// the log are read in one
// snapshot, so a record past the head cannot be a concurrent append: it is
// a record no verified chain covers, which Read would still return.
func (s *Store) Verify(ctx context.Context, run store.RunID) (store.Digest, error) {
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return store.Digest{}, fmt.Errorf("verify run %s: %w", run, err)
	}
	defer tx.Rollback()
	return s.verifyTx(ctx, tx, run)
}

// verifyTx is Verify inside the caller's read transaction.
func (s *Store) verifyTx(ctx context.Context, tx *sql.Tx, run store.RunID) (store.Digest, error) {
	st, err := s.loadRun(ctx, tx, run)
	if err != nil {
		return store.Digest{}, err
	}
	if !st.exists {
		return store.Digest{}, &store.NotFoundError{What: "run " + run.String()}
	}
	v := store.NewChainVerifier(run)
	var concluded store.Conclusion
	leaves := s.runLeaves(tx)
	err = s.scanRecordsTx(ctx, tx, run, 1, -1, func(r store.Record) error {
		if r.Seq > st.head.Seq {
			return &store.CorruptError{Run: run, Seq: r.Seq, Detail: fmt.Sprintf("record stored past the run's head (seq %d)", st.head.Seq)}
		}
		if err := v.Next(r); err != nil {
			return err
		}
		if err := leaves.add(ctx, r); err != nil {
			return err
		}
		return concluded.Next(r)
	})
	if err != nil {
		return store.Digest{}, err
	}
	if v.Head() != st.head {
		return store.Digest{}, &store.CorruptError{Run: run, Seq: v.Head().Seq, Detail: fmt.Sprintf("chain ends at seq %d but the run's head says seq %d", v.Head().Seq, st.head.Seq)}
	}
	if st.sealedOutcome.Valid && (len(st.leaf) != 32 || store.Digest(st.leaf) != st.head.Hash) {
		return store.Digest{}, &store.CorruptError{Run: run, Seq: st.head.Seq, Detail: "sealed leaf is not the run's terminal hash"}
	}
	if err := concluded.Check(run, nullable(st.outcome), nullable(st.sealedOutcome)); err != nil {
		return store.Digest{}, err
	}
	// The log must hold the run's head, at its seal's index, if it is
	// sealed, and none of its records if it is open (unsealed.go).
	if err := leaves.check(ctx, run, st); err != nil {
		return store.Digest{}, err
	}
	return st.head.Hash, nil
}

func nullable(n sql.NullString) *string {
	if !n.Valid {
		return nil
	}
	return &n.String
}

func parseRun(s string) (store.RunID, error) {
	r, err := store.ParseRunID(s)
	if err != nil {
		return r, &store.CorruptError{Detail: fmt.Sprintf("stored run id %q does not parse", s)}
	}
	return r, nil
}

func (s *Store) listRuns(ctx context.Context, query string, args ...any) ([]store.RunID, error) {
	rows, err := s.rdb.QueryContext(ctx, query, args...)
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
	rows, err := s.rdb.QueryContext(ctx, query, args...)
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
	return s.listRuns(ctx, `SELECT run FROM runs WHERE tenant=? AND outcome=? ORDER BY outcome_ord DESC LIMIT ?`, s.tenant, outcome, limit)
}

// CountByOutcome implements store.Journal.
func (s *Store) CountByOutcome(ctx context.Context, outcome string) (uint64, error) {
	if err := store.ValidateOutcome(outcome); err != nil {
		return 0, err
	}
	// Every row is read, not counted blind: a row whose run id does not
	// parse is corruption, refused as RunsByOutcome refuses it, never
	// counted (store.Journal.CountByOutcome).
	rows, err := s.rdb.QueryContext(ctx, `SELECT run FROM runs WHERE tenant=? AND outcome=?`, s.tenant, outcome)
	if err != nil {
		return 0, fmt.Errorf("count outcome %q: %w", outcome, err)
	}
	defer rows.Close()
	var n uint64
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return 0, fmt.Errorf("count outcome %q: %w", outcome, err)
		}
		if _, err := parseRun(id); err != nil {
			return 0, err
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("count outcome %q: %w", outcome, err)
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
	runs, err := s.listRuns(ctx, `SELECT run FROM admissions WHERE tenant=? AND key=?`, s.tenant, key)
	if err != nil || len(runs) == 0 {
		return store.RunID{}, false, err
	}
	return runs[0], true, nil
}

// ForgetAdmissions implements store.Journal.
func (s *Store) ForgetAdmissions(ctx context.Context, olderThan time.Time) (int, error) {
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(context.Background(), `DELETE FROM admissions WHERE tenant=? AND claimed_at < ?`, s.tenant, olderThan.UnixNano())
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

func activityCursor(after *store.Activity) (int64, string) {
	if after == nil {
		return int64(^uint64(0) >> 1), "~" // above every ULID
	}
	return int64(after.At), after.Run.String()
}

// RecentRuns implements store.Journal.
func (s *Store) RecentRuns(ctx context.Context, after *store.Activity, limit int) ([]store.Activity, error) {
	if err := store.ValidateLimit(limit); err != nil {
		return nil, err
	}
	at, run := activityCursor(after)
	return s.listActivity(ctx, `SELECT run, active_at FROM runs WHERE tenant=? AND (active_at < ? OR (active_at = ? AND run < ?))
		ORDER BY active_at DESC, run DESC LIMIT ?`, s.tenant, at, at, run, limit)
}

// RecentRunsFrom implements store.Journal.
func (s *Store) RecentRunsFrom(ctx context.Context, source string, after *store.Activity, limit int) ([]store.Activity, error) {
	if source == "" || len(source) > 256 {
		return nil, &store.InvalidArgumentError{Field: "source", Detail: "must be 1 to 256 bytes"}
	}
	if err := store.ValidateLimit(limit); err != nil {
		return nil, err
	}
	at, run := activityCursor(after)
	return s.listActivity(ctx, `SELECT run, active_at FROM runs WHERE tenant=? AND source=? AND (active_at < ? OR (active_at = ? AND run < ?))
		ORDER BY active_at DESC, run DESC LIMIT ?`, s.tenant, source, at, at, run, limit)
}

// RunsByID implements store.Journal.
func (s *Store) RunsByID(ctx context.Context, after *store.RunID, limit int) ([]store.RunID, error) {
	return s.runsByID(ctx, s.rdb, after, limit)
}

// runsByID is RunsByID on q (the read pool, or a Checker's connection).
func (s *Store) runsByID(ctx context.Context, q querier, after *store.RunID, limit int) ([]store.RunID, error) {
	if err := store.ValidateLimit(limit); err != nil {
		return nil, err
	}
	cursor := ""
	if after != nil {
		cursor = after.String()
	}
	rows, err := q.QueryContext(ctx, `SELECT run FROM runs WHERE tenant=? AND run > ? ORDER BY run LIMIT ?`, s.tenant, cursor, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.CollectRows(rows, scanRun)
}

// CaseHistory implements store.Journal.
func (s *Store) CaseHistory(ctx context.Context, c store.CaseID, limit int) ([]store.Record, error) {
	if c.IsZero() {
		return nil, &store.InvalidArgumentError{Field: "case", Detail: "is missing"}
	}
	if err := store.ValidateLimit(limit); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT run, seq, prev_hash, hash, raw FROM records WHERE tenant=? AND case_id=? ORDER BY id LIMIT ?`,
		s.tenant, c.String(), limit)
	if err != nil {
		return nil, fmt.Errorf("case history %s: %w", c, err)
	}
	defer rows.Close()
	out := []store.Record{}
	for rows.Next() {
		var id string
		var seq int64
		var ph, h, raw []byte
		if err := rows.Scan(&id, &seq, &ph, &h, &raw); err != nil {
			return nil, err
		}
		run, err := parseRun(id)
		if err != nil {
			return nil, err
		}
		if len(ph) != 32 || len(h) != 32 {
			return nil, &store.CorruptError{Run: run, Seq: store.Seq(seq), Detail: "stored hash is not 32 bytes"}
		}
		r, err := store.DecodeRecord(run, store.Seq(seq), store.Digest(ph), store.Digest(h), raw)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
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
	return s.listRuns(ctx, `SELECT DISTINCT run FROM records WHERE tenant=? AND case_id=? AND run > ? ORDER BY run LIMIT ?`, s.tenant, c.String(), cursor, limit)
}

// WaitingRuns implements store.Journal.
func (s *Store) WaitingRuns(ctx context.Context, limit int) ([]store.WaitingRun, error) {
	if err := store.ValidateLimit(limit); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT run, wait_awaiting, coalesce(wait_event, ''), wait_until FROM runs
		WHERE tenant=? AND wait_awaiting IS NOT NULL ORDER BY wait_until IS NULL, wait_until, run LIMIT ?`, s.tenant, limit)
	if err != nil {
		return nil, fmt.Errorf("waiting runs: %w", err)
	}
	defer rows.Close()
	out := []store.WaitingRun{}
	for rows.Next() {
		var id, awaiting, event string
		var until sql.NullString
		if err := rows.Scan(&id, &awaiting, &event, &until); err != nil {
			return nil, err
		}
		run, err := parseRun(id)
		if err != nil {
			return nil, err
		}
		w := store.WaitingRun{Run: run, Reason: store.Suspension{Awaiting: store.Awaiting(awaiting), Event: event}}
		if until.Valid {
			t, err := time.Parse(untilLayout, until.String)
			if err != nil {
				return nil, &store.CorruptError{Run: run, Detail: fmt.Sprintf("stored wait deadline %q does not parse", until.String)}
			}
			w.Reason.Until = t
		}
		out = append(out, w)
	}
	return out, rows.Err()
}
