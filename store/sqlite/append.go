package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/runseal/runseal/internal/groupcommit"
	"github.com/runseal/runseal/store"
)

// runState is what a write needs to know about a run.
type runState struct {
	exists        bool
	head          store.Head
	outcome       sql.NullString // latest conclusion
	sealedOutcome sql.NullString
	leaf          []byte
	logIndex      sql.NullInt64
}

func (s *Store) loadRun(ctx context.Context, q querier, run store.RunID) (runState, error) {
	var st runState
	var hash []byte
	var seq int64
	err := s.queryRow(ctx, q, qLoadRun, s.tenant, run.String()).Scan(&seq, &hash, &st.outcome, &st.sealedOutcome, &st.leaf, &st.logIndex)
	if errors.Is(err, sql.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("read run %s: %w", run, err)
	}
	if len(hash) != 32 || seq < 1 {
		return st, &store.CorruptError{Run: run, Detail: "run head row is malformed"}
	}
	st.exists = true
	st.head = store.Head{Seq: store.Seq(seq), Hash: store.Digest(hash)}
	return st, nil
}

// querier is what *sql.DB, *sql.Tx and *sql.Conn share.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// checkFence refuses epoch unless it is the run's current lease epoch. With
// no lease row any epoch passes: restore replays before any lease exists.
func (s *Store) checkFence(ctx context.Context, tx *sql.Tx, run store.RunID, epoch store.Epoch) error {
	var cur int64
	err := s.queryRow(ctx, tx, qFence, s.tenant, run.String()).Scan(&cur)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read lease of run %s: %w", run, err)
	}
	if store.Epoch(cur) != epoch {
		return &store.FencedError{Run: run, Held: epoch, Current: store.Epoch(cur)}
	}
	return nil
}

// Append implements store.Journal.
func (s *Store) Append(ctx context.Context, epoch store.Epoch, batch []store.Append) ([]store.Record, error) {
	// The batch is parsed in the writer, not here: parsing in the callers
	// (store.ParseBatch) measured worse at 64 appenders on a busy 2-core
	// machine, twice: 0.21 of the batched ceiling against 0.31-0.38, and
	// later twice the p50 latency at 8x16 and 64x16 (8-10 ms against 5,
	// 72-103 ms against 37-41), as 64 callers parsing at once leave the
	// one writer, which Go's scheduler does not favour, waiting for a CPU.
	run, err := store.ValidateBatch(epoch, batch)
	if err != nil {
		return nil, err
	}
	r := &appendReq{s: s, run: run, epoch: epoch, batch: batch}
	err = s.submit(ctx, groupcommit.Work{
		Run: func(_ context.Context, tx *sql.Tx) error {
			parsed, err := store.ParseBatch(epoch, batch)
			if err != nil {
				return err
			}
			recs, err := s.appendTx(tx, run, epoch, parsed)
			r.out = recs
			return err
		},
		Batched: r,
	})
	if err != nil {
		return nil, err
	}
	return r.out, nil
}

func (s *Store) appendTx(tx *sql.Tx, run store.RunID, epoch store.Epoch, parsed *store.Parsed) ([]store.Record, error) {
	ctx := context.Background()
	st, err := s.loadRun(ctx, tx, run)
	if err != nil {
		return nil, err
	}
	if err := s.checkWritable(ctx, tx, run, st); err != nil {
		return nil, err
	}
	if err := s.checkFence(ctx, tx, run, epoch); err != nil {
		return nil, err
	}
	prepared, err := parsed.Build(st.head)
	if err != nil {
		return nil, err
	}
	now := s.now()
	runText := run.String()
	source := sql.NullString{}
	outcome, outcomeOrd := st.outcome, sql.NullInt64{}
	var wait *store.Suspension
	ids := make([]int64, 0, len(prepared))
	for _, p := range prepared {
		var caseID, effect any
		if !p.Case.IsZero() {
			caseID = p.Case.String()
		}
		if p.EffectKey != nil {
			effect = p.EffectKey[:]
		}
		if p.Kind == store.KindEffectStarted {
			var n int
			err := s.queryRow(ctx, tx, qEffect, s.tenant, runText, effect).Scan(&n)
			if err != nil {
				return nil, fmt.Errorf("check effect: %w", err)
			}
			if n > 0 {
				return nil, &store.DuplicateEffectError{Run: run, Key: *p.EffectKey}
			}
		}
		res, err := s.txExec(ctx, tx, qInsertRecord, s.tenant, runText, int64(p.Seq), p.Kind, caseID, effect, p.PrevHash[:], p.Hash[:], p.Raw)
		if err != nil {
			if isUnique(err) && p.Kind == store.KindEffectStarted {
				return nil, &store.DuplicateEffectError{Run: run, Key: *p.EffectKey}
			}
			return nil, fmt.Errorf("insert record %s/%d: %w", run, p.Seq, err)
		}
		if a := p.Facts.Admission; a != nil {
			if a.Key != "" {
				if err := s.claimAdmission(ctx, tx, a.Key, run, now); err != nil {
					return nil, err
				}
			}
			if a.Source != "" {
				source = sql.NullString{String: a.Source, Valid: true}
			}
		}
		id, err := res.LastInsertId()
		if err != nil {
			return nil, fmt.Errorf("insert record %s/%d: %w", run, p.Seq, err)
		}
		ids = append(ids, id)
		if p.Facts.Outcome != "" {
			outcome = sql.NullString{String: p.Facts.Outcome, Valid: true}
			outcomeOrd = sql.NullInt64{Int64: id, Valid: true}
		}
		wait = p.Facts.Suspension // the last record decides: any progress clears a wait
	}
	// The keys as the group path writes them (recordKeys): one row for the
	// records of this append, consecutive in seq and id.
	runs := make([]string, len(prepared))
	for i := range runs {
		runs[i] = runText
	}
	if err := s.insertKeys(ctx, tx, recordKeys(nil, s.tenant, prepared, runs, ids)); err != nil {
		return nil, err
	}
	last := prepared[len(prepared)-1]
	var awaiting, event, until any
	if wait != nil {
		awaiting = string(wait.Awaiting)
		event = wait.Event
		if !wait.Until.IsZero() {
			until = formatUntil(wait.Until)
		}
	}
	_, err = s.txExec(ctx, tx, qUpsertRun,
		s.tenant, runText, int64(last.Seq), last.Hash[:], now.Unix(), source, outcome, outcomeOrd, awaiting, event, until)
	if err != nil {
		return nil, fmt.Errorf("update run %s: %w", run, err)
	}
	if err := s.mergeKeysIfDue(ctx, tx); err != nil {
		return nil, err
	}
	recs := make([]store.Record, len(prepared))
	for i, p := range prepared {
		recs[i] = p.Record
	}
	return recs, nil
}

func (s *Store) claimAdmission(ctx context.Context, tx *sql.Tx, key string, run store.RunID, now time.Time) error {
	if err := s.checkAdmission(ctx, tx, key); err != nil {
		return err
	}
	if _, err := s.txExec(ctx, tx, qClaim, s.tenant, key, run.String(), now.UnixNano()); err != nil {
		return fmt.Errorf("claim admission key: %w", err)
	}
	return nil
}

// checkAdmission refuses key if a run of this tenant already holds it. The
// lookup runs through the writer's prepared statement: a batch checks it
// for every admission record it decides.
func (s *Store) checkAdmission(ctx context.Context, tx *sql.Tx, key string) error {
	var holder string
	err := s.queryRow(ctx, tx, qAdmission, s.tenant, key).Scan(&holder)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("check admission key: %w", err)
	}
	h, perr := store.ParseRunID(holder)
	if perr != nil {
		return &store.CorruptError{Detail: fmt.Sprintf("admission key %q names unparseable run %q", key, holder)}
	}
	return &store.DuplicateAdmissionError{Key: key, Holder: h}
}

// untilLayout sorts as text in time order for years 0000-9999.
const untilLayout = "2006-01-02T15:04:05.000000000Z07:00"

func formatUntil(t time.Time) string { return t.UTC().Format(untilLayout) }

func isUnique(err error) bool {
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}
