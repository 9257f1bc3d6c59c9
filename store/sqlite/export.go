package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"

	"github.com/runseal/runseal/store"
)

// ReadRuns implements store.BulkReader with two statements in one read
// transaction: the heads of the runs named in a JSON array (CROSS JOIN
// keeps json_each the outer loop; SQLite would otherwise scan every run of
// the tenant once per page), and the records of the range of run ids they
// span, in the order of the (tenant, run, seq) index (records of runs in
// the range but not asked are skipped).
func (s *Store) ReadRuns(ctx context.Context, runs []store.RunID, limit int) ([]store.Head, []store.Record, error) {
	if err := store.ValidateLimit(limit); err != nil {
		return nil, nil, err
	}
	if len(runs) == 0 {
		return nil, nil, nil
	}
	list := []byte{'['}
	at := make(map[store.RunID]int, len(runs))
	for i, r := range runs {
		if i > 0 {
			if bytes.Compare(runs[i-1][:], r[:]) >= 0 {
				return nil, nil, &store.InvalidArgumentError{Field: "runs", Detail: "not in ascending id order"}
			}
			list = append(list, ',')
		}
		list = append(append(append(list, '"'), r.String()...), '"')
		at[r] = i
	}
	list = append(list, ']')
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, nil, fmt.Errorf("read %d runs: %w", len(runs), err)
	}
	defer tx.Rollback()
	heads := make([]store.Head, len(runs))
	rows, err := tx.QueryContext(ctx, `SELECT q.value, r.head_seq, r.head_hash FROM json_each(?) q CROSS JOIN runs r ON r.tenant=? AND r.run=q.value`, string(list), s.tenant)
	if err != nil {
		return nil, nil, fmt.Errorf("read %d heads: %w", len(runs), err)
	}
	for rows.Next() {
		var id string
		var seq int64
		var hash []byte
		if err := rows.Scan(&id, &seq, &hash); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("read heads: %w", err)
		}
		run, err := store.ParseRunID(id)
		if err != nil {
			rows.Close()
			return nil, nil, &store.CorruptError{Detail: fmt.Sprintf("run row %q is malformed", id)}
		}
		if len(hash) != 32 || seq < 1 {
			rows.Close()
			return nil, nil, &store.CorruptError{Run: run, Detail: "run head row is malformed"}
		}
		heads[at[run]] = store.Head{Seq: store.Seq(seq), Hash: store.Digest(hash)}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read heads: %w", err)
	}
	rows, err = tx.QueryContext(ctx, `SELECT run, seq, kind, case_id, prev_hash, hash, raw FROM records WHERE tenant=? AND run>=? AND run<=? ORDER BY run, seq LIMIT ?`,
		s.tenant, runs[0].String(), runs[len(runs)-1].String(), limit)
	if err != nil {
		return nil, nil, fmt.Errorf("read records of %d runs: %w", len(runs), err)
	}
	defer rows.Close()
	var out []store.Record
	var cur store.RunID
	var curText string
	var next store.Seq
	for rows.Next() {
		var id, kind string
		var caseID sql.NullString
		var seq int64
		var ph, h, raw []byte
		if err := rows.Scan(&id, &seq, &kind, &caseID, &ph, &h, &raw); err != nil {
			return nil, nil, fmt.Errorf("read records: %w", err)
		}
		run := cur
		if id != curText {
			if run, err = store.ParseRunID(id); err != nil {
				return nil, nil, &store.CorruptError{Detail: fmt.Sprintf("record row names run %q", id)}
			}
		}
		if _, asked := at[run]; !asked {
			continue // a run created after the listing
		}
		if run != cur || id != curText {
			cur, curText, next = run, id, 1
		}
		if store.Seq(seq) != next {
			return nil, nil, &store.CorruptError{Run: run, Seq: next, Detail: fmt.Sprintf("seq gap: found %d", seq)}
		}
		if len(ph) != 32 || len(h) != 32 {
			return nil, nil, &store.CorruptError{Run: run, Seq: store.Seq(seq), Detail: "stored hash is not 32 bytes"}
		}
		r := store.Record{Body: store.Body{Run: run, Seq: store.Seq(seq), Kind: kind}, PrevHash: store.Digest(ph), Hash: store.Digest(h), Raw: raw}
		if caseID.Valid {
			c, err := store.ParseCaseID(caseID.String)
			if err != nil {
				return nil, nil, &store.CorruptError{Run: run, Seq: r.Seq, Detail: fmt.Sprintf("case column %q", caseID.String)}
			}
			r.Case = c
		}
		if kind == store.KindRunConcluded {
			if r, err = store.DecodeRecord(run, store.Seq(seq), store.Digest(ph), store.Digest(h), raw); err != nil {
				return nil, nil, err
			}
		}
		next++
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read records: %w", err)
	}
	return heads, out, nil
}

var _ store.BulkReader = (*Store)(nil)
