package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/api/server"
	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/tiles"
)

// tilesRoutes serves each tenant's log as C2SP tlog-tiles under
// /tiles/<tenant>/ (spec/tiles.md): public with --public, else for a
// reader token of that tenant, like the other reads.
func tilesRoutes(logger *slog.Logger, public bool) []server.Route {
	return []server.Route{{
		Pattern: "GET /tiles/{tenant}/{path...}",
		Role:    server.RolePublic,
		Handle: func(w http.ResponseWriter, r *http.Request, t *server.Tenant) error {
			src, ok := t.Store.(tiles.Source)
			if !ok {
				http.Error(w, "this store does not publish tiles", http.StatusNotFound)
				return nil
			}
			r2 := new(http.Request)
			*r2 = *r
			u := *r.URL
			u.Path = r.PathValue("path")
			r2.URL = &u
			h := tiles.Handler{Log: tiles.NewLog(src), Logger: logger, Public: public}
			h.ServeHTTP(w, r2)
			return nil
		},
	}}
}

func (a *app) tilesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tiles",
		Short: "Publish the log as C2SP tlog-tiles static files, and check them",
		Long: `The log of sealed runs in the C2SP tlog-tiles layout (spec/tiles.md):
'checkpoint', 'checkpoint-witnessed', 'tile/<L>/<N>[.p/<W>]' and
'tile/entries/<N>[.p/<W>]', which any static web server or bucket can serve
and any tlog-tiles client (x/mod sumdb/tlog, Tessera's client, 'auditor
--tiles') can build proofs from. 'journal serve' serves the same layout at
/tiles/<tenant>/.`,
	}
	cmd.AddCommand(a.tilesSyncCmd(), a.tilesFsckCmd())
	return cmd
}

func (a *app) tilesSyncCmd() *cobra.Command {
	var dir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "sync --dir DIR",
		Short: "Write or bring up to date the tiles of the newest signed checkpoint in DIR",
		Long: `Write the tlog-tiles layout of the tenant's newest signed checkpoint into DIR,
continuing from the checkpoint DIR already holds (only new tiles are
written). Every file is written to a temporary file, fsynced and renamed into
place; the checkpoint is renamed last, after every tile it implies is in
place and checked against the signed root, so a reader of DIR (or a crash at
any moment) never sees a checkpoint that its tiles do not back.

A DIR holding another log's checkpoint, or a larger one than the journal's,
is refused and left alone. Nothing is read or written outside DIR: a symbolic
link inside it that leads out of it (tile/, tile/0, a checkpoint) is refused,
naming the link. Sign a checkpoint first ('journal checkpoint', or
'journal serve' signs them); run it from cron to keep a web server's
directory current.

Exit codes: 0 synced; 1 failed (nothing the old checkpoint implies was
removed or changed); 2 usage.`,
		Example: `  journal tiles sync --dir /var/www/log/tiles
  journal --store postgres://... --tenant acme tiles sync --dir ./acme-tiles --json`,
		Args: cobra.NoArgs,
		RunE: wrapRun(func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return usageErrorf("--dir DIR is required")
			}
			return a.withStore(cmd.Context(), func(s journalStore) error {
				src, ok := s.(tiles.Source)
				if !ok {
					return fmt.Errorf("this store cannot publish tiles")
				}
				start := time.Now()
				res, err := tiles.Sync(cmd.Context(), tiles.NewLog(src), dir, tiles.SyncOptions{
					OnWrite: func(p string) { a.log.Debug("tiles: wrote", "path", p) },
				})
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(a.stdout, struct {
						tiles.SyncResult
						Seconds float64 `json:"seconds"`
					}{res, time.Since(start).Seconds()})
				}
				fmt.Fprintf(a.stdout, "synced %s: size %d -> %d, %d tiles and %d entry bundles written (%d bytes) in %s\n",
					dir, res.From, res.To, res.Tiles, res.Bundles, res.Bytes, time.Since(start).Round(time.Millisecond))
				return nil
			})
		}),
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory to publish into (created if missing)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

func (a *app) tilesFsckCmd() *cobra.Command {
	var dir, logKey string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "fsck --dir DIR",
		Short: "Re-derive the root from every tile in DIR; name the first that disagrees",
		Long: `Check a tiles directory as a client would: verify DIR/checkpoint's log
signature (with --log-key, else the journal's own key), then re-derive its
root from every tile and entry bundle it implies, top-down (the right edge
against the root, each full tile against the hash its parent records, each
entry against its level-0 hash), and report the first resource that
disagrees, by path. DIR/checkpoint-witnessed, if present, is checked the same
way at its own size.

Exit codes: 0 every tile leads to the signed root; 1 a tile disagrees, is
malformed or missing, or the checkpoint does not verify; 2 usage.`,
		Example: `  journal tiles fsck --dir /var/www/log/tiles
  journal tiles fsck --dir ./mirror --log-key @log.vkey --json`,
		Args: cobra.NoArgs,
		RunE: wrapRun(func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return usageErrorf("--dir DIR is required")
			}
			ctx := cmd.Context()
			var results []tiles.FsckResult
			for _, name := range []string{tiles.CheckpointPath, tiles.WitnessedPath} {
				b, err := os.ReadFile(filepath.Join(dir, name))
				if name == tiles.WitnessedPath && errors.Is(err, os.ErrNotExist) {
					continue
				}
				if err != nil {
					return err
				}
				cp, err := a.verifyTilesCheckpoint(b, logKey)
				if err != nil {
					return fmt.Errorf("%s/%s: %w", dir, name, err)
				}
				res, err := tiles.Fsck(ctx, tiles.DirFetcher{Dir: dir}, cp.Size, cp.Root)
				if err != nil {
					return fmt.Errorf("%s (size %d): %w", name, cp.Size, err)
				}
				results = append(results, res)
			}
			if asJSON {
				return writeJSON(a.stdout, results)
			}
			for _, r := range results {
				fmt.Fprintf(a.stdout, "ok: size %d: %d tiles and %d entry bundles lead to the signed root\n", r.Size, r.Tiles, r.Bundles)
			}
			return nil
		}),
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the tiles directory")
	cmd.Flags().StringVar(&logKey, "log-key", "", "the log's verifier key, or @FILE (default: derived from the journal's key)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the results as JSON")
	return cmd
}

// verifyTilesCheckpoint opens a checkpoint note with the log's key.
func (a *app) verifyTilesCheckpoint(msg []byte, logKey string) (checkpoint.Checkpoint, error) {
	origin, err := checkpoint.NoteOrigin(msg)
	if err != nil {
		return checkpoint.Checkpoint{}, err
	}
	vkey, err := a.logVKey(logKey, origin)
	if err != nil {
		return checkpoint.Checkpoint{}, err
	}
	v, err := checkpoint.NewVerifier(vkey)
	if err != nil {
		return checkpoint.Checkpoint{}, err
	}
	signed, err := checkpoint.Open(msg, note.VerifierList(v))
	if err != nil {
		return checkpoint.Checkpoint{}, err
	}
	cp := signed.Checkpoint()
	if cp.Origin != origin {
		return checkpoint.Checkpoint{}, fmt.Errorf("origin %q is not the key's", cp.Origin)
	}
	return cp, nil
}

// tilesSyncEvery is how often serve --tiles-dir brings each tenant's
// directory up to date; a sync with nothing new writes nothing.
const tilesSyncEvery = 2 * time.Second

// keepTiles keeps dir/<tenant>/ the tlog-tiles layout of st's log until
// ctx ends. Failures are logged and retried: the directory keeps its last
// good checkpoint meanwhile.
func (a *app) keepTiles(ctx context.Context, st server.Store, dir string) {
	src, ok := st.(tiles.Source)
	if !ok {
		a.log.Error("serve: --tiles-dir: this store cannot publish tiles", "tenant", st.Tenant())
		return
	}
	out := filepath.Join(dir, st.Tenant())
	l := tiles.NewLog(src)
	for {
		res, err := tiles.Sync(ctx, l, out, tiles.SyncOptions{Within: dir}) // a tenant's directory linked out of dir is refused
		switch {
		case errors.Is(err, tiles.ErrNoCheckpoint):
		case err != nil && ctx.Err() == nil:
			a.log.Error("serve: --tiles-dir: sync failed", "tenant", st.Tenant(), "dir", out, "err", err)
		case err == nil && res.From != res.To:
			a.log.Info("serve: --tiles-dir: synced", "tenant", st.Tenant(), "dir", out, "from", res.From, "to", res.To)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(tilesSyncEvery):
		}
	}
}
