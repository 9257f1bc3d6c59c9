package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/postgres"
	"github.com/runseal/runseal/store/sqlite"
)

// journalStore is what the commands need of a backend: the journal, its
// signed checkpoints, the log's origin, and closing. Both store/sqlite and
// store/postgres provide it.
type journalStore interface {
	store.Backend
	Close() error
}

var (
	_ journalStore = (*sqlite.Store)(nil)
	_ journalStore = (*postgres.Store)(nil)
)

// isDSN reports whether a --store value names a PostgreSQL server rather
// than a journal file.
func isDSN(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// location is where the journal and its log key are, resolved once from
// the flags and the environment and then passed along.
type location struct {
	dsn  string // a postgres:// DSN; empty for a journal file
	path string // the journal file; empty for a DSN
	key  string // the log's private key file; empty for a DSN without --key
}

// location resolves the journal: --store, else --db, else $RUNSEAL_DB, else
// ./runseal.db; and its key: --key, else $RUNSEAL_KEY, else the journal
// path + ".key", so a journal and its key are found together and a second
// journal never picks up the first one's key. A database has no path to
// put a key beside: with a DSN, --key or $RUNSEAL_KEY is required.
func (a *app) location() location {
	var l location
	switch {
	case isDSN(a.storeArg):
		l.dsn = a.storeArg
	case a.storeArg != "":
		l.path = a.storeArg
	case a.db != "":
		l.path = a.db
	case os.Getenv(envDB) != "":
		l.path = os.Getenv(envDB)
	default:
		l.path = defaultDB
	}
	switch {
	case a.key != "":
		l.key = a.key
	case os.Getenv(envKey) != "":
		l.key = os.Getenv(envKey)
	case l.path != "":
		l.key = l.path + ".key"
	}
	return l
}

// String names the journal for people, never printing a DSN's password.
func (l location) String() string {
	if l.dsn != "" {
		return "postgres"
	}
	return l.path
}

// createJournal creates a new journal file at abs (refusing an existing
// one) and its log key at keyPath, and returns tenant's origin and the
// verifier key. It is init's work, shared with serve's first start.
func (a *app) createJournal(ctx context.Context, abs, keyPath, tenant, origin string) (string, string, error) {
	// O_EXCL makes "does it exist" and "create it" one step, so two
	// creators racing cannot both believe they made the journal.
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return "", "", fmt.Errorf("a journal (or another file) already exists at %s; nothing was changed", abs)
	}
	if err != nil {
		return "", "", fmt.Errorf("create journal: %w", err)
	}
	f.Close()
	s, err := a.openFile(ctx, abs, tenant, origin)
	if err != nil {
		// The file is ours and empty or half-made: leave no debris.
		os.Remove(abs)
		os.Remove(abs + "-wal")
		os.Remove(abs + "-shm")
		return "", "", err
	}
	o := s.Origin()
	if err := s.Close(); err != nil {
		return "", "", fmt.Errorf("close journal: %w", err)
	}
	vkey, err := createKey(keyPath, o)
	if err != nil {
		return "", "", fmt.Errorf("journal created at %s, but its log key was not: %w", abs, err)
	}
	return o, vkey, nil
}

func (a *app) openFile(ctx context.Context, path, tenant, origin string) (*sqlite.Store, error) {
	if err := store.ValidateTenant(tenant); err != nil {
		return nil, usageErrorf("--tenant: %v", err)
	}
	return sqlite.Open(ctx, path, sqlite.Options{Tenant: tenant, Origin: origin, Logger: a.log, NodeCacheBytes: a.nodeCacheBytes(), NoWarm: !a.serving})
}

// openStore opens tenant's view of the journal at loc. With create, a
// missing journal file is created with its key, and created reports that.
func (a *app) openStore(ctx context.Context, loc location, tenant string, create bool) (s journalStore, created bool, err error) {
	ss, created, err := a.openStores(ctx, loc, []string{tenant}, create)
	if err != nil {
		return nil, false, err
	}
	return ss[0], created, nil
}

// openStores opens the journal at loc once and returns a view of it for
// each tenant, in order; close them with closeStores. The views share one handle: one writer and one
// group commit for a file (tenants of one SQLite file would otherwise
// contend for its write lock), one connection pool for a database. Each
// view is closed on its own. This is the one place the commands open a
// journal.
func (a *app) openStores(ctx context.Context, loc location, tenants []string, create bool) (_ []journalStore, created bool, err error) {
	for _, t := range tenants {
		if err := store.ValidateTenant(t); err != nil {
			return nil, false, usageErrorf("--tenant %s: %v", t, err)
		}
	}
	var out []journalStore
	defer func() {
		if err != nil {
			closeStores(out)
		}
	}()
	if loc.dsn != "" {
		first, err := postgres.Open(ctx, loc.dsn, postgres.Options{Tenant: tenants[0], Logger: a.log, NodeCacheBytes: a.nodeCacheBytes(), NoWarm: !a.serving})
		if err != nil {
			return nil, false, err
		}
		out = append(out, first)
		for _, t := range tenants[1:] {
			ps, err := postgres.New(ctx, first.Pool(), postgres.Options{Tenant: t, Logger: a.log, NodeCacheBytes: a.nodeCacheBytes(), NoWarm: !a.serving})
			if err != nil {
				return nil, false, err
			}
			out = append(out, ps)
		}
		return out, false, nil
	}
	path := loc.path
	if create {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			abs, err := filepath.Abs(path)
			if err != nil {
				return nil, false, err
			}
			keyPath, err := filepath.Abs(loc.key)
			if err != nil {
				return nil, false, err
			}
			if _, _, err := a.createJournal(ctx, abs, keyPath, tenants[0], ""); err != nil {
				return nil, false, err
			}
			created = true
		}
	}
	// sqlite.Open would create a missing file, which for any command but
	// init and serve would hide a mistyped path behind an empty, perfectly
	// valid journal.
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("no journal at %s: pass --db or set $%s, or create one with 'journal init'", path, envDB)
	}
	if err != nil {
		return nil, false, fmt.Errorf("journal %s: %w", path, err)
	}
	if fi.IsDir() {
		return nil, false, fmt.Errorf("journal %s is a directory", path)
	}
	first, err := a.openFile(ctx, path, tenants[0], "")
	if err != nil {
		return nil, false, err
	}
	out = append(out, first)
	for _, t := range tenants[1:] {
		v, err := first.ForTenant(t)
		if err != nil {
			return nil, false, err
		}
		out = append(out, v)
	}
	return out, created, nil
}

// closeStores closes views opened together, the first last: for a
// database, the first owns the pool the others borrow.
func closeStores(ss []journalStore) error {
	var errs []error
	for i := len(ss) - 1; i >= 0; i-- {
		errs = append(errs, ss[i].Close())
	}
	return errors.Join(errs...)
}

// withStore opens the journal, runs fn and closes the journal, reporting a
// close failure only when fn succeeded.
func (a *app) withStore(ctx context.Context, fn func(s journalStore) error) error {
	s, _, err := a.openStore(ctx, a.location(), a.tenant, false)
	if err != nil {
		return err
	}
	ws, err := a.withSealing(ctx, s) // sealing.go: --keyring
	if err != nil {
		s.Close()
		return err
	}
	s = ws
	err = fn(s)
	if cerr := s.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("close journal: %w", cerr)
	}
	return err
}
