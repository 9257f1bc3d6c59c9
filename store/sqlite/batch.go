package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/runseal/runseal/store"
)

// Appends next to each other in a group are written together: one query
// reads the state and lease of all their runs (of those the writer does
// not remember: known.go), each append is decided in
// Go against that state (and the appends before it in the batch), and the
// accepted ones are written with one multi-row INSERT of records and one
// multi-row upsert of runs. A refused append writes nothing, so it needs
// no savepoint. A write that fails anyway rolls the group back, and the
// group commit runs those appends again one by one (appendTx, each in its
// savepoint), which pins the failure on its own append.
//
// Every guarantee of appendTx holds: the fence, the seal check and the
// uniqueness of effect and admission keys are decided in the group's
// transaction, and the answers wait for its COMMIT.

// appendReq is one Append waiting in a batch.
type appendReq struct {
	s     *Store // the tenant's view that submitted it
	run   store.RunID
	epoch store.Epoch
	// Either batch, parsed in the writer (Append: see there), or parsed,
	// parsed by a caller that is alone (AppendBulk).
	batch  []store.Append
	parsed *store.Parsed
	out    []store.Record
}

// batchRun is what a batch knows and decides about one run.
type batchRun struct {
	run     store.RunID
	runText string
	st      runState
	leased  bool
	epoch   store.Epoch
	touched bool
	source  sql.NullString
	outcome sql.NullString // a conclusion written by this batch
	ordRec  int            // index in recs of that conclusion's record
	wait    *store.Suspension
	effects map[store.Digest]bool // effect keys this batch starts; nil until one does
	// The row's activity time and whether it records a wait, as read or
	// remembered: what upsertRuns needs to know an append leaves them as
	// they are.
	activeAt sql.NullInt64
	waiting  bool
	// known says the state is the writer's memory (known.go), not read in
	// this transaction; was is the remembered head the write must find.
	known bool
	was   store.Head
	// logged refuses every append to a run read open whose head the log
	// holds as a leaf (refuseLogged).
	logged error
}

// appendBatch implements groupcommit.Batch for appendReq values. The
// writer is the file's, shared by every tenant's view of it, so one batch
// can hold appends of several tenants: each tenant's appends are decided
// and written by the view that submitted them, in their order, and never
// under another tenant's name.
func (s *Store) appendBatch(ctx context.Context, tx *sql.Tx, items []any) ([]error, error) {
	refusals := make([]error, len(items))
	var order []string
	byTenant := map[string][]int{}
	for i, it := range items {
		t := it.(*appendReq).s.tenant
		if _, ok := byTenant[t]; !ok {
			order = append(order, t)
		}
		byTenant[t] = append(byTenant[t], i)
	}
	for _, t := range order {
		idx := byTenant[t]
		reqs := make([]*appendReq, len(idx))
		for k, i := range idx {
			reqs[k] = items[i].(*appendReq)
		}
		errs, err := reqs[0].s.appendTenantBatch(ctx, tx, reqs, true)
		if err != nil {
			s.forget()
			return nil, err
		}
		for k, i := range idx {
			refusals[i] = errs[k]
		}
	}
	if err := s.mergeKeysIfDue(ctx, tx); err != nil {
		s.forget() // the group rolls back: what it remembered did not happen
		return nil, err
	}
	return refusals, nil
}

// appendTenantBatch decides and writes a batch of one tenant's appends,
// all submitted through s. With recall, runs the writer remembers start
// from its memory (known.go) instead of a read, and the runs written are
// remembered; without it, the memory is neither read nor filled.
func (s *Store) appendTenantBatch(ctx context.Context, tx *sql.Tx, reqs []*appendReq, recall bool) ([]error, error) {
	runs, err := s.loadBatchRuns(ctx, tx, reqs, recall)
	if err != nil {
		return nil, err
	}
	now := s.now()
	refusals := make([]error, len(reqs))
	n := 0 // the records of the batch, at least (AppendBulk's parsed counts one)
	for _, r := range reqs {
		n += max(len(r.batch), 1)
	}
	recs := make([]store.Prepared, 0, n)
	recRuns := make([]string, 0, n)    // each record's run, as text
	claims := map[string]store.RunID{} // admission keys this batch claims
	touched := make([]*batchRun, 0, len(runs))
	for i, r := range reqs {
		br := runs[r.run]
		if br.logged != nil {
			refusals[i] = br.logged // decided on the stored state: nothing to decide again
			continue
		}
		prepared, err := s.decideAppend(ctx, tx, r, br, claims)
		if err != nil {
			if !store.IsDomain(err) {
				return nil, err
			}
			if br.known {
				// Refused on remembered state, which may be stale: decide
				// the batch again on the stored state. Nothing is written
				// yet.
				s.forget()
				return s.appendTenantBatch(ctx, tx, reqs, false)
			}
			refusals[i] = err
			continue
		}
		if !br.touched {
			br.touched = true
			touched = append(touched, br)
		}
		for _, p := range prepared {
			if p.Kind == store.KindEffectStarted {
				if br.effects == nil {
					br.effects = map[store.Digest]bool{}
				}
				br.effects[*p.EffectKey] = true
			}
			if a := p.Facts.Admission; a != nil {
				if a.Key != "" {
					claims[a.Key] = r.run
				}
				if a.Source != "" {
					br.source = sql.NullString{String: a.Source, Valid: true}
				}
			}
			if p.Facts.Outcome != "" {
				br.outcome = sql.NullString{String: p.Facts.Outcome, Valid: true}
				br.ordRec = len(recs)
			}
			br.wait = p.Facts.Suspension // the last record decides: any progress clears a wait
			recs = append(recs, p)
			recRuns = append(recRuns, br.runText)
		}
		last := prepared[len(prepared)-1]
		br.st.exists, br.st.head = true, store.Head{Seq: last.Seq, Hash: last.Hash}
		r.out = make([]store.Record, len(prepared))
		for k, p := range prepared {
			r.out[k] = p.Record
		}
	}
	if len(recs) == 0 {
		return refusals, nil
	}
	ids, err := s.insertRecords(ctx, tx, recs, recRuns)
	if err != nil {
		return nil, err
	}
	for key, run := range claims {
		if _, err := s.txExec(ctx, tx, qClaim, s.tenant, key, run.String(), now.UnixNano()); err != nil {
			return nil, fmt.Errorf("claim admission key: %w", err)
		}
	}
	if err := s.moveKnownHeads(ctx, tx, touched); err != nil {
		return nil, err
	}
	if err := s.upsertRuns(ctx, tx, touched, ids, now.Unix()); err != nil {
		return nil, err
	}
	if recall {
		s.remember(touched, now.Unix())
	}
	return refusals, nil
}

// decideAppend checks and builds one append against its run's state as
// the batch has left it. It writes nothing.
func (s *Store) decideAppend(ctx context.Context, tx *sql.Tx, r *appendReq, br *batchRun, claims map[string]store.RunID) ([]store.Prepared, error) {
	if br.st.sealedOutcome.Valid {
		return nil, &store.RunSealedError{Run: r.run, Outcome: br.st.sealedOutcome.String}
	}
	if br.leased && br.epoch != r.epoch {
		return nil, &store.FencedError{Run: r.run, Held: r.epoch, Current: br.epoch}
	}
	var prepared []store.Prepared
	var err error
	if r.parsed != nil {
		prepared, err = r.parsed.Build(br.st.head)
	} else {
		prepared, err = store.BuildBatch(br.st.head, r.epoch, r.batch)
	}
	if err != nil {
		return nil, err
	}
	for _, p := range prepared {
		if p.Kind == store.KindEffectStarted {
			if br.effects[*p.EffectKey] {
				return nil, &store.DuplicateEffectError{Run: r.run, Key: *p.EffectKey}
			}
			var n int
			if err := s.queryRow(ctx, tx, qEffect, s.tenant, br.runText, p.EffectKey[:]).Scan(&n); err != nil {
				return nil, fmt.Errorf("check effect: %w", err)
			}
			if n > 0 {
				return nil, &store.DuplicateEffectError{Run: r.run, Key: *p.EffectKey}
			}
		}
		if a := p.Facts.Admission; a != nil && a.Key != "" {
			if h, ok := claims[a.Key]; ok {
				return nil, &store.DuplicateAdmissionError{Key: a.Key, Holder: h}
			}
			if err := s.checkAdmission(ctx, tx, a.Key); err != nil {
				return nil, err
			}
		}
	}
	return prepared, nil
}

// loadBatchRuns reads, in one query, the state and lease epoch of every run
// the batch appends to; with recall, of every run the writer does not
// remember (known.go), and none when it remembers them all. A row names its
// run by its index in the JSON array asked for, which is checked against
// the run's text.
func (s *Store) loadBatchRuns(ctx context.Context, tx *sql.Tx, reqs []*appendReq, recall bool) (map[store.RunID]*batchRun, error) {
	runs := make(map[store.RunID]*batchRun, len(reqs))
	order := make([]batchRun, 0, len(reqs)) // one allocation for every run's state
	list := make([]byte, 1, 2+len(reqs)*29) // "26 characters",
	list[0] = '['
	var asked []int // the index in order of each run in list
	for _, r := range reqs {
		if runs[r.run] != nil {
			continue
		}
		runText := r.run.String()
		if recall {
			if br, ok := s.recall(r.run, runText); ok {
				order = append(order, br)
				runs[r.run] = &order[len(order)-1]
				continue
			}
		}
		order = append(order, batchRun{run: r.run, runText: runText})
		runs[r.run] = &order[len(order)-1]
		asked = append(asked, len(order)-1)
		if len(list) > 1 {
			list = append(list, ',')
		}
		list = append(append(append(list, '"'), order[len(order)-1].runText...), '"') // a run id needs no escaping
	}
	list = append(list, ']')
	if len(asked) == 0 {
		return runs, nil
	}
	var rows *sql.Rows
	var err error
	if st := s.hotStmt(ctx, tx, qLoadRuns); st != nil {
		rows, err = st.QueryContext(ctx, string(list), s.tenant, s.tenant)
	} else {
		rows, err = tx.QueryContext(ctx, qLoadRuns, string(list), s.tenant, s.tenant)
	}
	if err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var at int64
		var runText string // the driver hands TEXT over as a string: no copy into RawBytes
		var hash sql.RawBytes
		var seq, epoch, activeAt sql.NullInt64
		var outcome, sealed sql.NullString
		var waiting sql.NullBool
		if err := rows.Scan(&at, &runText, &seq, &hash, &outcome, &sealed, &epoch, &activeAt, &waiting); err != nil {
			return nil, fmt.Errorf("read runs: %w", err)
		}
		if at < 0 || at >= int64(len(asked)) || runText != order[asked[at]].runText {
			return nil, fmt.Errorf("read runs: unasked run %.40q", runText)
		}
		br := &order[asked[at]]
		br.st = runState{outcome: outcome, sealedOutcome: sealed}
		if seq.Valid {
			if len(hash) != 32 || seq.Int64 < 1 {
				return nil, &store.CorruptError{Run: br.run, Detail: "run head row is malformed"}
			}
			br.st.exists = true
			br.st.head = store.Head{Seq: store.Seq(seq.Int64), Hash: store.Digest(hash)}
		}
		br.activeAt, br.waiting = activeAt, waiting.Valid && waiting.Bool
		if epoch.Valid {
			br.leased, br.epoch = true, store.Epoch(epoch.Int64)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	rows.Close()
	for _, i := range asked {
		br := &order[i]
		if !br.st.exists || br.st.sealedOutcome.Valid {
			continue
		}
		switch err := s.refuseLogged(ctx, tx, br.run, br.st.head); {
		case errors.Is(err, store.ErrCorrupt):
			br.logged = err
		case err != nil:
			return nil, err
		}
	}
	return runs, nil
}

// insertRecords writes recs and their hot keys, and returns their row ids. SQLite gives a row
// without an explicit id the largest id plus one, so the rows one writer
// inserts in a row have consecutive ids ending at the last insert id.
func (s *Store) insertRecords(ctx context.Context, tx *sql.Tx, recs []store.Prepared, runs []string) ([]int64, error) {
	args := make([]any, 0, 9*len(recs))
	tenant := any(s.tenant)
	for i, p := range recs {
		var caseID, effect any
		if !p.Case.IsZero() {
			caseID = p.Case.String()
		}
		if p.EffectKey != nil {
			effect = p.EffectKey[:]
		}
		args = append(args, tenant, runs[i], int64(p.Seq), p.Kind, caseID, effect, p.PrevHash[:], p.Hash[:], p.Raw)
	}
	res, err := s.execRows(ctx, tx, qInsertRecord, qInsertRecords, 9, args)
	if err != nil {
		return nil, fmt.Errorf("insert %d records: %w", len(recs), err)
	}
	last, err := res.LastInsertId()
	if err != nil {
		return nil, fmt.Errorf("insert %d records: %w", len(recs), err)
	}
	ids := make([]int64, len(recs))
	for k := range recs {
		ids[k] = last - int64(len(recs)-1-k)
	}
	// The records' arguments are spent: their room takes the keys.
	if err := s.insertKeys(ctx, tx, recordKeys(args[:0], s.tenant, recs, runs, ids)); err != nil {
		return nil, err
	}
	return ids, nil
}

// upsertRuns writes the new head and indexes of every run the batch
// appended to, one row each.
func (s *Store) upsertRuns(ctx context.Context, tx *sql.Tx, touched []*batchRun, ids []int64, activeAt int64) error {
	args := make([]any, 0, 11*len(touched))
	var heads []any
	tenant := any(s.tenant)
	for _, br := range touched {
		// Most appends of a busy run change only its head: no source,
		// conclusion or wait, in the same second as the run's last.
		// Updating just the head then leaves runs_active and the other
		// indexes of runs alone, where the upsert would rewrite their
		// entries with the same values.
		if !br.source.Valid && !br.outcome.Valid && br.wait == nil && !br.waiting &&
			br.activeAt.Valid && br.activeAt.Int64 == activeAt {
			if !br.known { // moveKnownHeads moved a remembered one
				heads = append(heads, tenant, br.runText, int64(br.st.head.Seq), br.st.head.Hash[:])
			}
			continue
		}
		ord := sql.NullInt64{}
		if br.outcome.Valid {
			ord = sql.NullInt64{Int64: ids[br.ordRec], Valid: true}
		}
		var awaiting, event, until any
		if w := br.wait; w != nil {
			awaiting, event = string(w.Awaiting), w.Event
			if !w.Until.IsZero() {
				until = formatUntil(w.Until)
			}
		}
		args = append(args, tenant, br.runText, int64(br.st.head.Seq), br.st.head.Hash[:], activeAt,
			br.source, br.outcome, ord, awaiting, event, until)
	}
	if _, err := s.execRows(ctx, tx, qUpsertRun, qUpsertRuns, 11, args); err != nil {
		return fmt.Errorf("update %d runs: %w", len(touched), err)
	}
	if _, err := s.execRows(ctx, tx, qAdvanceHead, qAdvanceHeads, 4, heads); err != nil {
		return fmt.Errorf("update the heads of %d runs: %w", len(heads)/4, err)
	}
	return nil
}
