package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/runseal/runseal/store/sqlite"
)

func (a *app) initCmd() *cobra.Command {
	var origin string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Create a new journal file",
		Long: `Create a new, empty journal file and print where it is.

The path is --db, else $RUNSEAL_DB, else ./runseal.db. An existing file is
never touched: init refuses it. The log origin (the name checkpoints carry) is
fixed at creation; the default is a fresh "runseal/<ulid>".`,
		Example: `  journal init
  journal init --db /var/lib/runseal/journal.db --origin example.com/journal
  RUNSEAL_DB=/srv/j.db journal init --json`,
		Args: cobra.NoArgs,
		RunE: wrapRun(func(cmd *cobra.Command, _ []string) error {
			if origin != "" {
				if err := sqlite.ValidateOrigin(origin); err != nil {
					return usageErrorf("--origin: %v", err)
				}
			}
			path := a.dbPath()
			abs, err := filepath.Abs(path)
			if err != nil {
				return err
			}
			// O_EXCL makes "does it exist" and "create it" one step, so two
			// inits racing cannot both believe they made the journal.
			f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("a journal (or another file) already exists at %s; nothing was changed", abs)
			}
			if err != nil {
				return fmt.Errorf("create journal: %w", err)
			}
			f.Close()
			s, err := a.openPath(cmd.Context(), abs, origin)
			if err != nil {
				// The file is ours and empty or half-made: leave no debris.
				os.Remove(abs)
				os.Remove(abs + "-wal")
				os.Remove(abs + "-shm")
				return err
			}
			o := s.Origin()
			if err := s.Close(); err != nil {
				return fmt.Errorf("close journal: %w", err)
			}
			keyPath, err := filepath.Abs(a.keyPath())
			if err != nil {
				return err
			}
			vkey, err := createKey(keyPath, o)
			if err != nil {
				return fmt.Errorf("journal created at %s, but its log key was not: %w", abs, err)
			}
			if asJSON {
				return writeJSON(a.stdout, map[string]string{"path": abs, "tenant": a.tenant, "origin": o, "key": keyPath, "vkey": vkey})
			}
			_, err = fmt.Fprintf(a.stdout, "created journal at %s (origin %s)\nlog key (private, mode 0600) at %s\nverifier key: %s\n", abs, o, keyPath, vkey)
			return err
		}),
	}
	cmd.Flags().StringVar(&origin, "origin", "", "log origin for checkpoints (default runseal/<fresh ulid>)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {path, tenant, origin} as JSON")
	return cmd
}
