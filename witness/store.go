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

	"github.com/runseal/runseal/checkpoint"
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

	ops       chan *op
	maxGroup  int
	closeOnce sync.Once
	closed    chan struct{}
	done      chan struct{}

	// groupHook, if set before the first write, is told the size and
	// duration of every committed group (metrics).
	groupHook func(n int, d time.Duration)

	// Statements of the add-checkpoint path, prepared once on the writer's
	// connection: at thousands of writes a second, parsing SQL again for
	// each would cost the single writer more than the writes.
	savepoint, release, rollbackTo, keyExists, casUpdate *sql.Stmt

	// logRow is the configuration read of the add-checkpoint path, on
	// the reader pool (database/sql prepares it on each reader once).
	logRow *sql.Stmt
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
		ops: make(chan *op), closed: make(chan struct{}), done: make(chan struct{}),
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
	go s.writer()
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
		return tx.Commit()
	}
	var v string
	if err := tx.QueryRowContext(ctx, "SELECT value FROM meta WHERE key = 'schema_version'").Scan(&v); err != nil {
		return fmt.Errorf("not a witness state file: %w", err)
	}
	if v != fmt.Sprint(StoreSchemaVersion) {
		return fmt.Errorf("witness state schema version %s, this program knows %d", v, StoreSchemaVersion)
	}
	return nil
}

// Close stops the writer after the writes already queued and closes the file.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	<-s.done
	return errors.Join(s.closeStmts(), s.rdb.Close(), s.wdb.Close())
}

func (s *Store) closeStmts() error {
	var errs []error
	for _, st := range []*sql.Stmt{s.savepoint, s.release, s.rollbackTo, s.keyExists, s.casUpdate, s.logRow} {
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

// op is one write: fn runs inside the group's transaction, in its own
// savepoint. fn must derive everything from the database state it reads and
// its own inputs, because a group that hits an infrastructure failure
// re-runs its members.
type op struct {
	ctx  context.Context
	fn   func(ctx context.Context, tx *sql.Tx) error
	done chan error
}

// A refusal is an op's answer that the write must not happen for a reason
// of its own (a stale compare-and-swap, an existing log): its savepoint
// rolls back and the rest of the group commits.
type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

func refuse(err error) error { return &refusal{err} }

// write queues fn for the writer and waits for its commit. The wait does not
// end early when ctx is cancelled: the caller must learn whether its write
// landed. A write whose ctx is already cancelled when its turn comes is
// skipped with ctx's error and writes nothing. A refusal comes back as the
// error it wraps.
//
// fn is given ctx without its cancellation: once a member has started, a
// caller giving up must not poison the transaction of the whole group.
func (s *Store) write(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o := &op{ctx: ctx, fn: fn, done: make(chan error, 1)}
	select {
	case s.ops <- o:
	case <-s.closed:
		return fmt.Errorf("%w: state store closed", ErrUnavailable)
	case <-ctx.Done():
		return ctx.Err()
	}
	err := <-o.done
	if r, ok := errors.AsType[*refusal](err); ok {
		return r.err
	}
	return err
}

func (s *Store) writer() {
	defer close(s.done)
	for {
		var first *op
		select {
		case first = <-s.ops:
		case <-s.closed:
			return
		}
		group := []*op{first}
	drain:
		for len(group) < s.maxGroup {
			select {
			case o := <-s.ops:
				group = append(group, o)
			default:
				break drain
			}
		}
		s.commitGroup(group)
	}
}

// commitGroup runs a group in one transaction. A member refused for a
// reason of its own rolls back to its savepoint and the group goes on. Any
// other failure poisons the transaction: it is rolled back, the failing
// member gets the error, and the members before and after it run again in a
// fresh one.
func (s *Store) commitGroup(pending []*op) {
	for len(pending) > 0 {
		pending = s.tryGroup(pending)
	}
}

func (s *Store) tryGroup(pending []*op) (retry []*op) {
	bg := context.Background()
	start := time.Now()
	tx, err := s.wdb.BeginTx(bg, nil)
	if err != nil {
		for _, o := range pending {
			o.done <- fmt.Errorf("%w: begin transaction: %v", ErrUnavailable, err)
		}
		return nil
	}
	var ok []*op
	for i, o := range pending {
		if err := o.ctx.Err(); err != nil {
			o.done <- err
			continue
		}
		if _, err := tx.StmtContext(bg, s.savepoint).ExecContext(bg); err != nil {
			tx.Rollback()
			o.done <- fmt.Errorf("%w: savepoint: %v", ErrUnavailable, err)
			return append(ok, pending[i+1:]...)
		}
		err := o.fn(context.WithoutCancel(o.ctx), tx)
		if err == nil {
			if _, err := tx.StmtContext(bg, s.release).ExecContext(bg); err != nil {
				tx.Rollback()
				o.done <- fmt.Errorf("%w: release savepoint: %v", ErrUnavailable, err)
				return append(ok, pending[i+1:]...)
			}
			ok = append(ok, o)
			continue
		}
		if _, refused := errors.AsType[*refusal](err); refused {
			_, e1 := tx.StmtContext(bg, s.rollbackTo).ExecContext(bg)
			_, e2 := tx.StmtContext(bg, s.release).ExecContext(bg)
			if e1 == nil && e2 == nil {
				o.done <- err
				continue
			}
		}
		tx.Rollback()
		o.done <- err
		return append(ok, pending[i+1:]...)
	}
	if err := tx.Commit(); err != nil {
		// SQLite may or may not have made the commit durable when COMMIT
		// reports an I/O error. The members answer 503 and never release
		// a cosignature; their callers reload the state before the next
		// request, so either outcome is handled.
		for _, o := range ok {
			o.done <- fmt.Errorf("%w: commit: %v (outcome unknown)", ErrUnavailable, err)
		}
		return nil
	}
	if s.groupHook != nil && len(ok) > 0 {
		s.groupHook(len(ok), time.Since(start))
	}
	for _, o := range ok {
		o.done <- nil
	}
	return nil
}

// ---- logs: configuration ----------------------------------------------------

// A LogConfig is what an operator decides about a log: its origin, the keys
// whose signatures make its checkpoints authentic, and its rate limits.
type LogConfig struct {
	// Origin is the first line of the log's checkpoints.
	Origin string
	// Keys are the log's note verifier keys (vkeys), plain Ed25519 (type
	// 0x01). A checkpoint needs a valid signature from one of them. A log
	// without keys is witnessed by nobody: the way to disable a log,
	// since a log is never deleted.
	Keys []string
	// QPD is the number of add-checkpoint requests per day the log may
	// make, as in the witness-network log lists; 1 to MaxQPD.
	QPD int64
	// Burst is how many requests the log may make at once on top of its
	// daily rate; 1 to MaxQPD. Zero in AddLog means DefaultBurst(QPD).
	Burst int64
	// Contact is free text for the operator to reach the log's operator.
	Contact string
}

// DefaultBurst returns the burst a log gets when none is given: the larger
// of 16 requests and one minute of its daily quota. A publisher that probes
// with old 0 and retries after a 409 sends a few requests at once, and a
// log allowed a high rate should not be paced to the second.
func DefaultBurst(qpd int64) int64 {
	return max(16, min((qpd+1439)/1440, MaxQPD))
}

// A LogInfo is a log as the witness holds it: its configuration and the
// latest checkpoint it cosigned.
type LogInfo struct {
	LogConfig
	// Size is the size of the latest checkpoint cosigned, 0 if none.
	Size uint64
	// Root is the root of that checkpoint, the empty root if none.
	Root [32]byte
	// CosignedAt is the timestamp of that cosignature; zero if never.
	CosignedAt time.Time
	// AddedAt is when the log was added.
	AddedAt time.Time
	// Evidence is how many distinct refused checkpoints of this log the
	// witness keeps as evidence (see Store.Evidence).
	Evidence int
}

// checkLogKey checks that vkey is a log key: a well-formed note key of type
// 0x01. A witness key (0x04) is refused so that a key is never both.
func checkLogKey(vkey string) error {
	v, err := checkpoint.NewVerifier(vkey)
	if err != nil {
		return fmt.Errorf("%w %q: %v", ErrBadLogKey, vkey, err)
	}
	if _, ok := v.(*checkpoint.CosignatureVerifier); ok {
		return fmt.Errorf("%w %q: a cosignature (type 0x04) key is a witness key; a log signs with a plain Ed25519 (type 0x01) key", ErrBadLogKey, vkey)
	}
	return nil
}

// checkOrigin checks that origin can be the first line of a checkpoint.
func checkOrigin(origin string) error {
	cp := checkpoint.Checkpoint{Origin: origin, Root: checkpoint.EmptyRoot()}
	if err := cp.Validate(); err != nil {
		return fmt.Errorf("origin %q: %w", origin, err)
	}
	return nil
}

func checkLimit(name string, v int64) error {
	if v < 1 || v > MaxQPD {
		return fmt.Errorf("%w: %s %d is not between 1 and %d", ErrInvalidLimit, name, v, int64(MaxQPD))
	}
	return nil
}

// normalize validates c and fills in the default burst.
func (c *LogConfig) normalize() error {
	if err := checkOrigin(c.Origin); err != nil {
		return err
	}
	if err := checkLimit("qpd", c.QPD); err != nil {
		return err
	}
	if c.Burst == 0 {
		c.Burst = DefaultBurst(c.QPD)
	}
	if err := checkLimit("burst", c.Burst); err != nil {
		return err
	}
	seen := make(map[string]bool, len(c.Keys))
	for _, k := range c.Keys {
		if err := checkLogKey(k); err != nil {
			return err
		}
		if seen[k] {
			return fmt.Errorf("%w: %q given twice", ErrKeyExists, k)
		}
		seen[k] = true
	}
	if strings.ContainsFunc(c.Contact, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return fmt.Errorf("contact %q contains a control character", c.Contact)
	}
	return nil
}

// AddLog adds a log at size 0, never cosigned. It fails with ErrLogExists
// if the origin is known (a log is never removed, so re-adding would risk
// cosigning a second history), and with ErrOwnName if the origin is a name
// the witness cosigns as.
func (s *Store) AddLog(ctx context.Context, c LogConfig) error {
	if err := c.normalize(); err != nil {
		return err
	}
	now := s.now().Unix()
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error { return insertLog(ctx, tx, c, now) })
}

func insertLog(ctx context.Context, tx *sql.Tx, c LogConfig, now int64) error {
	var own, exists bool
	if err := tx.QueryRowContext(ctx, "SELECT EXISTS(SELECT 1 FROM witness_names WHERE name = ?), EXISTS(SELECT 1 FROM logs WHERE origin = ?)", c.Origin, c.Origin).Scan(&own, &exists); err != nil {
		return err
	}
	switch {
	case own:
		return refuse(fmt.Errorf("%w: %q", ErrOwnName, c.Origin))
	case exists:
		return refuse(fmt.Errorf("%w: %q", ErrLogExists, c.Origin))
	}
	empty := checkpoint.EmptyRoot()
	if _, err := tx.ExecContext(ctx, `INSERT INTO logs(origin, origin_hash, size, root, qpd, burst, contact, added_at)
		VALUES (?, ?, 0, ?, ?, ?, ?, ?)`, c.Origin, OriginHash(c.Origin), empty[:], c.QPD, c.Burst, c.Contact, now); err != nil {
		return err
	}
	for _, k := range c.Keys {
		if _, err := tx.ExecContext(ctx, "INSERT INTO log_keys(origin, vkey, added_at) VALUES (?, ?, ?)", c.Origin, k, now); err != nil {
			return err
		}
	}
	return nil
}

// AddKey adds a verifier key to a log. Checkpoints signed by it are
// accepted from the next request on.
func (s *Store) AddKey(ctx context.Context, origin, vkey string) error {
	if err := checkLogKey(vkey); err != nil {
		return err
	}
	now := s.now().Unix()
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := logExists(ctx, tx, origin); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, "INSERT INTO log_keys(origin, vkey, added_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING", origin, vkey, now)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return refuse(fmt.Errorf("%w: %q", ErrKeyExists, vkey))
		}
		return nil
	})
}

// DelKey removes a verifier key from a log. No cosignature is released for
// a checkpoint verified only by a removed key, even one verified before
// the removal: the key is checked again in the transaction that records the
// cosignature. Removing a log's last key disables the log; its state stays.
func (s *Store) DelKey(ctx context.Context, origin, vkey string) error {
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := logExists(ctx, tx, origin); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, "DELETE FROM log_keys WHERE origin = ? AND vkey = ?", origin, vkey)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return refuse(fmt.Errorf("%w: %q", ErrNoSuchKey, vkey))
		}
		return nil
	})
}

// SetLimits changes a log's daily quota and burst (burst 0: DefaultBurst).
// A running witness applies them within a second.
func (s *Store) SetLimits(ctx context.Context, origin string, qpd, burst int64) error {
	if burst == 0 {
		burst = DefaultBurst(qpd)
	}
	if err := errors.Join(checkLimit("qpd", qpd), checkLimit("burst", burst)); err != nil {
		return err
	}
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := logExists(ctx, tx, origin); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "UPDATE logs SET qpd = ?, burst = ? WHERE origin = ?", qpd, burst, origin)
		return err
	})
}

func logExists(ctx context.Context, tx *sql.Tx, origin string) error {
	var ok bool
	if err := tx.QueryRowContext(ctx, "SELECT EXISTS(SELECT 1 FROM logs WHERE origin = ?)", origin).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return refuse(fmt.Errorf("%w: %q", ErrUnknownLog, origin))
	}
	return nil
}

// AddWitnessNames records names the witness cosigns as, so that no log
// with such an origin can be added. It fails with ErrOwnName if a log
// already has one of them as its origin.
func (s *Store) AddWitnessNames(ctx context.Context, names ...string) error {
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for _, n := range names {
			var clash bool
			if err := tx.QueryRowContext(ctx, "SELECT EXISTS(SELECT 1 FROM logs WHERE origin = ?)", n).Scan(&clash); err != nil {
				return err
			}
			if clash {
				return refuse(fmt.Errorf("%w: a witnessed log has origin %q", ErrOwnName, n))
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO witness_names(name) VALUES (?) ON CONFLICT DO NOTHING", n); err != nil {
				return err
			}
		}
		return nil
	})
}

// WitnessNames returns the names the witness cosigns as, sorted.
func (s *Store) WitnessNames(ctx context.Context) ([]string, error) {
	rows, err := s.rdb.QueryContext(ctx, "SELECT name FROM witness_names ORDER BY name")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// Logs returns every log, sorted by origin.
func (s *Store) Logs(ctx context.Context) ([]LogInfo, error) {
	return s.queryLogs(ctx, "")
}

// Log returns one log, or an error wrapping ErrUnknownLog.
func (s *Store) Log(ctx context.Context, origin string) (LogInfo, error) {
	ls, err := s.queryLogs(ctx, origin)
	if err != nil {
		return LogInfo{}, err
	}
	if len(ls) == 0 {
		return LogInfo{}, fmt.Errorf("%w: %q", ErrUnknownLog, origin)
	}
	return ls[0], nil
}

func (s *Store) queryLogs(ctx context.Context, origin string) ([]LogInfo, error) {
	q := `SELECT origin, size, root, cosigned_at, qpd, burst, contact, added_at,
		(SELECT count(*) FROM evidence e WHERE e.origin = l.origin)
		FROM logs l`
	args := []any{}
	if origin != "" {
		q += " WHERE origin = ?"
		args = append(args, origin)
	}
	rows, err := s.rdb.QueryContext(ctx, q+" ORDER BY origin", args...)
	if err != nil {
		return nil, err
	}
	var out []LogInfo
	for rows.Next() {
		var (
			li       LogInfo
			size     int64
			root     []byte
			cosigned sql.NullInt64
			added    int64
		)
		if err := rows.Scan(&li.Origin, &size, &root, &cosigned, &li.QPD, &li.Burst, &li.Contact, &added, &li.Evidence); err != nil {
			rows.Close()
			return nil, err
		}
		li.Size = uint64(size)
		copy(li.Root[:], root)
		if cosigned.Valid {
			li.CosignedAt = time.Unix(cosigned.Int64, 0).UTC()
		}
		li.AddedAt = time.Unix(added, 0).UTC()
		out = append(out, li)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].Keys, err = s.logKeys(ctx, out[i].Origin); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// logKeys returns a log's verifier keys, sorted.
func (s *Store) logKeys(ctx context.Context, origin string) ([]string, error) {
	rows, err := s.rdb.QueryContext(ctx, "SELECT vkey FROM log_keys WHERE origin = ? ORDER BY vkey", origin)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, rows.Err()
}

// logRow is what the add-checkpoint path reads about a log.
type logRow struct {
	keys       []string
	qpd, burst int64
}

// readLogRow reads a log's keys and limits in one query; ok is false for an
// unknown origin. A running witness calls it for each log every ConfigTTL,
// so the statement is prepared once.
func (s *Store) readLogRow(ctx context.Context, origin string) (row logRow, ok bool, err error) {
	rows, err := s.logRow.QueryContext(ctx, origin)
	if err != nil {
		return row, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var k sql.NullString
		if err := rows.Scan(&row.qpd, &row.burst, &k); err != nil {
			return row, false, err
		}
		ok = true
		if k.Valid {
			row.keys = append(row.keys, k.String)
		}
	}
	return row, ok, rows.Err()
}

// readState reads a log's latest cosigned size and root.
func (s *Store) readState(ctx context.Context, origin string) (size uint64, root [32]byte, err error) {
	var (
		sz int64
		rt []byte
	)
	if err := s.rdb.QueryRowContext(ctx, "SELECT size, root FROM logs WHERE origin = ?", origin).Scan(&sz, &rt); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return 0, root, fmt.Errorf("%w: %q", ErrUnknownLog, origin)
		}
		return 0, root, err
	}
	copy(root[:], rt)
	return uint64(sz), root, nil
}

// LatestCheckpoint returns the latest checkpoint the witness cosigned for
// the log whose origin hashes to originHash (see OriginHash): the note with
// the log signatures that verified and the witness's own cosignatures. It
// fails with ErrNotCosigned if the witness never cosigned that log.
func (s *Store) LatestCheckpoint(ctx context.Context, originHash string) ([]byte, error) {
	var note []byte
	err := s.rdb.QueryRowContext(ctx, "SELECT note FROM logs WHERE origin_hash = ? AND note IS NOT NULL", originHash).Scan(&note)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotCosigned
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return note, nil
}

// ---- add-checkpoint: the compare-and-swap -----------------------------------

// errStateChanged is the refusal of a compare-and-swap whose expected state
// is no longer the stored one: another writer moved the log.
var errStateChanged = errors.New("log state changed since it was read")

// A casUpdate moves a log from the state the checks were made against to a
// newly cosigned checkpoint.
type casUpdate struct {
	origin           string
	oldSize, newSize uint64
	oldRoot, newRoot [32]byte
	note             []byte // the stored note: verified log signatures and ours
	cosignedAt       int64
	keys             []string // the vkeys whose signatures verified
}

// commitCheckpoint performs u as one compare-and-swap in the group commit.
// It returns errStateChanged if the stored (size, root) is not (oldSize,
// oldRoot), and an error wrapping ErrNotTrusted if none of u.keys is still
// configured. It returns only once the write is durable.
func (s *Store) commitCheckpoint(ctx context.Context, u *casUpdate) error {
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		trusted := false
		for _, k := range u.keys {
			if err := tx.StmtContext(ctx, s.keyExists).QueryRowContext(ctx, u.origin, k).Scan(&trusted); err != nil {
				return err
			}
			if trusted {
				break
			}
		}
		if !trusted {
			return refuse(fmt.Errorf("%w: the key that signed was removed from %q", ErrNotTrusted, u.origin))
		}
		res, err := tx.StmtContext(ctx, s.casUpdate).ExecContext(ctx,
			int64(u.newSize), u.newRoot[:], u.note, u.cosignedAt, u.origin, int64(u.oldSize), u.oldRoot[:])
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n != 1 {
			return refuse(errStateChanged)
		}
		return nil
	})
}

// ---- evidence ---------------------------------------------------------------

// Kinds of evidence.
const (
	// EvidenceSplitView is a validly signed checkpoint of the size the
	// witness held, with another root: two trees of one size, signed by
	// the log. Together with KnownNote it proves the log misbehaved.
	EvidenceSplitView = "split_view"
	// EvidenceBadProof is a validly signed checkpoint larger than the
	// witness's whose consistency proof did not verify. It proves nothing
	// alone (the proof may be a client bug) but is kept with the proof,
	// because a fork from the log looks exactly like this.
	EvidenceBadProof = "bad_proof"
)

// An Evidence is a validly signed checkpoint the witness refused because it
// is inconsistent with what the witness had cosigned, kept for the
// operator. Identical submissions are kept once, with a count.
type Evidence struct {
	Origin    string     // the log
	Kind      string     // EvidenceSplitView or EvidenceBadProof
	Size      uint64     // the refused checkpoint's size
	Root      [32]byte   // and root
	Note      []byte     // the refused note, with only the log signatures that verified
	KnownSize uint64     // what the witness held when it refused
	KnownRoot [32]byte   // and the root it held
	KnownNote []byte     // the note the witness had cosigned at KnownSize; nil if it had cosigned nothing
	Proof     [][32]byte // the proof that failed, for EvidenceBadProof
	FirstSeen time.Time  // when it was first submitted
	LastSeen  time.Time  // and last
	Count     int64      // how many times it was submitted
}

// recordEvidence stores ev durably, or counts one more sighting of it. It
// copies the witness's currently stored note as KnownNote inside the same
// transaction, so the pair is consistent.
func (s *Store) recordEvidence(ctx context.Context, ev *Evidence) error {
	proof := make([]byte, 0, 32*len(ev.Proof))
	for _, h := range ev.Proof {
		proof = append(proof, h[:]...)
	}
	now := s.now().Unix()
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO evidence(origin, kind, size, root, note, known_size, known_root, known_note, proof, first_seen, last_seen, count)
			SELECT ?, ?, ?, ?, ?, ?, ?, (SELECT note FROM logs WHERE origin = ? AND size = ? AND root = ?), ?, ?, ?, 1
			ON CONFLICT(origin, kind, size, root, known_size) DO UPDATE SET last_seen = excluded.last_seen, count = count + 1`,
			ev.Origin, ev.Kind, int64(ev.Size), ev.Root[:], ev.Note, int64(ev.KnownSize), ev.KnownRoot[:],
			ev.Origin, int64(ev.KnownSize), ev.KnownRoot[:], proof, now, now)
		return err
	})
}

// Evidence returns the evidence kept for origin, or for every log if origin
// is empty, oldest first.
func (s *Store) Evidence(ctx context.Context, origin string) ([]Evidence, error) {
	q := `SELECT origin, kind, size, root, note, known_size, known_root, known_note, proof, first_seen, last_seen, count FROM evidence`
	args := []any{}
	if origin != "" {
		q += " WHERE origin = ?"
		args = append(args, origin)
	}
	rows, err := s.rdb.QueryContext(ctx, q+" ORDER BY id", args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Evidence
	for rows.Next() {
		var (
			ev                     Evidence
			size, knownSize        int64
			root, knownRoot, proof []byte
			firstSeen, lastSeen    int64
		)
		if err := rows.Scan(&ev.Origin, &ev.Kind, &size, &root, &ev.Note, &knownSize, &knownRoot, &ev.KnownNote, &proof, &firstSeen, &lastSeen, &ev.Count); err != nil {
			return nil, err
		}
		ev.Size, ev.KnownSize = uint64(size), uint64(knownSize)
		copy(ev.Root[:], root)
		copy(ev.KnownRoot[:], knownRoot)
		for len(proof) >= 32 {
			ev.Proof = append(ev.Proof, [32]byte(proof[:32]))
			proof = proof[32:]
		}
		ev.FirstSeen, ev.LastSeen = time.Unix(firstSeen, 0).UTC(), time.Unix(lastSeen, 0).UTC()
		out = append(out, ev)
	}
	return out, rows.Err()
}
