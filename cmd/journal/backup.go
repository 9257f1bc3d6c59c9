package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sqlite"
)

// backupReport is what backup prints with --json.
type backupReport struct {
	Out     string         `json:"out"`
	Bytes   int64          `json:"bytes"`
	Tenants []tenantVerify `json:"tenants"`
	Seconds float64        `json:"seconds"`
}

// tenantVerify is one tenant's verdict on the copy, in verify --all's words.
type tenantVerify struct {
	Tenant string `json:"tenant"`
	Report string `json:"report"`
}

func (a *app) backupCmd() *cobra.Command {
	var out string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "backup --out FILE",
		Short: "Copy a live SQLite journal consistently, then verify the copy before calling it a backup",
		Long: `Write a consistent copy of the whole journal file (every tenant) while
'journal serve' or other writers go on, using SQLite's VACUUM INTO on one read
snapshot, so writers are never blocked. The copy is written beside FILE under
a temporary name, fsynced, and then verified as 'verify --all' verifies a
journal (every tenant's chains, seals, Merkle log and signed checkpoints).
Only a copy that verifies is renamed to FILE; one that does not is removed and
backup exits 1 naming what failed. FILE must not exist.

A PostgreSQL journal is backed up with PostgreSQL's own tools (pg_dump, or a
base backup); see the README.`,
		Example: `  journal backup --out /backups/runseal-$(date +%F).db
  journal backup --db /srv/runseal.db --out copy.db --json`,
		Args: cobra.NoArgs,
		RunE: wrapRun(func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usageErrorf("--out FILE is required")
			}
			loc := a.location()
			if loc.dsn != "" {
				return usageErrorf("backup copies a SQLite journal file; back up PostgreSQL with pg_dump or a base backup (see the README)")
			}
			return a.backup(cmd.Context(), loc, out, asJSON)
		}),
	}
	cmd.Flags().StringVar(&out, "out", "", "the backup file to create (must not exist)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

func (a *app) backup(ctx context.Context, loc location, out string, asJSON bool) error {
	start := time.Now()
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(abs); err == nil {
		return fmt.Errorf("%s already exists; backup never overwrites", abs)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	// The copy gets its final name only once it verifies, so a crash or a
	// failed check never leaves a file that looks like a backup. A partial
	// file of an earlier, interrupted backup to the same FILE is ours.
	partial := abs + ".partial"
	for _, p := range []string{partial, partial + "-wal", partial + "-shm"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	defer func() {
		os.Remove(partial)
		os.Remove(partial + "-wal")
		os.Remove(partial + "-shm")
	}()

	progress := isTerminal(a.stderr)
	if progress {
		fmt.Fprintf(a.stderr, "journal: copying %s ...\n", loc.path)
	}
	err = a.withStore(ctx, func(s journalStore) error {
		ss, ok := s.(*sqlite.Store)
		if !ok {
			return fmt.Errorf("backup needs a SQLite journal, not %T", s)
		}
		return ss.Backup(ctx, partial)
	})
	if err != nil {
		return err
	}
	if progress {
		fmt.Fprintln(a.stderr, "journal: verifying the copy ...")
	}
	rep, err := a.verifyCopy(ctx, partial)
	if err != nil {
		return fmt.Errorf("the copy did not verify, so there is no backup (nothing written at %s): %w", abs, err)
	}
	if err := os.Rename(partial, abs); err != nil {
		return fmt.Errorf("rename the verified copy into place: %w", err)
	}
	if err := syncDir(filepath.Dir(abs)); err != nil {
		return err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return err
	}
	rep.Out, rep.Bytes, rep.Seconds = abs, fi.Size(), time.Since(start).Seconds()
	if asJSON {
		return writeJSON(a.stdout, rep)
	}
	for _, t := range rep.Tenants {
		fmt.Fprintf(a.stdout, "tenant %s: %s\n", t.Tenant, t.Report)
	}
	fmt.Fprintf(a.stdout, "backup: %s (%d bytes) written and verified in %.1fs\n", abs, rep.Bytes, rep.Seconds)
	return nil
}

// verifyCopy runs verify --all over every tenant of the journal file at path
// and returns each tenant's stated scope, or the first failure.
func (a *app) verifyCopy(ctx context.Context, path string) (backupReport, error) {
	var rep backupReport
	first, err := sqlite.Open(ctx, path, sqlite.Options{Logger: a.log, NoWarm: true}) // verifies, serves no proofs
	if err != nil {
		return rep, fmt.Errorf("open the copy: %w", err)
	}
	defer first.Close()
	tenants, err := first.Tenants(ctx)
	if err != nil {
		return rep, err
	}
	if len(tenants) == 0 {
		tenants = []string{store.DefaultTenant}
	}
	for _, t := range tenants {
		view, err := first.ForTenant(t)
		if err != nil {
			return rep, err
		}
		// verify --all's checks and verdict, without its per-run lines,
		// through the page cache as verify --all reads (sqlite.Checker).
		c, err := view.Checker(ctx)
		if err != nil {
			view.Close()
			return rep, err
		}
		sum, err := store.VerifyAll(ctx, c, nil)
		c.Close()
		view.Close()
		if err == nil {
			err = verifyVerdict(sum)
		}
		if err != nil {
			return rep, fmt.Errorf("tenant %s: %w", t, err)
		}
		rep.Tenants = append(rep.Tenants, tenantVerify{Tenant: t, Report: intactLine(sum)})
	}
	return rep, nil
}

// syncDir fsyncs a directory, so a rename in it survives a crash.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
