package witness

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/runseal/runseal/internal/groupcommit"
)

// StoreSchemaVersion is the schema this code writes; a file with another
// version is refused rather than guessed at.
const StoreSchemaVersion = 1

// ErrNoState reports a state file that does not exist when StoreOptions.Create
// is false: every command but "witness init" must find an existing file, so
// a mistyped path never starts a witness with an empty memory.
var ErrNoState = errors.New("no witness state file")

// Errors of the operator's log management. They wrap no protocol sentinel:
// they are answers to an operator, not to a log.
var (
	// ErrLogExists reports AddLog of an origin the witness already has.
	// Logs are never removed, so the answer never changes.
	ErrLogExists = errors.New("log already exists")

	// ErrOwnName reports a log origin equal to one of the witness's own
	// cosigner names. Its cosignatures would then be indistinguishable
	// from a log signature of that name.
	ErrOwnName = errors.New("origin is the witness's own name")

	// ErrBadLogKey reports a log verifier key that is malformed or not a
	// plain Ed25519 (type 0x01) note key.
	ErrBadLogKey = errors.New("invalid log key")

	// ErrKeyExists reports AddKey of a key the log already has.
	ErrKeyExists = errors.New("key already configured for this log")

	// ErrNoSuchKey reports DelKey of a key the log does not have.
	ErrNoSuchKey = errors.New("key not configured for this log")

	// ErrKeyChange reports an import whose list gives a known log other
	// keys than the witness has. The witness keeps its keys unless the
	// import is forced: a silent key change would let whoever controls
	// the list take over a log. The error is a *KeyChangeError.
	ErrKeyChange = errors.New("log list changes the keys of a known log")

	// ErrInvalidLimit reports a qpd or burst outside 1..2^31-1.
	ErrInvalidLimit = errors.New("invalid rate limit")
)

// MaxQPD is the largest daily quota a log may have: the witness-network log
// list allows 1 to 2^31-1, and a limit stored as that stays exact in every
// integer type on the way.
const MaxQPD = 1<<31 - 1

// StoreOptions configures OpenStore. The zero value opens an existing file.
type StoreOptions struct {
	// Create allows OpenStore to create a missing file; otherwise a
	// missing file is ErrNoState.
	Create bool
	// MaxGroup caps how many writes share one transaction and one fsync;
	// 256 when zero.
	MaxGroup int
	// Now is the clock stamping added_at and evidence; time.Now when nil.
	Now func() time.Time
	// Logger receives operational logs; slog.Default() when nil.
	Logger *slog.Logger
}

// A Store is a witness's durable state in one SQLite file: the logs it
// witnesses with their keys and rate limits, the latest checkpoint it
// cosigned for each, the names it cosigns as, and the evidence of
// misbehaviour it refused. It is safe for concurrent use, including by
// several processes on one file (an operator's admin command beside a
// running server).
//
// Every write goes through one writer goroutine that groups concurrent
// writes into one transaction and one fsync (WAL, synchronous=FULL), each in
// its own savepoint: a write refused for a reason of its own rolls back
// alone, and a write that returned is on disk.
//
// A log's state is never deleted and never moves back: the schema refuses,
// with triggers, deleting a log, lowering its size, or changing the root of
// the size it holds. The code above checks all of this first; the triggers
// make a bug there fail loudly instead of cosigning a fork.
type Store struct {
	wdb *sql.DB // exactly one connection: the writer
	rdb *sql.DB // read-only pool

	now func() time.Time
	log *slog.Logger

	writes    *groupcommit.Queue[groupcommit.Work]
	maxGroup  int
	closeOnce sync.Once

	// groupHook, if set before the first write, is told the size and
	// duration of every committed group (metrics).
	groupHook func(n int, d time.Duration)

	// Statements of the add-checkpoint path, prepared once on the writer's
	// connection: at thousands of writes a second, parsing SQL again for
	// each would cost the single writer more than the writes.
	savepoint, release, rollbackTo, keyExists, casUpdate, casUpdateKey *sql.Stmt

	// logRow is the configuration read of the add-checkpoint path, on
	// the reader pool (database/sql prepares it on each reader once), and
	// configGen the read of the configuration generation.
	logRow, configGen *sql.Stmt
}

// prepare prepares the writer's hot statements.
func (s *Store) prepare(ctx context.Context) error {
	for _, p := range []struct {
		dst **sql.Stmt
		q   string
	}{
		{&s.savepoint, "SAVEPOINT member"},
		{&s.release, "RELEASE member"},
		{&s.rollbackTo, "ROLLBACK TO member"},
		{&s.keyExists, "SELECT EXISTS(SELECT 1 FROM log_keys WHERE origin = ? AND vkey = ?)"},
		{&s.casUpdate, `UPDATE logs SET size = ?, root = ?, note = ?, cosigned_at = ?
			WHERE origin = ? AND size = ? AND root = ?`},
		{&s.casUpdateKey, `UPDATE logs SET size = ?, root = ?, note = ?, cosigned_at = ?
			WHERE origin = ? AND size = ? AND root = ?
			AND EXISTS(SELECT 1 FROM log_keys WHERE origin = ? AND vkey = ?)`},
	} {
		st, err := s.wdb.PrepareContext(ctx, p.q)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", p.q, err)
		}
		*p.dst = st
	}
	var err error
	s.logRow, err = s.rdb.PrepareContext(ctx, `SELECT l.qpd, l.burst, k.vkey FROM logs l
		LEFT JOIN log_keys k ON k.origin = l.origin WHERE l.origin = ? ORDER BY k.vkey`)
	if err != nil {
		return err
	}
	s.configGen, err = s.rdb.PrepareContext(ctx, "SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'config_generation'")
	return err
}

const storeSchema = `
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
CREATE TABLE witness_names(name TEXT PRIMARY KEY) STRICT;
CREATE TABLE logs(
	origin TEXT PRIMARY KEY,
	origin_hash TEXT NOT NULL UNIQUE,
	size INTEGER NOT NULL CHECK(size >= 0),
	root BLOB NOT NULL CHECK(length(root) = 32),
	note BLOB,
	cosigned_at INTEGER,
	qpd INTEGER NOT NULL CHECK(qpd BETWEEN 1 AND 2147483647),
	burst INTEGER NOT NULL CHECK(burst BETWEEN 1 AND 2147483647),
	contact TEXT NOT NULL,
	added_at INTEGER NOT NULL) STRICT;
CREATE TABLE log_keys(
	origin TEXT NOT NULL REFERENCES logs(origin),
	vkey TEXT NOT NULL,
	added_at INTEGER NOT NULL,
	PRIMARY KEY(origin, vkey)) STRICT, WITHOUT ROWID;
CREATE TABLE evidence(
	id INTEGER PRIMARY KEY,
	origin TEXT NOT NULL REFERENCES logs(origin),
	kind TEXT NOT NULL,
	size INTEGER NOT NULL,
	root BLOB NOT NULL,
	note BLOB NOT NULL,
	known_size INTEGER NOT NULL,
	known_root BLOB NOT NULL,
	known_note BLOB,
	proof BLOB NOT NULL,
	first_seen INTEGER NOT NULL,
	last_seen INTEGER NOT NULL,
	count INTEGER NOT NULL,
	UNIQUE(origin, kind, size, root, known_size)) STRICT;
CREATE TRIGGER logs_never_deleted BEFORE DELETE ON logs
BEGIN SELECT RAISE(ABORT, 'witness: a log''s state is never deleted'); END;
CREATE TRIGGER logs_never_back BEFORE UPDATE OF size, root ON logs
WHEN NEW.size < OLD.size OR (NEW.size = OLD.size AND NEW.root IS NOT OLD.root)
BEGIN SELECT RAISE(ABORT, 'witness: refusing to move a log back or to another root of its size'); END;
CREATE TRIGGER logs_origin_fixed BEFORE UPDATE OF origin, origin_hash ON logs
BEGIN SELECT RAISE(ABORT, 'witness: a log''s origin never changes'); END;
CREATE TRIGGER logs_not_own_name BEFORE INSERT ON logs
WHEN EXISTS(SELECT 1 FROM witness_names WHERE name = NEW.origin)
BEGIN SELECT RAISE(ABORT, 'witness: origin is the witness''s own name'); END;
CREATE TRIGGER names_not_log BEFORE INSERT ON witness_names
WHEN EXISTS(SELECT 1 FROM logs WHERE origin = NEW.name)
BEGIN SELECT RAISE(ABORT, 'witness: name is the origin of a witnessed log'); END;
CREATE TRIGGER evidence_kept BEFORE DELETE ON evidence
BEGIN SELECT RAISE(ABORT, 'witness: evidence is never deleted'); END;
`

// OpenStore opens the witness state file at path, creating it only if
// opts.Create is set. The file is opened with the durability pragmas in the
// DSN, where modernc.org/sqlite honours them: WAL, synchronous=FULL, a busy
// timeout for admin commands running beside a server, and foreign keys.
func OpenStore(ctx context.Context, path string, opts StoreOptions) (*Store, error) {
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("witness state %q: path is empty or contains '?' or '#'", path)
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !opts.Create:
		return nil, fmt.Errorf("%w at %s", ErrNoState, path)
	case err == nil && fi.IsDir():
		return nil, fmt.Errorf("witness state %s is a directory", path)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("witness state %s: %w", path, err)
	}
	base := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)"
	wdb, err := sql.Open("sqlite", base+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("open witness state %s: %w", path, err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	if err := migrate(ctx, wdb); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("open witness state %s: %w", path, err)
	}
	rdb, err := sql.Open("sqlite", base+"&_pragma=query_only(1)")
	if err != nil {
		wdb.Close()
		return nil, fmt.Errorf("open witness state %s: %w", path, err)
	}
	rdb.SetMaxOpenConns(8)
	rdb.SetMaxIdleConns(8)
	s := &Store{
		wdb: wdb, rdb: rdb, now: opts.Now, log: opts.Logger, maxGroup: opts.MaxGroup,
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.maxGroup <= 0 {
		s.maxGroup = 256
	}
	if err := s.prepare(ctx); err != nil {
		s.closeStmts()
		rdb.Close()
		wdb.Close()
		return nil, fmt.Errorf("open witness state %s: %w", path, err)
	}
	s.startWriter()
	return s, nil
}

// migrate creates the schema in a new file and checks the version of an
// existing one.
func migrate(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'").Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		if _, err := tx.ExecContext(ctx, storeSchema); err != nil {
			return fmt.Errorf("create schema: %w", err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO meta(key, value) VALUES ('schema_version', ?)", fmt.Sprint(StoreSchemaVersion)); err != nil {
			return err
		}
		if err := addConfigGeneration(ctx, tx); err != nil {
			return err
		}
		return tx.Commit()
	}
	var v string
	if err := tx.QueryRowContext(ctx, "SELECT value FROM meta WHERE key = 'schema_version'").Scan(&v); err != nil {
		return fmt.Errorf("not a witness state file: %w", err)
	}
	if v != fmt.Sprint(StoreSchemaVersion) {
		return fmt.Errorf("witness state schema version %s, this program knows %d", v, StoreSchemaVersion)
	}
	if err := addConfigGeneration(ctx, tx); err != nil {
		return err
	}
	return tx.Commit()
}

// configGenerationSchema counts the changes to the logs' configuration
// (logs added, keys added or removed, limits changed) in the meta row
// config_generation, by triggers, so that every writer of the file bumps it,
// whichever program it runs: a running witness then asks once per
// ConfigTTL whether anything changed, instead of reading every log's keys
// and limits again. It is additive (a meta row and triggers that programs
// knowing schema 1 ignore), so it is added to existing files too.
const configGenerationSchema = `
INSERT OR IGNORE INTO meta(key, value) VALUES ('config_generation', '0');
CREATE TRIGGER IF NOT EXISTS config_log_added AFTER INSERT ON logs
BEGIN UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key = 'config_generation'; END;
CREATE TRIGGER IF NOT EXISTS config_limits_changed AFTER UPDATE OF qpd, burst ON logs
BEGIN UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key = 'config_generation'; END;
CREATE TRIGGER IF NOT EXISTS config_key_added AFTER INSERT ON log_keys
BEGIN UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key = 'config_generation'; END;
CREATE TRIGGER IF NOT EXISTS config_key_removed AFTER DELETE ON log_keys
BEGIN UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key = 'config_generation'; END;
CREATE TRIGGER IF NOT EXISTS config_key_changed AFTER UPDATE ON log_keys
BEGIN UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key = 'config_generation'; END;
`

func addConfigGeneration(ctx context.Context, tx *sql.Tx) error {
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name = 'config_key_changed'").Scan(&n); err != nil {
		return err
	}
	if n == 1 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, configGenerationSchema); err != nil {
		return fmt.Errorf("adding the configuration generation: %w", err)
	}
	return nil
}

// configGeneration reads the count of configuration changes (see
// configGenerationSchema).
func (s *Store) configGeneration(ctx context.Context) (int64, error) {
	var g int64
	err := s.configGen.QueryRowContext(ctx).Scan(&g)
	return g, err
}

// Close stops the writer after the writes already queued and closes the file.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.writes.Close()
		err = errors.Join(s.closeStmts(), s.rdb.Close(), s.wdb.Close())
	})
	return err
}

func (s *Store) closeStmts() error {
	var errs []error
	for _, st := range []*sql.Stmt{s.savepoint, s.release, s.rollbackTo, s.keyExists, s.casUpdate, s.casUpdateKey, s.logRow, s.configGen} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}

// OriginHash returns the lowercase hex SHA-256 of origin, the path segment
// that names a log in the C2SP tlog-witness monitoring API.
func OriginHash(origin string) string {
	h := sha256.Sum256([]byte(origin))
	return hex.EncodeToString(h[:])
}

// ---- the writer: group commit -----------------------------------------------

// startWriter starts the group commit every write goes through: one
// committer on the writer connection, each write in its own savepoint (see
// internal/groupcommit).
func (s *Store) startWriter() {
	stmts := map[string]*sql.Stmt{
		groupcommit.Savepoint:  s.savepoint,
		groupcommit.Release:    s.release,
		groupcommit.RollbackTo: s.rollbackTo,
	}
	c := &groupcommit.SQL{
		DB: s.wdb,
		Exec: func(ctx context.Context, tx *sql.Tx, q string) error {
			_, err := tx.StmtContext(ctx, stmts[q]).ExecContext(ctx)
			return err
		},
		Refused: func(err error) bool { _, ok := errors.AsType[*refusal](err); return ok },
		Batch:   s.casBatch,
		Failed: func(step string, err error) error {
			return fmt.Errorf("%w: %s: %v", ErrUnavailable, step, err)
		},
		// The members answer 503 and never release a cosignature; their
		// callers reload the state before the next request, so either
		// outcome of a COMMIT in doubt is handled.
		InDoubt: func(err error) error {
			return fmt.Errorf("%w: commit: %v (outcome unknown)", ErrUnavailable, err)
		},
		Committed: func(n int, d time.Duration) {
			if s.groupHook != nil {
				s.groupHook(n, d)
			}
		},
	}
	s.writes = groupcommit.New(groupcommit.Config[groupcommit.Work]{Attempt: c.Attempt, MaxGroup: s.maxGroup})
}

// A refusal is a write's answer that it must not happen for a reason of
// its own (a stale compare-and-swap, an existing log): its savepoint rolls
// back and the rest of the group commits.
type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

func refuse(err error) error { return &refusal{err} }

// write queues fn for the writer and waits for its commit. fn must derive
// everything from the database state it reads and its own inputs, because
// a group that hits an infrastructure failure re-runs its members. The
// wait does not end early when ctx is cancelled: the caller must learn
// whether its write landed. A write whose ctx is already cancelled when its
// turn comes is skipped with ctx's error and writes nothing. A refusal
// comes back as the error it wraps.
//
// fn is given ctx without its cancellation: once a member has started, a
// caller giving up must not poison the transaction of the whole group.
func (s *Store) write(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return s.writeWork(ctx, groupcommit.Work{Run: fn})
}

// writeWork is write for a member that may also be batched (see casBatch).
func (s *Store) writeWork(ctx context.Context, w groupcommit.Work) error {
	err := s.writes.Submit(ctx, w)
	if errors.Is(err, groupcommit.ErrClosed) {
		return fmt.Errorf("%w: state store closed", ErrUnavailable)
	}
	if r, ok := errors.AsType[*refusal](err); ok {
		return r.err
	}
	return err
}
