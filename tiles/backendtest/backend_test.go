// Package backendtest runs the tiles over both journal backends, so that
// their LogLeaves and LogNodes (the tiles.Source they implement) are
// checked against what fsck and a client accept.
package backendtest

import (
	"context"
	"crypto/rand"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/internal/pgtest"
	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/postgres"
	"github.com/runseal/runseal/store/sqlite"
	"github.com/runseal/runseal/tiles"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type backend interface {
	store.Journal
	store.CheckpointStore
	tiles.Source
}

var (
	_ tiles.Source = (*sqlite.Store)(nil)
	_ tiles.Source = (*postgres.Store)(nil)
)

func TestTilesOverBackends(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			var s backend
			if name == "sqlite" {
				ss, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "j.db"), sqlite.Options{Origin: "example.com/log"})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { ss.Close() })
				s = ss
			} else {
				// A fresh tenant per run: the server may be shared.
				tenant := "tiles-" + strings.ToLower(store.NewRunID().String())
				ps, err := postgres.Open(ctx, pgtest.DSN(t), postgres.Options{Tenant: tenant})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { ps.Close() })
				s = ps
			}
			seal(t, s, 300)
			cp, err := s.Checkpoint(ctx)
			if err != nil {
				t.Fatal(err)
			}
			skey, _, err := checkpoint.GenerateLogKey(rand.Reader, cp.Origin)
			if err != nil {
				t.Fatal(err)
			}
			signer, _ := checkpoint.NewSigner(skey)
			msg, err := checkpoint.Sign(checkpoint.Checkpoint{Origin: cp.Origin, Size: cp.Size, Root: cp.Root}, signer)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.SaveCheckpoint(ctx, store.SignedCheckpoint{Size: cp.Size, Root: cp.Root, Note: msg}); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if _, err := tiles.Sync(ctx, tiles.NewLog(s), dir, tiles.SyncOptions{}); err != nil {
				t.Fatalf("Sync: %v", err)
			}
			if _, err := tiles.Fsck(ctx, tiles.DirFetcher{Dir: dir}, cp.Size, log.Hash(cp.Root)); err != nil {
				t.Fatalf("Fsck: %v", err)
			}
			// A client's inclusion proof from the tiles is the store's.
			tr := tiles.NewTree(cp.Size, log.Hash(cp.Root), tiles.DirFetcher{Dir: dir}, nil)
			leaves, err := s.LogLeaves(ctx, 0, cp.Size)
			if err != nil {
				t.Fatal(err)
			}
			for _, i := range []uint64{0, 255, 256, 299} {
				p, err := tr.InclusionProof(ctx, i)
				if err != nil {
					t.Fatal(err)
				}
				if err := log.VerifyInclusion(log.Hash(leaves[i]), i, cp.Size, p, log.Hash(cp.Root)); err != nil {
					t.Fatalf("leaf %d: %v", i, err)
				}
			}
			// Beyond the log is NotFound, never a short answer; a range too
			// wide is refused.
			var nf *store.NotFoundError
			if _, err := s.LogLeaves(ctx, 299, 301); !errors.As(err, &nf) {
				t.Errorf("LogLeaves beyond the log: %v, want NotFoundError", err)
			}
			if _, err := s.LogNodes(ctx, 8, 0, 2); !errors.As(err, &nf) {
				t.Errorf("LogNodes beyond the log: %v, want NotFoundError", err)
			}
			var ia *store.InvalidArgumentError
			if _, err := s.LogNodes(ctx, 0, 0, 1<<20); !errors.As(err, &ia) {
				t.Errorf("LogNodes of 2^20: %v, want InvalidArgumentError", err)
			}
		})
	}
}

func seal(t *testing.T, s backend, n int) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				run := store.NewRunID()
				if _, err := s.Append(ctx, 1, []store.Append{{Run: run, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)}}); err != nil {
					errs <- err
					return
				}
				if _, err := s.Seal(ctx, run, 1, "succeeded"); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
