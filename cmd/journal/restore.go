package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/spf13/cobra"

	"github.com/runseal/runseal/disclosure"
	"github.com/runseal/runseal/store"
)

func (a *app) restoreCmd() *cobra.Command {
	var asJSON, resume bool
	var bulkRuns, bulkSeals int
	var profile string
	cmd := &cobra.Command{
		Use:   "restore FILE",
		Short: "Rebuild a journal from an export; succeed only if its log is the exported one",
		Long: `Replay an export (from "journal export") into the journal: first read it whole
and refuse, writing nothing, if it is cut, of an unknown version, malformed,
a disclosure package, or if the journal already holds any of its runs or
admission keys or has a non-empty log; then append every run's records
with their exact bytes, up to 2,048 runs per transaction with every check
of the ordinary append (SQLite and PostgreSQL), and seal the sealed runs in
log-index order, up to 8,192 per transaction, each bulk as soon as its runs'
records are committed (beside the appends that follow). On a terminal stderr shows a progress bar per
phase with its rate and the time left; otherwise progress goes to the log.

The restore succeeds only if the rebuilt log has the export's size and root.
Create the target with "journal init" first; its origin may differ from the
export's (the tree is the same, its name is not). FILE must be a regular
file: it is read twice. Memory does not grow with the export: what spans the
whole file is kept in temporary files under $TMPDIR (about 64 bytes per
sealed run and 48 per admission key).

A restore that was interrupted (killed, a full disk) is finished by running it
again with --resume on the same target and FILE: runs and leaves the target
already holds are checked against the export (each run's last record hash,
the log's root) and skipped, so no run is duplicated; a target holding
anything else is refused, naming the run or log at fault.`,
		Example: `  journal init --db restored.db --origin example.com/log
  journal restore acme.export.jsonl --db restored.db --tenant acme
  journal restore acme.export.jsonl --db restored.db --tenant acme --resume`,
		Args: cobra.ExactArgs(1),
		RunE: wrapRun(func(cmd *cobra.Command, args []string) error {
			f, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			if profile != "" {
				pf, err := os.Create(profile)
				if err != nil {
					return err
				}
				defer pf.Close()
				if err := pprof.StartCPUProfile(pf); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			return a.withStore(cmd.Context(), func(s journalStore) error {
				progress := newRestoreProgress(a.stderr, a.log) // restore_progress.go
				rep, err := disclosure.RestoreWith(cmd.Context(), s, f, disclosure.RestoreOptions{Resume: resume, Progress: progress.update, BulkRuns: bulkRuns, BulkSeals: bulkSeals})
				progress.end()
				if rep != nil && (err == nil || asJSON) {
					if asJSON {
						if werr := writeJSON(a.stdout, rep); werr != nil {
							return werr
						}
					} else {
						if rep.Resumed {
							fmt.Fprintf(a.stdout, "resumed: the target already held %d records and %d leaves of the export\n", rep.ResumedRecords, rep.ResumedLeaves)
						}
						fmt.Fprintf(a.stdout, "restored %d runs (%d sealed), %d records; log size %d root %s (the export's: size %d root %s)\n",
							rep.Runs, rep.Sealed, rep.Records, rep.Rebuilt.Size, rep.Rebuilt.Root, rep.Expected.Size, rep.Expected.Root)
						if rep.OriginChanged {
							fmt.Fprintf(a.stdout, "the log's origin is now %q (it was %q)\n", rep.Rebuilt.Origin, rep.Expected.Origin)
						}
						if rep.ConcludedUnsealed > 0 {
							fmt.Fprintf(a.stdout, "%d runs concluded with a sealing outcome but had no leaf in the export: seal them to continue\n", rep.ConcludedUnsealed)
						}
						if rep.Awaiting > 0 {
							fmt.Fprintf(a.stdout, "%d runs came back suspended: resume them to act on their wait\n", rep.Awaiting)
						}
						fmt.Fprintf(a.stdout, "not carried by an export: %s\n", strings.Join(rep.NotCarried, "; "))
					}
				}
				return restoreFailed(err)
			})
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the restore report as JSON")
	cmd.Flags().BoolVar(&resume, "resume", false, "finish an interrupted restore of the same export into this target")
	cmd.Flags().IntVar(&bulkRuns, "bulk-runs", 0, "runs appended per transaction (0: 2048); smaller uses less memory and commits more often")
	cmd.Flags().IntVar(&bulkSeals, "bulk-seals", 0, "runs sealed per transaction (0: 8192)")
	cmd.Flags().StringVar(&profile, "cpuprofile", "", "write a CPU profile of the restore to this file")
	_ = cmd.Flags().MarkHidden("cpuprofile")
	return cmd
}

// restoreFailed is the error a failed restore ends with: err, and, when
// running the same command with --resume finishes the restore (the store
// failed or the run was interrupted, rather than the file, the target or
// the rebuilt log being refused), a line saying so, since the target may
// now hold part of the export.
func restoreFailed(err error) error {
	if err == nil {
		return nil
	}
	var refused *disclosure.RestoreRefusedError
	var format *disclosure.FormatError
	var unknown *disclosure.UnknownFormatError
	var cut *disclosure.CutError
	var unfaithful *disclosure.UnfaithfulRestoreError
	if errors.As(err, &refused) || errors.As(err, &format) || errors.As(err, &unknown) || errors.As(err, &cut) ||
		errors.As(err, &unfaithful) || errors.Is(err, disclosure.ErrNotAnExport) || store.IsDomain(err) || errors.Is(err, store.ErrCorrupt) {
		return fmt.Errorf("restore: %w", err)
	}
	return fmt.Errorf("restore: %w\nthe target may hold part of the export: once the store is reachable, run the same command with --resume to finish it", err)
}
