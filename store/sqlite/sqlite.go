// Package sqlite is the embedded default journal backend: one SQLite file in
// WAL mode with synchronous=FULL, so an append that returned is durable.
//
// Every write goes through a single writer goroutine that groups concurrent
// callers into one transaction and one fsync (group commit). Each member of a
// group runs inside its own SAVEPOINT, so a member refused for a domain
// reason (fenced, duplicate effect, sealed run, ...) rolls back alone and the
// others commit. Reads use a separate pool of read-only connections and see
// committed snapshots only.
//
// With Options.PipelineFlush the writer instead commits with
// synchronous=NORMAL and a flusher goroutine fdatasyncs the WAL behind it,
// so one group's flush overlaps the next group's execution. Durability is
// unchanged for anyone outside: every answer waits for a flush that began
// after its transaction ended, every row a read hands out waits until the
// writer's transactions begun before the read's snapshot are flushed, and
// a failed flush stops the open file (ErrNotDurable). durable.go states
// the crash-safety argument against SQLite's WAL rules.
//
// All rows are scoped by tenant; one Store handle serves one tenant. The file
// can hold several tenants: ForTenant gives each a view of one open handle,
// so that they share its writer rather than contend for SQLite's write lock.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/runseal/runseal/internal/groupcommit"
	"github.com/runseal/runseal/store"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// SchemaVersion is the schema this code writes; a newer file is refused.
// Version 2 added the witness outbox, tokens and the disclosure register.
// Every statement of the schema is idempotent, so opening a version 1 file
// creates whatever tables it lacks. Version 3 added the disclosure
// register's signed_by column (the key that signed each package); version
// 4 the derived listing rows (derived.go); version 5 moved the records'
// (tenant, run, seq) key out of the records table into record_keys and
// record_keys_hot (keys.go), rebuilding the table of an older file;
// version 6 made record_keys_hot a table in the order of its records' ids
// instead of keyed by (tenant, run, seq), copying the hot keys of an older
// file across (migrateHotKeys); version 7 the index of the log's leaves by
// hash (log_leaf_hashes, unsealed.go), built over an older file's leaves.
const SchemaVersion = 7

// Options configures a Store. The zero value is valid.
type Options struct {
	// Tenant whose rows this handle reaches; "default" when empty.
	Tenant string
	// Origin names the log in checkpoints. It is fixed when the file is
	// created (a fresh "runseal/<ulid>" when empty) and must match after.
	Origin string
	// Now is the store's clock, which judges lease expiry and stamps
	// activity; time.Now when nil. Tests inject a fake.
	Now func() time.Time
	// MaxGroup caps how many writes share one transaction; 256 when zero.
	MaxGroup int
	// Logger receives operational logs; slog.Default() when nil.
	Logger *slog.Logger
	// NodeCacheBytes bounds each tenant's in-memory cache of upper log
	// nodes, which proofs and roots read first: DefaultNodeCacheBytes when
	// zero; below 8 KiB (log.CacheNothing) nothing is cached.
	NodeCacheBytes int64

	// PipelineFlush overlaps the fsync of one group's commit with the
	// execution of the next (see walSync): the writer commits with
	// synchronous=NORMAL and a flusher fdatasyncs the WAL behind it; every
	// answer, and every row a read hands out, waits for a flush that began
	// after the commit, so what a caller learns is as durable as under
	// synchronous=FULL. Off by default until a quiet machine judges it
	// ("journal bench --pipelined" measures both in the same run): on the
	// busy 2-core machine it was built on (load 15-28) it came out ahead at
	// 64x1 and 8x16 and behind at 8x1, where handing every answer to the
	// flusher costs each caller a goroutine switch, and in a closed loop a
	// caller is in one group at a time, so only two cohorts can overlap.
	// A file not in WAL mode ignores it.
	PipelineFlush bool
	// NoWarm keeps Open from reading the proofs' pages in the background
	// (warm.go), for a process that serves no proofs.
	NoWarm bool

	// oneByOne writes every append alone in its savepoint instead of
	// batching neighbours in a group (tests hold both paths to the
	// contract).
	oneByOne bool
	// mergeKeysAt overrides the constant of that name (keys.go), so that
	// tests can keep the keys of a few records split between both tables.
	mergeKeysAt int
	// warmHold, if set, is called by the warm before each of its walks
	// with the warm's context, the connection it walks on and the b-tree
	// it is about to walk, so that a test can hold it there and see what
	// it reads and how.
	warmHold func(ctx context.Context, conn *sql.Conn, btree string)
}

// Store is the SQLite journal, as one tenant sees it. It is safe for
// concurrent use. ForTenant gives other tenants' views of the same open
// file, which share its connections and its one writer.
type Store struct {
	*file
	tenant  string
	release sync.Once // this handle's reference to file, dropped by Close
}

// file is one open journal file: the writer, the readers and the group
// commit, shared by every tenant's Store over it. One writer per file is
// what SQLite wants: two would contend for its write lock.
type file struct {
	wdb    *sql.DB // exactly one connection: the writer
	rdb    *sql.DB // read-only pool
	origin string
	now    func() time.Time
	log    *slog.Logger
	refs   atomic.Int64 // open Store handles over this file

	proofs proofReads // the log's read paths' statements and node caches; see proofread.go
	warm   warmState  // reads the proofs' pages in after Open; see warm.go

	tokenOnce sync.Once // prepares tokenStmt on the read pool, on first use
	tokenStmt *sql.Stmt
	tokenErr  error

	wal       *walSync               // flushes the WAL behind the writer; nil: synchronous=FULL does
	hot       stmts                  // prepared on the writer connection; see stmts.go
	reads     stmts                  // prepared on the read pool; see stmts.go
	known     map[string]knownRun    // the writer's memory of the runs it appended to last; see known.go
	hotKeys   int                    // the writer's estimate of the rows in record_keys_hot; see keys.go
	mergeAt   int                    // merge the hot keys when hotKeys reaches it
	wtx       atomic.Pointer[sql.Tx] // the writer's open transaction, for hotStmt
	writes    *groupcommit.Queue[groupcommit.Work]
	closeOnce sync.Once
}

var (
	_ store.Journal          = (*Store)(nil)
	_ store.CheckpointStore  = (*Store)(nil)
	_ store.PublicationStore = (*Store)(nil)
	_ store.TokenStore       = (*Store)(nil)
)

// Open opens (creating if needed) the journal file at path.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, &store.InvalidArgumentError{Field: "path", Detail: fmt.Sprintf("%q is empty or contains '?' or '#'", path)}
	}
	tenant := opts.Tenant
	if tenant == "" {
		tenant = store.DefaultTenant
	}
	if err := store.ValidateTenant(tenant); err != nil {
		return nil, err
	}
	base := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)"
	// The writer keeps statement journals (a multi-row statement's undo
	// log inside a transaction) in memory: they never outlive the
	// statement, and writing them to a temporary file costs the single
	// writer system calls for nothing durable.
	//
	// It checkpoints the WAL into the file every 4000 pages rather than
	// SQLite's 1000. With N appenders on N runs every commit rewrites about
	// N leaf pages of the records' (tenant, run, seq) key, and a checkpoint
	// copies a page once however often the WAL holds it: measured at 64
	// runs, the checkpoints' bytes fell by a third (16 records an append)
	// to a half (1 record), and their fsyncs of the file to a quarter. The
	// WAL stays within one 4096-frame wal-index block (16 MiB at 4 KiB
	// pages). Durability is the WAL's and is unchanged.
	wdb, err := sql.Open("sqlite", base+"&_pragma=temp_store(2)&_pragma=wal_autocheckpoint(4000)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("open journal %s: %w", path, err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	if err := migrate(ctx, wdb); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("open journal %s: %w", path, err)
	}
	origin, err := fixOrigin(ctx, wdb, opts.Origin)
	if err != nil {
		wdb.Close()
		return nil, fmt.Errorf("open journal %s: %w", path, err)
	}
	var ws *walSync
	if opts.PipelineFlush {
		if ws, err = pipelineDurability(ctx, wdb, path); err != nil {
			wdb.Close()
			return nil, fmt.Errorf("open journal %s: %w", path, err)
		}
	}
	readDSN := base + "&_pragma=query_only(1)&_pragma=mmap_size(1073741824)"
	var rdb *sql.DB
	if ws != nil {
		rdb = openReadPool(readDSN, ws.awaitDurable)
	} else if rdb, err = sql.Open("sqlite", readDSN); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("open journal %s: %w", path, err)
	}
	rdb.SetMaxOpenConns(8)
	rdb.SetMaxIdleConns(8)
	s := &Store{tenant: tenant, file: &file{
		wdb: wdb, rdb: rdb, wal: ws, origin: origin,
		now: opts.Now, log: opts.Logger,
		proofs: proofReads{cacheBytes: opts.NodeCacheBytes},
	}}
	s.refs.Store(1)
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.mergeAt = opts.mergeKeysAt; s.mergeAt <= 0 {
		s.mergeAt = mergeKeysAt
	}
	// The count of hot keys goes on from the table's: from 0, each reopen
	// would let up to mergeAt-1 more keys gather before the next merge.
	err = wdb.QueryRowContext(ctx, qCountHotKey).Scan(&s.hotKeys)
	if err == nil {
		err = s.prepareHot(ctx)
	}
	if err != nil {
		rdb.Close()
		if ws != nil {
			ws.close()
		}
		wdb.Close()
		return nil, fmt.Errorf("open journal %s: %w", path, err)
	}
	s.startWriter(opts.MaxGroup, !opts.oneByOne)
	s.startWarm(opts)
	return s, nil
}

// Close releases this handle. The last handle of a file to close stops
// the writer after the writes already queued and closes the file.
func (s *Store) Close() error {
	last := false
	s.release.Do(func() { last = s.refs.Add(-1) == 0 })
	if !last {
		return nil
	}
	var err error
	s.closeOnce.Do(func() {
		s.stopWarm()
		s.closeWriter()
		if s.wal != nil {
			s.wal.close()
		}
		// Synchronise with a TokenByID that prepared the statement, and
		// keep any later one from preparing it on a closed pool.
		s.tokenOnce.Do(func() { s.tokenErr = store.ErrClosed })
		var stmtErr error
		if s.tokenStmt != nil {
			stmtErr = s.tokenStmt.Close()
		}
		err = errors.Join(s.closeHot(), stmtErr, s.closeProofReads(), s.rdb.Close(), s.wdb.Close())
	})
	return err
}

// ForTenant returns tenant's view of the same open file: its own rows, the
// shared connections and writer, so that the writes of every tenant of a
// file are grouped into one transaction and one fsync. Each view is closed
// on its own; the file closes with the last of them.
func (s *Store) ForTenant(tenant string) (*Store, error) {
	if tenant == "" {
		tenant = store.DefaultTenant
	}
	if err := store.ValidateTenant(tenant); err != nil {
		return nil, err
	}
	for {
		n := s.refs.Load()
		if n == 0 {
			return nil, store.ErrClosed
		}
		if s.refs.CompareAndSwap(n, n+1) {
			return &Store{file: s.file, tenant: tenant}, nil
		}
	}
}

// Tenant implements store.Journal.
func (s *Store) Tenant() string { return s.tenant }

// Origin is the checkpoint origin of this tenant's log.
func (s *Store) Origin() string {
	if s.tenant == store.DefaultTenant {
		return s.origin
	}
	return s.origin + "/" + s.tenant
}

// IsShared is false: the file has one writer and cannot be shared by two
// plane instances on different machines.
func (s *Store) IsShared() bool { return false }

// Seals is false: this store writes records exactly as it is handed them.
func (s *Store) Seals() bool { return false }

const schema = `
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
` + recordsTable + `CREATE TABLE IF NOT EXISTS record_keys(
	tenant TEXT NOT NULL, run TEXT NOT NULL, seq INTEGER NOT NULL, id INTEGER NOT NULL, n INTEGER NOT NULL,
	PRIMARY KEY(tenant, run, seq)) STRICT, WITHOUT ROWID;
` + hotKeysTable + recordIndexes + `CREATE TABLE IF NOT EXISTS runs(
	tenant TEXT NOT NULL, run TEXT NOT NULL,
	head_seq INTEGER NOT NULL, head_hash BLOB NOT NULL,
	active_at INTEGER NOT NULL,
	source TEXT,
	outcome TEXT, outcome_ord INTEGER,
	wait_awaiting TEXT, wait_event TEXT, wait_until TEXT,
	sealed_outcome TEXT, sealed_at INTEGER, log_index INTEGER, leaf BLOB,
	PRIMARY KEY(tenant, run)) STRICT, WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS runs_active ON runs(tenant, active_at DESC, run DESC);
CREATE INDEX IF NOT EXISTS runs_source ON runs(tenant, source, active_at DESC, run DESC) WHERE source IS NOT NULL;
CREATE INDEX IF NOT EXISTS runs_outcome ON runs(tenant, outcome, outcome_ord DESC) WHERE outcome IS NOT NULL;
CREATE INDEX IF NOT EXISTS runs_waiting ON runs(tenant, wait_until IS NULL, wait_until, run) WHERE wait_awaiting IS NOT NULL;
CREATE UNIQUE INDEX IF NOT EXISTS runs_log ON runs(tenant, log_index) WHERE log_index IS NOT NULL;
CREATE TABLE IF NOT EXISTS admissions(
	tenant TEXT NOT NULL, key TEXT NOT NULL, run TEXT NOT NULL, claimed_at INTEGER NOT NULL,
	PRIMARY KEY(tenant, key)) STRICT, WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS admissions_age ON admissions(tenant, claimed_at);
CREATE TABLE IF NOT EXISTS leases(
	tenant TEXT NOT NULL, run TEXT NOT NULL, owner TEXT NOT NULL, epoch INTEGER NOT NULL,
	expires_at INTEGER NOT NULL, released INTEGER NOT NULL,
	PRIMARY KEY(tenant, run)) STRICT, WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS leases_abandoned ON leases(tenant, expires_at, run) WHERE released = 0;
CREATE TABLE IF NOT EXISTS cancellations(
	tenant TEXT NOT NULL, run TEXT NOT NULL, actor TEXT NOT NULL, basis TEXT NOT NULL,
	reason TEXT NOT NULL, at INTEGER NOT NULL,
	PRIMARY KEY(tenant, run)) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS logs(tenant TEXT PRIMARY KEY, size INTEGER NOT NULL) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS signed_checkpoints(
	tenant TEXT NOT NULL, size INTEGER NOT NULL, root BLOB NOT NULL, note BLOB NOT NULL, signed_at INTEGER NOT NULL,
	PRIMARY KEY(tenant, size)) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS publications(
	tenant TEXT NOT NULL, witness TEXT NOT NULL, size INTEGER NOT NULL,
	attempts INTEGER NOT NULL, next_at INTEGER NOT NULL, last_error TEXT NOT NULL,
	PRIMARY KEY(tenant, witness, size)) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS cosignatures(
	tenant TEXT NOT NULL, witness TEXT NOT NULL, size INTEGER NOT NULL, lines BLOB NOT NULL, at INTEGER NOT NULL,
	PRIMARY KEY(tenant, size, witness)) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS witness_state(
	tenant TEXT NOT NULL, witness TEXT NOT NULL, cosigned_size INTEGER NOT NULL,
	PRIMARY KEY(tenant, witness)) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS witness_alarms(
	tenant TEXT NOT NULL, witness TEXT NOT NULL, kind TEXT NOT NULL, reported INTEGER NOT NULL, cosigned INTEGER NOT NULL,
	at INTEGER NOT NULL, detail TEXT NOT NULL,
	PRIMARY KEY(tenant, witness, kind, reported, cosigned)) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS witnessed(
	tenant TEXT NOT NULL, size INTEGER NOT NULL, note BLOB NOT NULL, at INTEGER NOT NULL,
	PRIMARY KEY(tenant, size)) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tokens(
	id TEXT PRIMARY KEY, tenant TEXT NOT NULL, role TEXT NOT NULL, name TEXT NOT NULL,
	hash BLOB NOT NULL, created INTEGER NOT NULL, revoked INTEGER) STRICT;
CREATE TABLE IF NOT EXISTS log_nodes(
	tenant TEXT NOT NULL, level INTEGER NOT NULL, idx INTEGER NOT NULL, hash BLOB NOT NULL,
	PRIMARY KEY(tenant, level, idx)) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS disclosures(
	tenant TEXT NOT NULL, id TEXT NOT NULL, at INTEGER NOT NULL,
	actor TEXT NOT NULL, basis TEXT NOT NULL, recipient TEXT NOT NULL,
	runs TEXT NOT NULL, cases TEXT NOT NULL,
	origin TEXT NOT NULL, size INTEGER NOT NULL, root BLOB NOT NULL,
	package BLOB NOT NULL, bytes INTEGER NOT NULL,
	runs_carried INTEGER NOT NULL, sealed INTEGER NOT NULL, records INTEGER NOT NULL,
	signed_by TEXT NOT NULL DEFAULT '',
	PRIMARY KEY(tenant, id)) STRICT, WITHOUT ROWID;
`

// recordsTable holds every record; keys.go says how one is found.
const recordsTable = `
CREATE TABLE IF NOT EXISTS records(
	id INTEGER PRIMARY KEY,
	tenant TEXT NOT NULL, run TEXT NOT NULL, seq INTEGER NOT NULL,
	kind TEXT NOT NULL, case_id TEXT, effect_key BLOB,
	prev_hash BLOB NOT NULL, hash BLOB NOT NULL, raw BLOB NOT NULL) STRICT;
`

// recordIndexes are the records table's own indexes; a rebuild of the
// table (migrateRecordKeys) makes them again.
const recordIndexes = `
CREATE UNIQUE INDEX IF NOT EXISTS records_effect ON records(tenant, run, effect_key) WHERE kind = 'EffectStarted';
CREATE INDEX IF NOT EXISTS records_case ON records(tenant, case_id, id) WHERE case_id IS NOT NULL;
`

func migrate(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT`); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	var v int
	err = tx.QueryRowContext(ctx, `SELECT CAST(value AS INTEGER) FROM meta WHERE key='schema'`).Scan(&v)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return fmt.Errorf("read schema version: %w", err)
	case v > SchemaVersion:
		return fmt.Errorf("journal schema version %d is newer than this program understands (%d); upgrade runseal", v, SchemaVersion)
	case v == SchemaVersion:
		return tx.Commit()
	}
	if _, err := tx.ExecContext(ctx, schema+derivedRowsSchema+leafIndex); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	// A version 2 file's register lacks the column CREATE TABLE IF NOT
	// EXISTS would not add.
	var hasSignedBy int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('disclosures') WHERE name='signed_by'`).Scan(&hasSignedBy); err != nil {
		return fmt.Errorf("read schema: %w", err)
	}
	if hasSignedBy == 0 {
		if _, err := tx.ExecContext(ctx, `ALTER TABLE disclosures ADD COLUMN signed_by TEXT NOT NULL DEFAULT ''`); err != nil {
			return fmt.Errorf("migrate schema to version 3: %w", err)
		}
	}
	if err := migrateRecordKeys(ctx, tx); err != nil {
		return fmt.Errorf("migrate schema to version 5: %w", err)
	}
	if err := migrateHotKeys(ctx, tx); err != nil {
		return fmt.Errorf("migrate schema to version 6: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO meta(key, value) VALUES('schema', ?)`, fmt.Sprint(SchemaVersion)); err != nil {
		return fmt.Errorf("record schema version: %w", err)
	}
	return tx.Commit()
}

func fixOrigin(ctx context.Context, db *sql.DB, want string) (string, error) {
	var have string
	err := db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key='origin'`).Scan(&have)
	switch {
	case err == nil:
		if want != "" && want != have {
			return "", fmt.Errorf("journal log origin is %q; it cannot become %q", have, want)
		}
		return have, nil
	case !errors.Is(err, sql.ErrNoRows):
		return "", fmt.Errorf("read origin: %w", err)
	}
	if want == "" {
		want = "runseal/" + strings.ToLower(ulid.Make().String())
	}
	if err := store.ValidateOrigin(want); err != nil {
		return "", err
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES('origin', ?)`, want); err != nil {
		return "", fmt.Errorf("record origin: %w", err)
	}
	return want, nil
}
