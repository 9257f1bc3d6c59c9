package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/journalstore"
	"github.com/runseal/runseal/store"
)

func (a *app) studyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "study",
		Short: "Inspect a trial lifecycle study kept in the journal",
		Long: `A study kept by the trial lifecycle (package lifecycle/journalstore) is a
case: its study run holds the budget, the reservations, the finalization
claim, the outbox and every trial's end; each trial is a run of the case,
sealed once the trial is terminal. See spec/lifecycle.md.

  list    the journal's studies, most recently active first, with counts
  show    a study's trials, finalization owner and outbox
  repair  void the records a second writer left in a trial run

list and show read the journal and write nothing, on SQLite or PostgreSQL
(--store); repair writes, with the service stopped.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(a.stderr)
			_ = cmd.Help()
			return usageErrorf("study needs a subcommand: list, show or repair")
		},
	}
	cmd.AddCommand(a.studyListCmd(), a.studyShowCmd(), a.studyRepairCmd())
	return cmd
}

func (a *app) studyShowCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show STUDY [--json]",
		Short: "Show a study's trials, finalization owner and outbox records",
		Long: `Show the study STUDY (its case id) as its records say it stands:

  trials        number, id, state, owner, owner epoch, heartbeat, sealed
  finalization  the study-wide finalization claim: holder, fence, heartbeat
  outbox        each terminal trial's record: phase and pending effects

It reads the journal and writes nothing, so it is safe beside the service
that runs the study. A transition whose commit point is in the journal but
whose trial run records or seal are not (interrupted, or in flight) is shown
as it will complete, and listed as pending; the service completes it before
the study's next operation.

A study whose records do not fold (written by a second writer, or edited)
is refused with exit 1, naming the first record that does not fold.`,
		Example: `  journal study show 01J9Z8Q4W5X6Y7Z8A9B0C1D2E3
  journal study show case_01J9Z8Q4W5X6Y7Z8A9B0C1D2E3 --json`,
		Args: cobra.ExactArgs(1),
		RunE: wrapRun(func(cmd *cobra.Command, args []string) error {
			c, err := store.ParseCaseID(args[0])
			if err != nil || c.IsZero() {
				return usageErrorf("STUDY %q is not a study id (a 26-character ULID, optionally prefixed case_)", args[0])
			}
			return a.withStore(cmd.Context(), func(s journalStore) error {
				v, err := journalstore.ReadStudyView(cmd.Context(), s, lifecycle.StudyID(c.String()))
				if lifecycle.KindOf(err) == lifecycle.KindNotFound {
					return fmt.Errorf("no study %s in the journal (tenant %s)", c, a.tenant)
				}
				var ie *journalstore.InconsistentError
				if errors.As(err, &ie) {
					return fmt.Errorf("study %s: its records do not fold at run %s seq %d: %s; the lifecycle refuses the study from there on (spec/lifecycle.md 14.5); see the record with: journal read %s", c, ie.Run, ie.Seq, ie.Detail, ie.Run)
				}
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(a.stdout, v)
				}
				return v.WriteText(a.stdout)
			})
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the view as one JSON document")
	return cmd
}

func (a *app) studyListCmd() *cobra.Command {
	var asJSON bool
	var limit int
	cmd := &cobra.Command{
		Use:   "list [--limit N] [--json]",
		Short: "List the journal's studies with their trial and outbox counts",
		Long: `List the studies of the journal (tenant), the most recently active first:
for each, its trials by state, the finalization claim's holder, the outbox
records not yet done, and the transitions pending completion. Each study is
read with the fold 'study show' uses, so a listing costs one fold per
study; --limit bounds it. A study whose records do not fold is listed as
inconsistent, naming the first record that does not fold.`,
		Example: `  journal study list
  journal study list --limit 5 --json
  journal study list --store postgres://runseal@db/runseal --tenant lab`,
		Args: cobra.NoArgs,
		RunE: wrapRun(func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || limit > store.MaxLimit {
				return usageErrorf("--limit %d is outside 1 to %d", limit, store.MaxLimit)
			}
			return a.withStore(cmd.Context(), func(s journalStore) error {
				studies, err := journalstore.ListStudies(cmd.Context(), s, nil, limit)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(a.stdout, studies)
				}
				return journalstore.WriteStudies(a.stdout, studies)
			})
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the listing as one JSON array")
	cmd.Flags().IntVar(&limit, "limit", 50, "list at most N studies")
	return cmd
}

func (a *app) studyRepairCmd() *cobra.Command {
	var asJSON bool
	var reason string
	cmd := &cobra.Command{
		Use:   "repair STUDY --reason TEXT [--json]",
		Short: "Void the records that keep a study from folding (a second writer's)",
		Long: `Repair a study whose records do not fold because a trial run holds records
that are not the study's: written by a second JournalStorage before the
one-writer lock existed, or appended to the run by hand. 'study show' names
the first such record.

repair appends to the study run a TrialRecordsVoided record, with your
reason, voiding that trial run's records from the first that does not fold
to the run's head. The records stay in the journal (it is append-only, and
they still verify) and 'study show' lists them as voided; the lifecycle
skips them. If they had fenced the trial's running owner out of its run,
the trial is failed as a stale owner's (intent runseal.repair), so that its
finalization runs. Run it again if the study then does not fold at a later
record. See spec/lifecycle.md 14.8.

repair takes the journal's one-writer lock: stop the service that runs the
study first. It refuses a study that folds, and damage outside trial runs.`,
		Example: `  journal study repair 01J9Z8Q4W5X6Y7Z8A9B0C1D2E3 --reason "second writer, ticket 4711"`,
		Args:    cobra.ExactArgs(1),
		RunE: wrapRun(func(cmd *cobra.Command, args []string) error {
			c, err := store.ParseCaseID(args[0])
			if err != nil || c.IsZero() {
				return usageErrorf("STUDY %q is not a study id (a 26-character ULID, optionally prefixed case_)", args[0])
			}
			if reason == "" {
				return usageErrorf("repair needs --reason: it is recorded in the journal")
			}
			return a.withStore(cmd.Context(), func(s journalStore) error {
				ls, err := journalstore.New(s)
				if err != nil {
					return err
				}
				defer ls.Close()
				rep, err := ls.Repair(cmd.Context(), lifecycle.StudyID(c.String()), reason)
				if rep.Authority == 0 && err != nil {
					return err
				}
				if asJSON {
					if werr := writeJSON(a.stdout, rep); werr != nil {
						return werr
					}
				} else {
					if rep.Authority != 0 {
						fmt.Fprintf(a.stdout, "voided records %d to %d of trial %s (study run record %d):\n", rep.From, rep.To, rep.Trial, rep.Authority)
					}
					for _, r := range rep.Records {
						fmt.Fprintf(a.stdout, "  seq %d  %s  epoch %d\n", r.Seq, r.Kind, r.Epoch)
					}
					for _, tr := range rep.OwnerFailed {
						fmt.Fprintf(a.stdout, "trial %s: its owner had been fenced out; the trial is failed (intent %s)\n", tr, journalstore.RepairIntent)
					}
				}
				if err != nil {
					return fmt.Errorf("the study still does not fold: %w", err)
				}
				return nil
			})
		}),
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why the records are voided; recorded in the journal")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was voided as one JSON document")
	return cmd
}
