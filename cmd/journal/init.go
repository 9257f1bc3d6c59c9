package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/runseal/runseal/store"
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
				if err := store.ValidateOrigin(origin); err != nil {
					return usageErrorf("--origin: %v", err)
				}
			}
			if isDSN(a.storeArg) {
				return usageErrorf("init creates a journal file; a postgres:// store is created on first use (journal serve --store DSN --key FILE)")
			}
			loc := a.location()
			abs, err := filepath.Abs(loc.path)
			if err != nil {
				return err
			}
			keyPath, err := filepath.Abs(loc.key)
			if err != nil {
				return err
			}
			if err := store.ValidateTenant(a.tenant); err != nil {
				return usageErrorf("--tenant: %v", err)
			}
			o, vkey, err := a.createJournal(cmd.Context(), abs, keyPath, a.tenant, origin)
			if err != nil {
				return err
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
