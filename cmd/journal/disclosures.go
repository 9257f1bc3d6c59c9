package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/runseal/runseal/store"
)

func (a *app) disclosuresCmd() *cobra.Command {
	var after string
	var limit int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "disclosures",
		Short: "List the disclosure register: who disclosed what to whom",
		Long: `List the tenant's acts of disclosure, oldest first: id, time, who, recipient,
the selection, the checkpoint, and the SHA-256 of the package delivered (an
auditor's "auditor verify" prints the same digest for the file it received).
The register is kept beside the journal, unchained, and never exported.`,
		Example: `  journal disclosures
  journal disclosures --json | jq -r 'select(.recipient | test("regulator")) | .package'`,
		Args: cobra.NoArgs,
		RunE: wrapRun(func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || limit > store.MaxLimit {
				return usageErrorf("--limit %d: must be from 1 to %d", limit, store.MaxLimit)
			}
			return a.withStore(cmd.Context(), func(s journalStore) error {
				acts, err := s.Disclosures(cmd.Context(), after, limit)
				if err != nil {
					return err
				}
				for _, d := range acts {
					if asJSON {
						if err := writeJSON(a.stdout, d); err != nil {
							return err
						}
						continue
					}
					signed := d.SignedBy
					if signed == "" {
						signed = "(no statement: recorded before packages were signed)"
					}
					fmt.Fprintf(a.stdout, "%s  %s  by %s (%s) to %s: %d runs, %d cases selected; %d runs (%d sealed), %d records; checkpoint %s size %d; package sha256 %s, %d bytes; signed by %s\n",
						d.ID, d.At.Format("2006-01-02T15:04:05Z"), d.By.Actor, d.By.Basis, d.Recipient, len(d.Runs), len(d.Cases),
						d.Carried, d.Sealed, d.Records, d.Checkpoint.Origin, d.Checkpoint.Size, d.Package, d.Bytes, signed)
				}
				return nil
			})
		}),
	}
	cmd.Flags().StringVar(&after, "after", "", "list acts after this id (for paging)")
	cmd.Flags().IntVar(&limit, "limit", 100, "at most this many acts")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per act (JSON Lines)")
	return cmd
}
