// Package postgres is the shared, multi-writer journal backend: several
// processes on several machines may append to one PostgreSQL database, and
// every guarantee of store.Journal holds between them because it is enforced
// by the database, not by any one process.
//
//   - Fencing and chaining: every write to a run first takes a row lock on
//     the run's lease row (created on first touch with epoch 0, "no lease")
//     inside its transaction. That lock serializes appends, seals and lease
//     changes of one run across every process, so the epoch an append checks
//     is still the current one when it commits, and the head it chains on is
//     still the head.
//   - Exactly-once and admission keys are unique indexes; a violation is
//     mapped to store.DuplicateEffectError or store.DuplicateAdmissionError.
//   - Lease time is the database's clock (clock_timestamp(), read under the
//     lease row lock), never the caller's, so two hosts with skewed clocks
//     agree about who holds a run.
//   - The log index of a seal is taken by incrementing the tenant's log row
//     in the seal's transaction, and the leaf is added to the Merkle tree
//     (package log) in the same transaction; the row lock serializes seals
//     of a tenant until commit, so indexes have no gaps (an aborted seal
//     rolls its increment back) and no duplicates (and a unique index says
//     so too).
//   - Every derived index (outcome, admission, source, activity, case,
//     waiting) is written in the append's transaction.
//
// Throughput comes from group commit, not from weaker durability: a few
// committer goroutines write the appends (and one the seals) waiting when
// they come free in one transaction of two pipelined round trips, locking
// their runs in run-id order, as every writer does, so that no two writers
// can deadlock. A member refused under the lock fails alone; see group.go.
//
// A write that fails before its COMMIT is sent wrote nothing and is retried
// when the failure was transient (serialization failure, deadlock, a
// connection that was dead before use). A COMMIT whose acknowledgement is
// lost is store.CommitUnknownError, never reported as an abort.
//
// All rows are scoped by tenant; one Store serves one tenant, and many
// Stores (of one or several processes) may share a database and a pool.
package postgres

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/runseal/runseal/log"

	"github.com/runseal/runseal/internal/groupcommit"
	"github.com/runseal/runseal/store"
)

// Options configures a Store. The zero value is valid.
type Options struct {
	// Tenant whose rows this handle reaches; "default" when empty.
	Tenant string
	// Origin names the log in checkpoints. It is fixed when the schema is
	// created (a fresh "runseal/<ulid>" when empty) and must match after.
	Origin string
	// Schema is the PostgreSQL schema holding the journal's tables,
	// "runseal" when empty. Tables are always schema-qualified, so a
	// caller's own tables (see Atomic) may live anywhere.
	Schema string
	// MaxConns caps the pool Open creates when the DSN does not set
	// pool_max_conns; 32 when zero. Ignored by New.
	MaxConns int32
	// CommitTimeout bounds how long a COMMIT may wait for its
	// acknowledgement; 30s when zero. COMMIT does not stop when the
	// caller's context is cancelled, so that the caller learns whether its
	// write landed; past this bound the outcome is CommitUnknownError.
	CommitTimeout time.Duration
	// MaxGroup caps how many appends share one transaction; 64 when zero.
	// 1 disables group commit.
	MaxGroup int
	// Committers is how many groups may be in flight at once; 2 when zero:
	// one group executes while the other waits for its flush. More make
	// smaller groups that contend for the same pages (at 64 writers, four
	// cost a third more CPU per append than two).
	Committers int
	// Logger receives operational logs; slog.Default() when nil.
	Logger *slog.Logger
	// NodeCacheBytes bounds the in-memory cache of upper log nodes, which
	// proofs and roots read first: DefaultNodeCacheBytes when zero; below
	// 8 KiB (log.CacheNothing) nothing is cached.
	NodeCacheBytes int64
	// NoWarm turns off the warm at open, which reads the pages proofs
	// read and fills the node cache in the background (warm.go).
	NoWarm bool
}

// Store is the PostgreSQL journal. It is safe for concurrent use.
type Store struct {
	pool     *pgxpool.Pool
	ownsPool bool
	tenant   string
	origin   string
	schema   string
	q        queries
	commitTO time.Duration
	log      *slog.Logger
	closed   atomic.Bool

	nodeCache    *log.NodeCache // upper log nodes, for proofs and roots; see proofread.go
	trips        atomic.Uint64  // database round trips of proofs; see proofread.go
	inLogSQL     atomic.Pointer[floorSQL]
	sizeNodesSQL sizeNodesStatements
	// fills is the context of the node cache's background fill, cancelled
	// by Close so that no fill reads the pool after it.
	fills    context.Context
	stopFill context.CancelFunc
	warm     warmState // the warm at open, under fills (warm.go)

	maxGroup int
	known    knownRuns // runs' state after this store's last write to them
	appends  *groupcommit.Queue[*appendReq]
	seals    *groupcommit.Queue[*sealReq]

	hooks *groupHooks // where tests stand the group commit; nil outside tests
}

var _ store.Journal = (*Store)(nil)

// PoolConfig is the pool configuration Open uses for dsn: pgxpool's
// parsing, with maxConns connections (32 when zero) unless the DSN sets
// pool_max_conns. A caller that builds its own pool for New, to trace its
// statements say, starts from it so that its pool is sized as Open's.
func PoolConfig(dsn string, maxConns int32) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, &store.InvalidArgumentError{Field: "dsn", Detail: err.Error()}
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = maxConns
		if cfg.MaxConns <= 0 {
			cfg.MaxConns = 32
		}
	}
	return cfg, nil
}

// Open connects to the database named by dsn (a PostgreSQL URL or keyword
// DSN, with pgxpool's pool_* settings allowed), migrates its schema and
// returns a Store that owns the pool.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	cfg, err := PoolConfig(dsn, opts.MaxConns)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres journal: connect: %w", err)
	}
	s, err := New(ctx, pool, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.ownsPool = true
	return s, nil
}

// New returns a Store over an existing pool, which it borrows: Close does
// not close it. It migrates the schema first.
func New(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Store, error) {
	tenant := opts.Tenant
	if tenant == "" {
		tenant = store.DefaultTenant
	}
	if err := store.ValidateTenant(tenant); err != nil {
		return nil, err
	}
	schema := opts.Schema
	if schema == "" {
		schema = "runseal"
	}
	if err := validateSchema(schema); err != nil {
		return nil, err
	}
	if opts.Origin != "" {
		if err := store.ValidateOrigin(opts.Origin); err != nil {
			return nil, err
		}
	}
	s := &Store{
		pool: pool, tenant: tenant, schema: schema, q: newQueries(schema),
		commitTO: opts.CommitTimeout, log: opts.Logger,
		nodeCache: log.NewNodeCache(cmp.Or(opts.NodeCacheBytes, DefaultNodeCacheBytes)),
	}
	s.fills, s.stopFill = context.WithCancel(context.Background())
	if s.commitTO <= 0 {
		s.commitTO = 30 * time.Second
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	origin, err := migrate(ctx, pool, schema, opts.Origin)
	if err != nil {
		return nil, fmt.Errorf("postgres journal: %w", err)
	}
	s.origin = origin
	s.maxGroup = opts.MaxGroup
	if s.maxGroup <= 0 {
		s.maxGroup = 64
	}
	n := opts.Committers
	if n <= 0 {
		n = 2
	}
	s.startCommitters(n)
	s.startWarm(opts)
	return s, nil
}

// Close stops this handle; calls after Close return store.ErrClosed. The
// pool is closed only if Open created it.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	// Appends already taken by a committer finish before the pool goes,
	// and so does the node cache's fill.
	s.appends.Close()
	s.seals.Close()
	s.stopFill()
	<-s.warm.done
	s.nodeCache.StopFill()
	if s.ownsPool {
		s.pool.Close()
	}
	return nil
}

// Pool is the connection pool the store uses.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Schema is the PostgreSQL schema holding the journal's tables.
func (s *Store) Schema() string { return s.schema }

// Tenant implements store.Journal.
func (s *Store) Tenant() string { return s.tenant }

// Origin is the checkpoint origin of this tenant's log.
func (s *Store) Origin() string {
	if s.tenant == store.DefaultTenant {
		return s.origin
	}
	return s.origin + "/" + s.tenant
}

// IsShared is true: any number of processes may write the same database.
func (s *Store) IsShared() bool { return true }

// Seals is false: this store writes records exactly as it is handed them.
func (s *Store) Seals() bool { return false }

func (s *Store) check(ctx context.Context) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return ctx.Err()
}

// validateSchema keeps the schema name to a plain identifier, because it is
// spliced into SQL text.
func validateSchema(s string) error {
	if s == "" || len(s) > 63 {
		return &store.InvalidArgumentError{Field: "schema", Detail: "must be 1 to 63 characters"}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c == '_' || i > 0 && c >= '0' && c <= '9') {
			return &store.InvalidArgumentError{Field: "schema", Detail: fmt.Sprintf("%q is not a lower-case SQL identifier", s)}
		}
	}
	if strings.HasPrefix(s, "pg_") {
		return &store.InvalidArgumentError{Field: "schema", Detail: "names starting pg_ are reserved by PostgreSQL"}
	}
	return nil
}
