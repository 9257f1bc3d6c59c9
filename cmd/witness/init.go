package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/witness"
)

func (a *app) initCmd() *cobra.Command {
	var (
		name    string
		keyPath string
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "init --name NAME",
		Short: "Create the witness key and state file",
		Long: `Create a new witness key (Ed25519, cosignature/v1) named NAME and the state
file, and print the verifier key that log operators put in their witness
policies.

The key file is created with mode 0600 and is never printed. An existing key
file is never overwritten: init refuses it. The state file is created if
missing; an existing one is kept, and NAME is recorded in it, so that no log
can be added under the witness's own name.

To add a second key (rotation, or a second cosigner name), run init with
another --key path and serve with both --key flags. Use a different key for
each name: a cosignature does not cover the name.`,
		Example: `  witness init --name witness.example/w1
  witness init --name witness.example/w1 --key /etc/witness/w1.key --db /var/lib/witness/witness.db
  witness init --name witness.example/w2 --key w2.key --json`,
		Args: cobra.NoArgs,
		RunE: wrapRun(func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				return usageErrorf("--name is required: the name the witness cosigns as, such as witness.example/w1")
			}
			skey, vkey, err := checkpoint.GenerateCosignerKey(rand.Reader, name)
			if err != nil {
				return usageErrorf("--name: %v", err)
			}
			kp := keyPaths(nonEmpty(keyPath))[0]
			abs, err := filepath.Abs(kp)
			if err != nil {
				return err
			}
			// O_EXCL makes "does it exist" and "create it" one step: a key
			// is never replaced, even by two inits racing.
			f, err := os.OpenFile(abs, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("a key (or another file) already exists at %s; nothing was changed", abs)
			}
			if err != nil {
				return fmt.Errorf("create key: %w", err)
			}
			_, werr := fmt.Fprintf(f, "# runseal witness key %s: keep secret\n%s\n", name, skey)
			serr := f.Sync()
			if err := errors.Join(werr, serr, f.Close()); err != nil {
				os.Remove(abs)
				return fmt.Errorf("write key: %w", err)
			}
			db, err := filepath.Abs(a.dbPath())
			if err != nil {
				return err
			}
			st, err := witness.OpenStore(cmd.Context(), db, witness.StoreOptions{Create: true, Logger: a.log})
			if err == nil {
				err = errors.Join(st.AddWitnessNames(cmd.Context(), name), st.Close())
			}
			if err != nil {
				// The key was never used; leave no key behind that the
				// state file does not know.
				os.Remove(abs)
				return fmt.Errorf("state %s: %w", db, err)
			}
			if asJSON {
				return writeJSON(a.stdout, map[string]string{"name": name, "vkey": vkey, "key_file": abs, "db": db})
			}
			_, err = fmt.Fprintf(a.stdout, "created witness key %s\nstate: %s\nverifier key (give this to log operators):\n%s\n", abs, db, vkey)
			return err
		}),
	}
	cmd.Flags().StringVar(&name, "name", "", "the name the witness cosigns as, such as witness.example/w1 (required)")
	cmd.Flags().StringVar(&keyPath, "key", "", "key file to create (default $"+envKey+", else ./"+defaultKey+")")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {name, vkey, key_file, db} as JSON")
	return cmd
}

func (a *app) keyCmd() *cobra.Command {
	var (
		keys   []string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "key",
		Short: "Print the witness's verifier keys",
		Long: `Print the verifier key (vkey) of each witness key, one per line: the public
half, for log operators' witness policies. The secret is never printed.`,
		Example: `  witness key
  witness key --key w1.key --key w2.key --json`,
		Args: cobra.NoArgs,
		RunE: wrapRun(func(cmd *cobra.Command, _ []string) error {
			cs, err := a.loadCosigners(keyPaths(keys))
			if err != nil {
				return err
			}
			for _, c := range cs {
				v := c.Verifier()
				if asJSON {
					err = writeJSON(a.stdout, map[string]string{"name": v.Name(), "key_id": fmt.Sprintf("%08x", v.KeyHash()), "vkey": v.String()})
				} else {
					_, err = fmt.Fprintln(a.stdout, v.String())
				}
				if err != nil {
					return err
				}
			}
			return nil
		}),
	}
	cmd.Flags().StringArrayVar(&keys, "key", nil, "key file, repeatable (default $"+envKey+", else ./"+defaultKey+")")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one {name, key_id, vkey} JSON object per key")
	return cmd
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
