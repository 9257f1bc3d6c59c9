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

// journalStore is what the commands need of a backend: the whole backend
// (store.Backend) and closing. Both store/sqlite and store/postgres provide
// it.
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

// createJournal creates a new journal file at abs (refusing an existing
// one) and its log key at keyPath, and returns the origin and verifier key.
// It is init's work, shared with serve's first start.
func (a *app) createJournal(ctx context.Context, abs, keyPath, origin string) (string, string, error) {
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
	s, err := a.openPath(ctx, abs, origin)
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

// openStore opens the journal named by --store (a file path or a
// postgres:// DSN), else by --db. With create, a missing journal file is
// created with its key, and created reports that.
func (a *app) openStore(ctx context.Context, target string, create bool) (s journalStore, created bool, err error) {
	if isDSN(target) {
		if err := store.ValidateTenant(a.tenant); err != nil {
			return nil, false, usageErrorf("--tenant: %v", err)
		}
		ps, err := postgres.Open(ctx, target, postgres.Options{Tenant: a.tenant, Logger: a.log})
		if err != nil {
			return nil, false, err
		}
		return ps, false, nil
	}
	if target == "" {
		target = a.dbPath()
	}
	if create {
		if _, err := os.Stat(target); errors.Is(err, fs.ErrNotExist) {
			abs, err := filepath.Abs(target)
			if err != nil {
				return nil, false, err
			}
			a.db = abs
			keyPath, err := filepath.Abs(a.keyPath())
			if err != nil {
				return nil, false, err
			}
			if _, _, err := a.createJournal(ctx, abs, keyPath, ""); err != nil {
				return nil, false, err
			}
			created = true
		}
	}
	a.db = target
	ss, err := a.open(ctx)
	if err != nil {
		return nil, false, err
	}
	return ss, created, nil
}
