package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/runseal/runseal/api/server"
	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/store"
)

// withTokens runs fn on the journal's token store.
func (a *app) withTokens(ctx context.Context, fn func(ts store.TokenStore) error) error {
	js, _, err := a.openStore(ctx, a.location(), a.tenant, false)
	if err != nil {
		return err
	}
	defer js.Close()
	ts, ok := js.(store.TokenStore)
	if !ok {
		return fmt.Errorf("this store keeps no tokens")
	}
	return fn(ts)
}

func (a *app) tokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list or revoke API tokens for 'journal serve'",
		Long: `API bearer tokens for 'journal serve'. A token reaches one tenant (--tenant)
with the role reader (reads, listings, proofs) or writer (also append,
leases, seal, cancel). Only the SHA-256 of a token is stored: its secret is
printed once, at creation.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(a.stderr)
			_ = cmd.Help()
			return usageErrorf("token needs a subcommand: create, list or revoke")
		},
	}

	var role, name string
	var asJSON bool
	create := &cobra.Command{
		Use:     "create --role reader|writer [--name N]",
		Short:   "Create a token and print its secret (once)",
		Example: `  journal token create --role writer --name ci --tenant acme`,
		Args:    cobra.NoArgs,
		RunE: wrapRun(func(cmd *cobra.Command, _ []string) error {
			if role != store.RoleReader && role != store.RoleWriter {
				return usageErrorf("--role %q: want reader or writer", role)
			}
			id, secret, hash, err := server.NewToken()
			if err != nil {
				return err
			}
			t := store.Token{ID: id, Tenant: a.tenant, Role: role, Name: name, Hash: hash, Created: time.Now().UTC()}
			return a.withTokens(cmd.Context(), func(ts store.TokenStore) error {
				if err := ts.CreateToken(cmd.Context(), t); err != nil {
					return err
				}
				if asJSON {
					return writeJSON(a.stdout, map[string]any{"id": id, "tenant": t.Tenant, "role": role, "name": name, "token": secret})
				}
				_, err := fmt.Fprintf(a.stdout, "%s\n", secret)
				fmt.Fprintf(a.stderr, "journal: token %s (%s, tenant %s) created; its secret is shown only now\n", id, role, t.Tenant)
				return err
			})
		}),
	}
	create.Flags().StringVar(&role, "role", "", "reader or writer (required)")
	create.Flags().StringVar(&name, "name", "", "a label for people")
	create.Flags().BoolVar(&asJSON, "json", false, "print {id, tenant, role, name, token} as JSON")
	_ = create.MarkFlagRequired("role")

	var listJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List tokens (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: wrapRun(func(cmd *cobra.Command, _ []string) error {
			return a.withTokens(cmd.Context(), func(ts store.TokenStore) error {
				toks, err := ts.Tokens(cmd.Context())
				if err != nil {
					return err
				}
				if listJSON {
					if toks == nil {
						toks = []store.Token{}
					}
					return writeJSON(a.stdout, toks)
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tTENANT\tROLE\tNAME\tCREATED\tREVOKED")
				for _, t := range toks {
					rev := "-"
					if t.Revoked != nil {
						rev = t.Revoked.Format(time.RFC3339)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Tenant, t.Role, t.Name, t.Created.Format(time.RFC3339), rev)
				}
				return tw.Flush()
			})
		}),
	}
	list.Flags().BoolVar(&listJSON, "json", false, "print the tokens as a JSON array")

	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token; it stops working at once",
		Args:  cobra.ExactArgs(1),
		RunE: wrapRun(func(cmd *cobra.Command, args []string) error {
			return a.withTokens(cmd.Context(), func(ts store.TokenStore) error {
				ok, err := ts.RevokeToken(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("no live token %q", args[0])
				}
				_, err = fmt.Fprintf(a.stdout, "revoked token %s\n", args[0])
				return err
			})
		}),
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

func (a *app) witnessedCmd() *cobra.Command {
	var policyPath string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "witnessed [--json]",
		Short: "Print the newest witnessed checkpoint with its cosignatures",
		Long: `Print the newest checkpoint whose witness cosignatures met the policy, as a
signed note carrying the log signature and the cosignatures. Fails (exit 1)
when none is witnessed yet. With --policy, the note is checked again with
that policy before it is printed. Witness alarms the publisher kept (a
witness that lost or rolled back its state) are printed on stderr, one
"ALARM" line each, and as "alarms" in --json.`,
		Args: cobra.NoArgs,
		RunE: wrapRun(func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			js, _, err := a.openStore(ctx, a.location(), a.tenant, false)
			if err != nil {
				return err
			}
			defer js.Close()
			ps, ok := js.(store.PublicationStore)
			if !ok {
				return fmt.Errorf("this store keeps no witness cosignatures")
			}
			alarms, err := witnessAlarms(ctx, js)
			if err != nil {
				return err
			}
			warnAlarms(a.stderr, alarms)
			w, err := ps.LatestWitnessed(ctx)
			if err != nil {
				return err
			}
			if w == nil {
				return fmt.Errorf("no checkpoint is witnessed yet")
			}
			var cosigs []checkpoint.Cosignature
			if policyPath != "" {
				pol, err := checkpoint.LoadPolicy(policyPath)
				if err != nil {
					return usageErrorf("--policy: %v", err)
				}
				_, vkey, err := loadSigner(a.keyPath(), js.Origin())
				if err != nil {
					return err
				}
				lv, err := checkpoint.NewVerifier(vkey)
				if err != nil {
					return err
				}
				signed, err := pol.Verify(w.Note, server.PolicyLogArgs(pol, lv)...)
				if err != nil {
					return fmt.Errorf("the witnessed checkpoint %d does not verify with %s: %w", w.Size, policyPath, err)
				}
				cosigs = signed.Cosignatures()
			}
			if asJSON {
				v := map[string]any{"origin": js.Origin(), "size": w.Size, "root": b64(w.Root), "note": string(w.Note), "witnessed_at": w.SignedAt}
				if cosigs != nil {
					v["cosignatures"] = cosigs
				}
				if alarms != nil {
					v["alarms"] = alarms
				}
				return writeJSON(a.stdout, v)
			}
			_, err = a.stdout.Write(w.Note)
			return err
		}),
	}
	cmd.Flags().StringVar(&policyPath, "policy", "", "check the note with this tlog-policy file before printing")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {origin, size, root, note, witnessed_at} as JSON")
	return cmd
}
