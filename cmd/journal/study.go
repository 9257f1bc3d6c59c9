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

  show  a study's trials, finalization owner and outbox`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(a.stderr)
			_ = cmd.Help()
			return usageErrorf("study needs a subcommand: show")
		},
	}
	cmd.AddCommand(a.studyShowCmd())
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
