package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/runseal/runseal/disclosure"
	"github.com/runseal/runseal/log"
)

func (a *app) exportCmd() *cobra.Command {
	var out string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "export --out FILE",
		Short: "Write every run of the tenant, with its exact bytes and log positions, for restore",
		Long: `Write a whole export of the tenant (spec/disclosure.md section 5): every run,
every record with its exact stored bytes, and every sealed run's log index
and leaf, as of the log's checkpoint when the export begins (runs sealed
later are exported unsealed). Memory stays constant whatever the journal's
size. The disclosure register, leases and cancellation requests are not
exported.

--out - writes to stdout (the summary then goes to stderr); a file is
created new and never replaces one, and is removed if the export fails. An
export carries no signature: it is for "journal restore", not for auditors.`,
		Example: `  journal export --out acme.export.jsonl
  journal export --tenant acme --out - | gzip > acme.export.jsonl.gz`,
		Args: cobra.NoArgs,
		RunE: wrapRun(func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usageErrorf("--out FILE is required (- for stdout)")
			}
			// The export proves nothing: the log node cache the store
			// would fill behind its checkpoint is not kept (onePass).
			a.onePass = true
			return a.withStore(cmd.Context(), func(s journalStore) error {
				var w io.Writer = a.stdout
				var f *os.File
				report := a.stdout
				if out != "-" {
					var err error
					if f, err = os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err != nil {
						if errors.Is(err, fs.ErrExist) {
							return fmt.Errorf("%s already exists; an export never replaces a file", out)
						}
						return err
					}
					w = f
				} else {
					report = a.stderr
				}
				sum, err := disclosure.Export(cmd.Context(), s, w)
				if f != nil {
					if err == nil {
						err = f.Sync()
					}
					if cerr := f.Close(); err == nil {
						err = cerr
					}
					if err != nil {
						os.Remove(out)
					}
				}
				if err != nil {
					return fmt.Errorf("export: %w", err)
				}
				if asJSON {
					return writeJSON(report, sum)
				}
				_, err = fmt.Fprintf(report, "exported %d runs (%d sealed), %d records, %d bytes; log %s size %d root %s; sha256 %s\n",
					sum.Runs, sum.Sealed, sum.Records, sum.Bytes, sum.Checkpoint.Origin, sum.Checkpoint.Size, sum.Checkpoint.Root, sum.SHA256)
				return err
			})
		}),
	}
	cmd.Flags().StringVar(&out, "out", "", "the export file to create, or - for stdout (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary as JSON")
	return cmd
}

// nodeCacheBytes is the log node cache each opened store keeps: the store's
// default, or none for a one-pass command, which would only pay to fill it
// behind its first checkpoint. An export of 2x10^5 runs measured 185 MiB
// peak RSS and 3.9 CPU seconds with it, 94 MiB and 2.5 s without.
func (a *app) nodeCacheBytes() int64 {
	if a.onePass {
		return log.CacheNothing
	}
	return 0 // the store's default
}
