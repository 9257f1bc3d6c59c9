package journalstore_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/runseal/runseal/internal/pgtest"
	"github.com/runseal/runseal/lifecycle/journalstore"
	"github.com/runseal/runseal/lifecycle/lifecycletest"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/postgres"
)

// oneProcess presents a PostgreSQL journal as unshared, with a lock file,
// so that this test runs the one-writer path (the in-process serialization
// SQLite uses) on PostgreSQL's store semantics (leases, fences, seals, group
// commit). The shared path is shared_test.go's and multiprocess_test.go's.
type oneProcess struct {
	store.Journal
	lock string
}

func (o oneProcess) IsShared() bool                       { return false }
func (o oneProcess) File(context.Context) (string, error) { return o.lock, nil }

type pgBackend struct {
	*journalstore.Storage
	j     oneProcess
	pg    *postgres.Store
	check func(error)
}

func (b pgBackend) Close() error {
	b.check(checkRebuild(context.Background(), b.Storage, b.j))
	return errors.Join(b.Storage.Close(), b.pg.Close())
}

// TestJournalStorageConformancePostgres runs the conformance suite against
// JournalStorage on a PostgreSQL journal, with group commit on (the
// default) and off (MaxGroup 1), and checks after each check that the view
// it kept is the one the journal holds.
func TestJournalStorageConformancePostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	for _, group := range []int{0, 1} {
		t.Run(fmt.Sprintf("max-group=%d", group), func(t *testing.T) {
			dir := t.TempDir()
			var n atomic.Int64
			var mu sync.Mutex
			var errs []error
			lifecycletest.Run(t, func() (lifecycletest.Backend, error) {
				i := n.Add(1)
				tenant := fmt.Sprintf("lc%d-%d-%s", group, i, strings.ToLower(store.NewRunID().String()))
				pg, err := postgres.Open(context.Background(), dsn, postgres.Options{Tenant: tenant, MaxGroup: group, MaxConns: 4})
				if err != nil {
					return nil, err
				}
				j := oneProcess{pg, filepath.Join(dir, fmt.Sprintf("%d.lock", i))}
				s, err := journalstore.New(j)
				if err != nil {
					pg.Close()
					return nil, err
				}
				return pgBackend{Storage: s, j: j, pg: pg, check: func(err error) {
					if err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
				}}, nil
			})
			for _, err := range errs {
				t.Errorf("after a conformance check: %v", err)
			}
		})
	}
}
