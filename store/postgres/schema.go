package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oklog/ulid/v2"

	"github.com/runseal/runseal/store"
)

// migration is one schema step. Steps are applied in order, each once, in
// the transaction that records it; a step is never edited after release,
// only followed by another.
type migration struct {
	description string
	sql         string
}

// migrations is the schema history; SchemaVersion is its length. {S} is the
// quoted schema name.
//
// Identifiers are stored as text with the "C" collation, so that ordering
// by run id is byte order (which is ULID time order) whatever the
// database's locale.
var migrations = []migration{
	{"journal, derived indexes, leases, cancellations, log", `
CREATE TABLE {S}.meta(key text PRIMARY KEY, value text NOT NULL);

CREATE TABLE {S}.records(
	tenant     text COLLATE "C" NOT NULL,
	run        text COLLATE "C" NOT NULL,
	seq        bigint NOT NULL CHECK (seq > 0),
	id         bigint GENERATED ALWAYS AS IDENTITY,
	kind       text NOT NULL,
	case_id    text COLLATE "C",
	effect_key bytea,
	prev_hash  bytea NOT NULL,
	hash       bytea NOT NULL,
	raw        bytea NOT NULL,
	PRIMARY KEY (tenant, run, seq));
-- Exactly-once is this index, not a check in code.
CREATE UNIQUE INDEX records_effect ON {S}.records(tenant, run, effect_key) WHERE kind = 'EffectStarted';
CREATE INDEX records_case ON {S}.records(tenant, case_id, id) WHERE case_id IS NOT NULL;

-- One row per run: its head and every per-run derived index. Updated by
-- every append, so it leaves room on its pages for HOT updates.
CREATE TABLE {S}.runs(
	tenant         text COLLATE "C" NOT NULL,
	run            text COLLATE "C" NOT NULL,
	head_seq       bigint NOT NULL,
	head_hash      bytea NOT NULL,
	active_at      bigint NOT NULL,
	source         text COLLATE "C",
	outcome        text COLLATE "C",
	outcome_ord    bigint,
	wait_awaiting  text,
	wait_event     text,
	wait_until     text COLLATE "C",
	sealed_outcome text,
	sealed_at      timestamptz,
	log_index      bigint,
	leaf           bytea,
	PRIMARY KEY (tenant, run)) WITH (fillfactor = 70);
CREATE INDEX runs_active ON {S}.runs(tenant, active_at DESC, run DESC);
CREATE INDEX runs_source ON {S}.runs(tenant, source, active_at DESC, run DESC) WHERE source IS NOT NULL;
CREATE INDEX runs_outcome ON {S}.runs(tenant, outcome, outcome_ord DESC) WHERE outcome IS NOT NULL;
CREATE INDEX runs_waiting ON {S}.runs(tenant, wait_until, run) WHERE wait_awaiting IS NOT NULL;
-- No two sealed runs of a tenant share a log index.
CREATE UNIQUE INDEX runs_log ON {S}.runs(tenant, log_index) WHERE log_index IS NOT NULL;
CREATE SEQUENCE {S}.outcome_ord;

-- Admission-key uniqueness is this primary key.
CREATE TABLE {S}.admissions(
	tenant     text COLLATE "C" NOT NULL,
	key        text COLLATE "C" NOT NULL,
	run        text COLLATE "C" NOT NULL,
	claimed_at timestamptz NOT NULL,
	PRIMARY KEY (tenant, key));
CREATE INDEX admissions_age ON {S}.admissions(tenant, claimed_at);

-- The lease row is also the run's lock: every write to a run takes it
-- FOR UPDATE first. Epoch 0 (released, expired) means "never leased".
CREATE TABLE {S}.leases(
	tenant     text COLLATE "C" NOT NULL,
	run        text COLLATE "C" NOT NULL,
	owner      text NOT NULL,
	epoch      bigint NOT NULL CHECK (epoch >= 0),
	expires_at timestamptz NOT NULL,
	released   boolean NOT NULL,
	PRIMARY KEY (tenant, run)) WITH (fillfactor = 70);
CREATE INDEX leases_abandoned ON {S}.leases(tenant, expires_at, run) WHERE NOT released;

CREATE TABLE {S}.cancellations(
	tenant text COLLATE "C" NOT NULL,
	run    text COLLATE "C" NOT NULL,
	actor  text NOT NULL,
	basis  text NOT NULL,
	reason text NOT NULL,
	at     timestamptz NOT NULL,
	PRIMARY KEY (tenant, run));

-- The tenant's log size; its row lock serializes the tenant's seals.
CREATE TABLE {S}.logs(tenant text COLLATE "C" PRIMARY KEY, size bigint NOT NULL CHECK (size >= 0));
CREATE TABLE {S}.log_nodes(
	tenant text COLLATE "C" NOT NULL,
	level  integer NOT NULL,
	idx    bigint NOT NULL,
	hash   bytea NOT NULL,
	PRIMARY KEY (tenant, level, idx));
`},
	{"signed checkpoints", `
CREATE TABLE {S}.signed_checkpoints(
	tenant    text COLLATE "C" NOT NULL,
	size      bigint NOT NULL CHECK (size >= 0),
	root      bytea NOT NULL,
	note      bytea NOT NULL,
	signed_at timestamptz NOT NULL,
	PRIMARY KEY (tenant, size));
`},
	{"witness publications, cosignatures, witnessed checkpoints, API tokens", `
CREATE TABLE {S}.publications(
	tenant     text COLLATE "C" NOT NULL,
	witness    text COLLATE "C" NOT NULL,
	size       bigint NOT NULL CHECK (size >= 0),
	attempts   integer NOT NULL,
	next_at    timestamptz NOT NULL,
	last_error text NOT NULL,
	PRIMARY KEY (tenant, witness, size));
CREATE TABLE {S}.cosignatures(
	tenant  text COLLATE "C" NOT NULL,
	witness text COLLATE "C" NOT NULL,
	size    bigint NOT NULL CHECK (size >= 0),
	lines   bytea NOT NULL,
	at      timestamptz NOT NULL,
	PRIMARY KEY (tenant, size, witness));
CREATE TABLE {S}.witness_state(
	tenant        text COLLATE "C" NOT NULL,
	witness       text COLLATE "C" NOT NULL,
	cosigned_size bigint NOT NULL CHECK (cosigned_size >= 0),
	PRIMARY KEY (tenant, witness));
CREATE TABLE {S}.witnessed(
	tenant text COLLATE "C" NOT NULL,
	size   bigint NOT NULL CHECK (size >= 0),
	note   bytea NOT NULL,
	at     timestamptz NOT NULL,
	PRIMARY KEY (tenant, size));
CREATE TABLE {S}.tokens(
	id      text COLLATE "C" PRIMARY KEY,
	tenant  text COLLATE "C" NOT NULL,
	role    text NOT NULL CHECK (role IN ('reader', 'writer')),
	name    text NOT NULL,
	hash    bytea NOT NULL CHECK (length(hash) = 32),
	created timestamptz NOT NULL,
	revoked timestamptz);
`},
	{"disclosure register", `
CREATE TABLE {S}.disclosures(
	tenant text COLLATE "C" NOT NULL,
	id     text COLLATE "C" NOT NULL,
	act    jsonb NOT NULL,
	PRIMARY KEY (tenant, id));
`},
	{"witness alarms", `
CREATE TABLE {S}.witness_alarms(
	tenant   text COLLATE "C" NOT NULL,
	witness  text COLLATE "C" NOT NULL,
	kind     text COLLATE "C" NOT NULL,
	reported bigint NOT NULL CHECK (reported >= 0),
	cosigned bigint NOT NULL CHECK (cosigned >= 0),
	at       timestamptz NOT NULL,
	detail   text NOT NULL,
	PRIMARY KEY (tenant, witness, kind, reported, cosigned));
`},
	{"derived listing rows (derived.go)", derivedRowsSchema},
	{"covering indexes for inclusion proofs (proofindex.go)", proofIndexesSchema},
	{"covering indexes for inclusion proofs packed full (proofindexdense.go)", denseProofIndexesSchema},
	{"the log's leaves by hash (unsealed.go)", leafHashesSchema},
}

// SchemaVersion is the schema this code writes; a newer database is
// refused rather than written by code that does not know its rules.
var SchemaVersion = len(migrations)

// SchemaTooNewError refuses a database migrated by a newer runseal.
type SchemaTooNewError struct {
	Schema string
	Have   int
	Know   int
}

func (e *SchemaTooNewError) Error() string {
	return fmt.Sprintf("journal schema %q is at version %d, newer than this program understands (%d); upgrade runseal", e.Schema, e.Have, e.Know)
}

// migrate brings the schema to SchemaVersion and fixes the log origin, in
// one transaction under an advisory lock, so processes opening one fresh
// database together neither race nor see half a schema.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema, wantOrigin string) (string, error) {
	qs := pgx.Identifier{schema}.Sanitize()
	tx, err := pool.Begin(ctx)
	if err != nil {
		return "", fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('runseal.migrate.' || $1::text, 0))`, schema); err != nil {
		return "", fmt.Errorf("migrate: lock: %w", err)
	}
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS(SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
		return "", fmt.Errorf("migrate: %w", err)
	}
	// CREATE SCHEMA checks the privilege before existence, so an existing
	// schema is not created again (a deployment may forbid it).
	if !exists {
		if _, err := tx.Exec(ctx, `CREATE SCHEMA `+qs); err != nil {
			return "", fmt.Errorf("migrate: create schema %s: %w", schema, err)
		}
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+qs+`.migrations(
		version integer PRIMARY KEY, description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT clock_timestamp())`); err != nil {
		return "", fmt.Errorf("migrate: %w", err)
	}
	var have int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+qs+`.migrations`).Scan(&have); err != nil {
		return "", fmt.Errorf("migrate: read version: %w", err)
	}
	if have > SchemaVersion {
		return "", &SchemaTooNewError{Schema: schema, Have: have, Know: SchemaVersion}
	}
	for v := have + 1; v <= SchemaVersion; v++ {
		m := migrations[v-1]
		if _, err := tx.Exec(ctx, strings.ReplaceAll(m.sql, "{S}", qs)); err != nil {
			return "", fmt.Errorf("migrate to version %d (%s): %w", v, m.description, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+qs+`.migrations(version, description) VALUES($1, $2)`, v, m.description); err != nil {
			return "", fmt.Errorf("migrate: record version %d: %w", v, err)
		}
	}
	var origin string
	err = tx.QueryRow(ctx, `SELECT value FROM `+qs+`.meta WHERE key = 'origin'`).Scan(&origin)
	switch {
	case err == nil:
		if wantOrigin != "" && wantOrigin != origin {
			return "", fmt.Errorf("journal log origin is %q; it cannot become %q", origin, wantOrigin)
		}
	case errors.Is(err, pgx.ErrNoRows):
		origin = wantOrigin
		if origin == "" {
			origin = "runseal/" + strings.ToLower(ulid.Make().String())
		}
		if err := store.ValidateOrigin(origin); err != nil {
			return "", err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+qs+`.meta(key, value) VALUES('origin', $1)`, origin); err != nil {
			return "", fmt.Errorf("record origin: %w", err)
		}
	default:
		return "", fmt.Errorf("read origin: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return "", fmt.Errorf("migrate: commit: %w", err)
	}
	return origin, nil
}
