package postgres

import (
	"strings"

	"github.com/jackc/pgx/v5"
)

// queries holds the SQL of one schema, built once at open.
type queries struct {
	runState                                                   string
	placeholders, lockLeases, runStates                        string
	insertRecord, claimAdmission, admissionHolder              string
	insertRun, updateRun                                       string
	insertRecords, insertRuns, updateRuns                      string
	updateLease, renewLease, releaseLease, abandoned           string
	requestCancel, cancellation                                string
	logNext, logSize, readNodes, writeNodes                    string
	sealRuns                                                   string
	caseRuns                                                   string
	head, records, verifyRun, caseHistory, waiting             string
	byOutcome, countOutcome, admittedAs, forget                string
	recent, recentAfter, recentFrom, recentFromAfter, runsByID string
	positions, chainEpoch                                      string
}

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
		lockLeases: f(`SELECT run, owner, epoch, expires_at, released, clock_timestamp() FROM {S}.leases
			WHERE tenant = $1 AND run = ANY($2::text[]) ORDER BY run FOR UPDATE`),
		// A separate statement from the lock, so that under READ COMMITTED it
		// reads the runs as the locks' previous holders committed them.
		runStates: f(`SELECT run, head_seq, head_hash, outcome, sealed_outcome, leaf, log_index FROM {S}.runs
			WHERE tenant = $1 AND run = ANY($2::text[])`),
		runState: f(`SELECT head_seq, head_hash, outcome, sealed_outcome, leaf, log_index FROM {S}.runs
			WHERE tenant = $1 AND run = $2`),
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
		updateRuns: f(`UPDATE {S}.runs AS r SET head_seq = u.seq, head_hash = u.hash,
				active_at = floor(extract(epoch FROM clock_timestamp()))::bigint,
				source = coalesce(u.source, r.source),
				outcome = coalesce(u.outcome, r.outcome),
				outcome_ord = CASE WHEN u.outcome IS NULL THEN r.outcome_ord ELSE nextval('{Sq}.outcome_ord') END,
				wait_awaiting = u.awaiting, wait_event = u.event, wait_until = u.until
			FROM unnest($2::text[], $3::bigint[], $4::bytea[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[])
				AS u(run, seq, hash, source, outcome, awaiting, event, until)
			WHERE r.tenant = $1 AND r.run = u.run`),
		claimAdmission:  f(`INSERT INTO {S}.admissions(tenant, key, run, claimed_at) VALUES($1, $2, $3, clock_timestamp())`),
		admissionHolder: f(`SELECT run FROM {S}.admissions WHERE tenant = $1 AND key = $2`),
		insertRun: f(`INSERT INTO {S}.runs(tenant, run, head_seq, head_hash, active_at, source, outcome, outcome_ord, wait_awaiting, wait_event, wait_until)
			VALUES($1, $2, $3, $4, floor(extract(epoch FROM clock_timestamp()))::bigint, $5, $6::text,
				CASE WHEN $6::text IS NULL THEN NULL ELSE nextval('{Sq}.outcome_ord') END, $7, $8, $9)`),
		updateRun: f(`UPDATE {S}.runs SET head_seq = $3, head_hash = $4,
				active_at = floor(extract(epoch FROM clock_timestamp()))::bigint,
				source = coalesce($5, source),
				outcome = coalesce($6::text, outcome),
				outcome_ord = CASE WHEN $6::text IS NULL THEN outcome_ord ELSE nextval('{Sq}.outcome_ord') END,
				wait_awaiting = $7, wait_event = $8, wait_until = $9
			WHERE tenant = $1 AND run = $2`),
		updateLease:  f(`UPDATE {S}.leases SET owner = $3, epoch = $4, expires_at = $5, released = false WHERE tenant = $1 AND run = $2`),
		renewLease:   f(`UPDATE {S}.leases SET expires_at = $3 WHERE tenant = $1 AND run = $2`),
		releaseLease: f(`UPDATE {S}.leases SET released = true, owner = '' WHERE tenant = $1 AND run = $2 AND epoch = $3 AND NOT released`),
		abandoned: f(`SELECT l.run FROM {S}.leases l LEFT JOIN {S}.runs r ON r.tenant = l.tenant AND r.run = l.run
			WHERE l.tenant = $1 AND NOT l.released AND l.expires_at <= clock_timestamp() AND r.sealed_outcome IS NULL
			ORDER BY l.expires_at, l.run LIMIT $2`),
		requestCancel: f(`WITH r AS (SELECT 1 FROM {S}.runs WHERE tenant = $1 AND run = $2),
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
			WHERE r.tenant = $1 AND r.run = u.run AND r.sealed_outcome IS NULL AND r.head_hash = u.leaf`),
		logSize:   f(`SELECT coalesce((SELECT size FROM {S}.logs WHERE tenant = $1), 0)`),
		readNodes: f(`SELECT level, idx, hash FROM {S}.log_nodes WHERE tenant = $1 AND (level, idx) IN (SELECT * FROM unnest($2::int[], $3::bigint[]))`),
		// A node rewritten with its own hash stays; with another hash the
		// CASE yields NULL and the NOT NULL constraint fails the seal.
		writeNodes: f(`INSERT INTO {S}.log_nodes AS n (tenant, level, idx, hash)
			SELECT $1, l, i, h FROM unnest($2::int[], $3::bigint[], $4::bytea[]) AS t(l, i, h)
			ON CONFLICT (tenant, level, idx) DO UPDATE SET hash = CASE WHEN n.hash = EXCLUDED.hash THEN n.hash END`),
		caseRuns: f(`SELECT DISTINCT run FROM {S}.records WHERE tenant = $1 AND case_id = $2 AND run > $3 ORDER BY run LIMIT $4`),
		head:     f(`SELECT head_seq, head_hash FROM {S}.runs WHERE tenant = $1 AND run = $2`),
		records: f(`SELECT seq, prev_hash, hash, raw FROM {S}.records WHERE tenant = $1 AND run = $2 AND seq >= $3
			ORDER BY seq LIMIT $4`),
		verifyRun: f(`SELECT head_seq, head_hash, outcome, sealed_outcome, leaf FROM {S}.runs WHERE tenant = $1 AND run = $2`),
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
		runsByID:  f(`SELECT run FROM {S}.runs WHERE tenant = $1 AND run > $2 ORDER BY run LIMIT $3`),
		positions: f(`SELECT run, log_index, leaf FROM {S}.runs WHERE tenant = $1 AND run = ANY($2) AND log_index IS NOT NULL`),
		chainEpoch: f(`SELECT coalesce(max((convert_from(raw, 'UTF8')::jsonb ->> 'epoch')::bigint), 0) FROM {S}.records
			WHERE tenant = $1 AND run = $2`),
	}
}
