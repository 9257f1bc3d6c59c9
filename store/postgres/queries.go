package postgres

import (
	"strings"

	"github.com/jackc/pgx/v5"
)

// queries holds the SQL of one schema, built once at open.
type queries struct {
	placeholders, lockLeases, runStates                        string
	placeholder, lockLease, runState                           string
	insertRecord, claimAdmission, admissionHolder              string
	insertRun, updateRun                                       string
	insertRecords, insertRuns, updateRuns                      string
	appendKnown                                                string
	updateLease, renewLease, releaseLease, abandoned           string
	requestCancel, cancellation                                string
	logNext, logSize, readNodes, writeNodes                    string
	sealRuns                                                   string
	caseRuns                                                   string
	head, records, verifyRun, runLeaves, caseHistory, waiting  string
	recordsWithin                                              string
	byOutcome, countOutcome, admittedAs, forget                string
	recent, recentAfter, recentFrom, recentFromAfter, runsByID string
	positions, heads, chainEpoch                               string
}

// Every statement that reaches a run's row by its id goes through the
// primary key, one probe per run, whatever the planner's statistics say.
//
// Written plainly (tenant = $1 AND run = $2, or run = ANY($2), or a join
// against unnest), the planner picks its access path from its estimate of
// the tenant's rows. For a tenant the statistics do not know yet (new, or
// grown since the last ANALYZE) that estimate is one row, and then every
// path that scans the whole tenant costs the same as the primary key
// probe: runs_active (tenant, active_at, run) with run as a filter, or a
// scan of the tenant's rows hashed against the array. PostgreSQL takes
// runs_active, and each append and seal reads all of the tenant's runs.
// Connections keep such plans (pgx prepares every statement), so the cost
// grows with the tenant until statistics and plans are refreshed.
//
// So the statements below never leave the choice open:
//   - A run row is read by a LATERAL subquery, one per id, that asks for
//     the run in a range [id, id] ORDER BY run LIMIT 1. Only the primary
//     key yields rows in run order within a tenant, so every other index
//     would need a sort on top and costs strictly more, however few rows
//     the tenant is thought to have. (run = id would not do: an equality
//     to a constant makes the ORDER BY redundant, and the tie comes back.)
//   - A run row is updated through the ctid that subquery returns (a TID
//     scan), so the update's join has nothing to choose either.
//   - A lease row is locked by a LATERAL subquery per id with run = id FOR
//     UPDATE: the leases' only other index is partial (NOT released) and
//     cannot serve it. Rows are locked in array order, which lockRuns and
//     lockBulk make run-id order.
//
// TestPlans_FreshTenantUsesPrimaryKey EXPLAINs each of them.

// runByID is the FROM-clause subquery that finds the run row whose id is
// the expression id, by the primary key (see above), with cols. A
// condition an update needs of the row goes in and, not in the update's
// WHERE, where an estimate of how many rows match it could make a scan of
// the table look cheaper than the TID probe.
func runByID(cols, id, and string) string {
	if and != "" {
		and = " AND " + and
	}
	return `(SELECT ` + cols + ` FROM {S}.runs WHERE tenant = $1 AND run >= ` + id + ` AND run <= ` + id + and + ` ORDER BY run LIMIT 1)`
}

// runsFromU is the SET clause of a multi-row update of run rows r from
// the unnested arrays u (updateRuns, appendKnown).
const runsFromU = `SET head_seq = u.seq, head_hash = u.hash,
				active_at = floor(extract(epoch FROM clock_timestamp()))::bigint,
				source = coalesce(u.source, r.source),
				outcome = coalesce(u.outcome, r.outcome),
				outcome_ord = CASE WHEN u.outcome IS NULL THEN r.outcome_ord ELSE nextval('{Sq}.outcome_ord') END,
				wait_awaiting = u.awaiting, wait_event = u.event, wait_until = u.until`

func newQueries(schema string) queries {
	s := pgx.Identifier{schema}.Sanitize()
	r := strings.NewReplacer("{S}", s, "{Sq}", strings.ReplaceAll(s, "'", "''"))
	f := func(q string) string { return r.Replace(q) }
	return queries{
		// The lease row exists for every run ever written (epoch 0 until
		// first leased), so there is always a row to lock.
		placeholders: f(`INSERT INTO {S}.leases(tenant, run, owner, epoch, expires_at, released)
			SELECT $1, r, '', 0, 'epoch', true FROM unnest($2::text[]) AS r ON CONFLICT (tenant, run) DO NOTHING`),
		// ORDER BY: the rows are locked in run-id order.
		lockLeases: f(`SELECT l.run, l.owner, l.epoch, l.expires_at, l.released, clock_timestamp() FROM unnest($2::text[]) AS u(run)
			CROSS JOIN LATERAL (SELECT run, owner, epoch, expires_at, released FROM {S}.leases WHERE tenant = $1 AND run = u.run FOR UPDATE) l`),
		// A separate statement from the lock, so that under READ COMMITTED it
		// reads the runs as the locks' previous holders committed them.
		runStates: f(`SELECT r.* FROM unnest($2::text[]) AS u(run)
			CROSS JOIN LATERAL ` + runByID(runStateCols, "u.run", "") + ` r`),
		// The same three for one run ($2 its id), which most writes lock:
		// with scalar parameters PostgreSQL soon keeps a generic plan and
		// stops planning them per call, which with an array it never does
		// (its estimate of an array's length is not the call's).
		placeholder: f(`INSERT INTO {S}.leases(tenant, run, owner, epoch, expires_at, released)
			VALUES ($1, $2, '', 0, 'epoch', true) ON CONFLICT (tenant, run) DO NOTHING`),
		lockLease: f(`SELECT run, owner, epoch, expires_at, released, clock_timestamp() FROM {S}.leases
			WHERE tenant = $1 AND run = $2 FOR UPDATE`),
		runState: f(`SELECT * FROM ` + runByID(runStateCols, "$2::text", "") + ` r`),
		insertRecord: f(`INSERT INTO {S}.records(tenant, run, seq, kind, case_id, effect_key, prev_hash, hash, raw)
			VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9)`),
		// The multi-row forms, for a group: one statement per table. Rows go
		// in in array order, so record ids keep each run's seq order.
		insertRecords: f(`INSERT INTO {S}.records(tenant, run, seq, kind, case_id, effect_key, prev_hash, hash, raw)
			SELECT $1, * FROM unnest($2::text[], $3::bigint[], $4::text[], $5::text[], $6::bytea[], $7::bytea[], $8::bytea[], $9::bytea[])`),
		insertRuns: f(`INSERT INTO {S}.runs(tenant, run, head_seq, head_hash, active_at, source, outcome, outcome_ord, wait_awaiting, wait_event, wait_until)
			SELECT $1, u.run, u.seq, u.hash, floor(extract(epoch FROM clock_timestamp()))::bigint, u.source, u.outcome,
				CASE WHEN u.outcome IS NULL THEN NULL ELSE nextval('{Sq}.outcome_ord') END, u.awaiting, u.event, u.until
			FROM unnest($2::text[], $3::bigint[], $4::bytea[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[])
				AS u(run, seq, hash, source, outcome, awaiting, event, until)`),
		updateRuns: f(`UPDATE {S}.runs AS r ` + runsFromU + `
			FROM unnest($2::text[], $3::bigint[], $4::bytea[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[])
				AS u(run, seq, hash, source, outcome, awaiting, event, until)
				CROSS JOIN LATERAL ` + runByID("ctid AS tid", "u.run", "") + ` k
			WHERE r.ctid = k.tid`),
		// A group of appends to runs whose state the store already knows
		// (see known.go), in one statement: lock each lease row (array
		// order, as lockLeases) and keep the runs whose epoch is the
		// append's; move the head of each of those whose run row still has
		// the expected head and is unsealed, and whose head the log does
		// not hold (unsealed.go); insert the records of the runs
		// moved, in array order. It returns the runs written; a run missing
		// from the answer wrote nothing.
		appendKnown: f(`WITH lk AS MATERIALIZED (
				SELECT l.run FROM unnest($2::text[], $12::bigint[]) AS u(run, epoch)
					CROSS JOIN LATERAL (SELECT run, epoch FROM {S}.leases WHERE tenant = $1 AND run = u.run FOR UPDATE) l
				WHERE l.epoch = u.epoch),
			up AS (UPDATE {S}.runs AS r ` + runsFromU + `
			FROM unnest($2::text[], $3::bigint[], $4::bytea[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::bigint[], $11::bytea[])
				AS u(run, seq, hash, source, outcome, awaiting, event, until, prev_seq, prev_hash)
				CROSS JOIN LATERAL ` + runByID("ctid AS tid", "u.run", "sealed_outcome IS NULL AND head_seq = u.prev_seq AND head_hash = u.prev_hash AND NOT EXISTS "+leafOf("u.prev_hash", "1")) + ` k
			WHERE r.ctid = k.tid AND u.run IN (SELECT run FROM lk)
			RETURNING r.run),
			ins AS (INSERT INTO {S}.records(tenant, run, seq, kind, case_id, effect_key, prev_hash, hash, raw)
				SELECT $1, x.run, x.seq, x.kind, x.case_id, x.effect, x.prev, x.hash, x.raw
				FROM unnest($13::text[], $14::bigint[], $15::text[], $16::text[], $17::bytea[], $18::bytea[], $19::bytea[], $20::bytea[])
					WITH ORDINALITY AS x(run, seq, kind, case_id, effect, prev, hash, raw, ord)
				WHERE x.run IN (SELECT run FROM up)
				ORDER BY x.ord)
			SELECT run FROM up`),
		claimAdmission:  f(`INSERT INTO {S}.admissions(tenant, key, run, claimed_at) VALUES($1, $2, $3, clock_timestamp())`),
		admissionHolder: f(`SELECT run FROM {S}.admissions WHERE tenant = $1 AND key = $2`),
		insertRun: f(`INSERT INTO {S}.runs(tenant, run, head_seq, head_hash, active_at, source, outcome, outcome_ord, wait_awaiting, wait_event, wait_until)
			VALUES($1, $2, $3, $4, floor(extract(epoch FROM clock_timestamp()))::bigint, $5, $6::text,
				CASE WHEN $6::text IS NULL THEN NULL ELSE nextval('{Sq}.outcome_ord') END, $7, $8, $9)`),
		updateRun: f(`UPDATE {S}.runs AS r SET head_seq = $3, head_hash = $4,
				active_at = floor(extract(epoch FROM clock_timestamp()))::bigint,
				source = coalesce($5, r.source),
				outcome = coalesce($6::text, r.outcome),
				outcome_ord = CASE WHEN $6::text IS NULL THEN r.outcome_ord ELSE nextval('{Sq}.outcome_ord') END,
				wait_awaiting = $7, wait_event = $8, wait_until = $9
			FROM ` + runByID("ctid AS tid", "$2::text", "") + ` k
			WHERE r.ctid = k.tid`),
		updateLease:  f(`UPDATE {S}.leases SET owner = $3, epoch = $4, expires_at = $5, released = false WHERE tenant = $1 AND run = $2`),
		renewLease:   f(`UPDATE {S}.leases SET expires_at = $3 WHERE tenant = $1 AND run = $2`),
		releaseLease: f(`UPDATE {S}.leases SET released = true, owner = '' WHERE tenant = $1 AND run = $2 AND epoch = $3 AND NOT released`),
		abandoned: f(`SELECT l.run FROM {S}.leases l LEFT JOIN LATERAL ` + runByID("sealed_outcome", "l.run", "") + ` r ON true
			WHERE l.tenant = $1 AND NOT l.released AND l.expires_at <= clock_timestamp() AND r.sealed_outcome IS NULL
			ORDER BY l.expires_at, l.run LIMIT $2`),
		requestCancel: f(`WITH r AS (SELECT 1 FROM ` + runByID("run", "$2::text", "") + ` k),
			ins AS (INSERT INTO {S}.cancellations(tenant, run, actor, basis, reason, at)
				SELECT $1, $2, $3, $4, $5, clock_timestamp() FROM r ON CONFLICT (tenant, run) DO NOTHING RETURNING 1)
			SELECT EXISTS(SELECT 1 FROM r), EXISTS(SELECT 1 FROM ins)`),
		cancellation: f(`SELECT actor, basis, reason, at FROM {S}.cancellations WHERE tenant = $1 AND run = $2`),
		// Adding n to the tenant's row takes its lock until commit: groups of
		// seals of a tenant take their runs of indexes one group at a time,
		// and an aborted group gives its indexes back with its rollback.
		logNext: f(`INSERT INTO {S}.logs AS l (tenant, size) VALUES($1, $2::bigint)
			ON CONFLICT (tenant) DO UPDATE SET size = l.size + $2::bigint RETURNING size - $2::bigint`),
		// The multi-row form: the group's seals in one statement, each run
		// matched by its primary key.
		sealRuns: f(`UPDATE {S}.runs AS r SET sealed_outcome = u.outcome, sealed_at = clock_timestamp(), log_index = u.idx, leaf = r.head_hash
			FROM unnest($2::text[], $3::text[], $4::bigint[], $5::bytea[]) AS u(run, outcome, idx, leaf)
				CROSS JOIN LATERAL ` + runByID("ctid AS tid", "u.run", "sealed_outcome IS NULL AND head_hash = u.leaf") + ` k
			WHERE r.ctid = k.tid`),
		logSize:   f(`SELECT coalesce((SELECT size FROM {S}.logs WHERE tenant = $1), 0)`),
		readNodes: f(`SELECT level, idx, hash FROM {S}.log_nodes WHERE tenant = $1 AND (level, idx) IN (SELECT * FROM unnest($2::int[], $3::bigint[]))`),
		// A node rewritten with its own hash stays; with another hash the
		// CASE yields NULL and the NOT NULL constraint fails the seal.
		writeNodes: f(`INSERT INTO {S}.log_nodes AS n (tenant, level, idx, hash)
			SELECT $1, l, i, h FROM unnest($2::int[], $3::bigint[], $4::bytea[]) AS t(l, i, h)
			ON CONFLICT (tenant, level, idx) DO UPDATE SET hash = CASE WHEN n.hash = EXCLUDED.hash THEN n.hash END`),
		caseRuns: f(`SELECT DISTINCT run FROM {S}.records WHERE tenant = $1 AND case_id = $2 AND run > $3 ORDER BY run LIMIT $4`),
		head:     f(`SELECT head_seq, head_hash FROM ` + runByID("head_seq, head_hash", "$2::text", "") + ` r`),
		records: f(`SELECT seq, prev_hash, hash, raw FROM {S}.records WHERE tenant = $1 AND run = $2 AND seq >= $3
			ORDER BY seq LIMIT $4`),
		// A run's records from a seq as far as a byte bound: each row
		// carries the bytes of the rows before it (octet_length reads a
		// TOASTed body's size, not the body), and only the rows that start
		// within the bound are sent, and the first two (a first record over
		// the bound is still answered, and the second is then the one that
		// crosses it), so the first row that crosses it is the last one read.
		recordsWithin: f(`SELECT seq, prev_hash, hash, raw FROM (
			SELECT seq, prev_hash, hash, raw, sum(octet_length(raw)) OVER (ORDER BY seq ROWS UNBOUNDED PRECEDING) - octet_length(raw) AS before
			FROM {S}.records WHERE tenant = $1 AND run = $2 AND seq >= $3 ORDER BY seq LIMIT $4) r
			WHERE before <= $5 OR seq <= $3 + 1 ORDER BY seq`),
		verifyRun: f(`SELECT * FROM ` + runByID("head_seq, head_hash, outcome, sealed_outcome, leaf, log_index", "$2::text", "") + ` r`),
		runLeaves: f(`SELECT r.seq, n.idx FROM {S}.records r
			JOIN {S}.log_nodes n ON n.tenant = r.tenant AND n.level = 0 AND n.hash = sha256('\x00'::bytea || r.hash)
			WHERE r.tenant = $1 AND r.run = $2`),
		caseHistory: f(`SELECT run, seq, prev_hash, hash, raw FROM {S}.records WHERE tenant = $1 AND case_id = $2
			ORDER BY id LIMIT $3`),
		waiting: f(`SELECT run, wait_awaiting, coalesce(wait_event, ''), wait_until FROM {S}.runs
			WHERE tenant = $1 AND wait_awaiting IS NOT NULL ORDER BY wait_until NULLS LAST, run LIMIT $2`),
		byOutcome:    f(`SELECT run FROM {S}.runs WHERE tenant = $1 AND outcome = $2 ORDER BY outcome_ord DESC LIMIT $3`),
		countOutcome: f(`SELECT run FROM {S}.runs WHERE tenant = $1 AND outcome = $2`),
		admittedAs:   f(`SELECT run FROM {S}.admissions WHERE tenant = $1 AND key = $2`),
		forget:       f(`DELETE FROM {S}.admissions WHERE tenant = $1 AND claimed_at < $2`),
		recent:       f(`SELECT run, active_at FROM {S}.runs WHERE tenant = $1 ORDER BY active_at DESC, run DESC LIMIT $2`),
		recentAfter: f(`SELECT run, active_at FROM {S}.runs WHERE tenant = $1 AND (active_at, run) < ($2, $3)
			ORDER BY active_at DESC, run DESC LIMIT $4`),
		recentFrom: f(`SELECT run, active_at FROM {S}.runs WHERE tenant = $1 AND source = $2
			ORDER BY active_at DESC, run DESC LIMIT $3`),
		recentFromAfter: f(`SELECT run, active_at FROM {S}.runs WHERE tenant = $1 AND source = $2 AND (active_at, run) < ($3, $4)
			ORDER BY active_at DESC, run DESC LIMIT $5`),
		runsByID: f(`SELECT run FROM {S}.runs WHERE tenant = $1 AND run > $2 ORDER BY run LIMIT $3`),
		positions: f(`SELECT r.* FROM unnest($2::text[]) AS u(run)
			CROSS JOIN LATERAL ` + runByID("run, log_index, leaf", "u.run", "") + ` r WHERE r.log_index IS NOT NULL`),
		heads: f(`SELECT r.* FROM unnest($2::text[]) AS u(run)
			CROSS JOIN LATERAL ` + runByID("run, head_seq, head_hash", "u.run", "") + ` r`),
		chainEpoch: f(`SELECT coalesce(max((convert_from(raw, 'UTF8')::jsonb ->> 'epoch')::bigint), 0) FROM {S}.records
			WHERE tenant = $1 AND run = $2`),
	}
}
