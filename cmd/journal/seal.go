package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/runseal/runseal/store"
)

func (a *app) sealCmd() *cobra.Command {
	var epoch uint64
	var outcome string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "seal RUN --epoch N --outcome O",
		Short: "Freeze a concluded run and make its head a leaf of the log",
		Long: fmt.Sprintf(`Seal RUN: it accepts no more records, and its terminal chain hash becomes
the next leaf of the tenant's Merkle log, in the same transaction. Prints
that hash.

The run's latest RunConcluded must carry --outcome, one of the sealing
outcomes %v (a failed or exhausted run stays open for resume), and --epoch
must pass the run's fence. Sealing again returns the same hash and changes
nothing: the first seal wins.`, store.SealingOutcomes),
		Example: `  journal seal 01J9Z8Q4W5X6Y7Z8A9B0C1D2E3 --epoch 3 --outcome succeeded`,
		Args:    cobra.ExactArgs(1),
		RunE: wrapRun(func(cmd *cobra.Command, args []string) error {
			run, err := parseRunArg(args[0])
			if err != nil {
				return err
			}
			ep, err := parseEpoch(epoch)
			if err != nil {
				return err
			}
			if err := store.ValidateOutcome(outcome); err != nil || !store.IsSealingOutcome(outcome) {
				return usageErrorf("--outcome %q: must be one of %v", outcome, store.SealingOutcomes)
			}
			return a.withStore(cmd.Context(), func(s journalStore) error {
				leaf, err := s.Seal(cmd.Context(), run, ep, outcome)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(a.stdout, map[string]any{"run": run, "outcome": outcome, "leaf": leaf})
				}
				_, err = fmt.Fprintf(a.stdout, "sealed run %s as %s; leaf %s\n", run, outcome, leaf)
				return err
			})
		}),
	}
	cmd.Flags().Uint64Var(&epoch, "epoch", 0, "lease epoch to seal under (required)")
	cmd.Flags().StringVar(&outcome, "outcome", "", "the sealing outcome the run concluded with (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {run, outcome, leaf} as JSON")
	_ = cmd.MarkFlagRequired("epoch")
	_ = cmd.MarkFlagRequired("outcome")
	return cmd
}

func (a *app) cancelCmd() *cobra.Command {
	var reason, actor string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "cancel RUN --reason R [--actor A]",
		Short: "Record a stop request beside a run's chain",
		Long: `Record a durable request to stop RUN. It needs no lease: the request lands
beside the chain, and the run's owner journals RunCancelled when it sees it.
The first request is kept; a later one reports the request already pending.

The actor defaults to $USER; its identity is asserted by the caller, not
proven, and is recorded as such.`,
		Example: `  journal cancel 01J9Z8Q4W5X6Y7Z8A9B0C1D2E3 --reason "customer withdrew the order"`,
		Args:    cobra.ExactArgs(1),
		RunE: wrapRun(func(cmd *cobra.Command, args []string) error {
			run, err := parseRunArg(args[0])
			if err != nil {
				return err
			}
			if actor == "" {
				actor = os.Getenv("USER")
			}
			if actor == "" {
				actor = "operator"
			}
			op := store.Operator{Actor: actor, Basis: store.Asserted}
			if err := op.Validate(); err != nil {
				return usageErrorf("--actor: %v", err)
			}
			if reason == "" || len(reason) > 4096 {
				return usageErrorf("--reason: must be 1 to 4096 bytes")
			}
			return a.withStore(cmd.Context(), func(s journalStore) error {
				created, err := s.RequestCancel(cmd.Context(), run, op, reason)
				if err != nil {
					return err
				}
				c, err := s.Cancellation(cmd.Context(), run)
				if err != nil {
					return err
				}
				if c == nil {
					return fmt.Errorf("run %s: the cancellation request was accepted but cannot be read back", run)
				}
				if asJSON {
					return writeJSON(a.stdout, map[string]any{"run": run, "created": created, "cancellation": c})
				}
				verb := "cancellation requested"
				if !created {
					verb = "a cancellation was already pending; kept the first"
				}
				_, err = fmt.Fprintf(a.stdout, "%s for run %s: by %s (%s) at %s: %s\n", verb, run, c.Actor.Actor, c.Actor.Basis, c.At.Format(time.RFC3339), c.Reason)
				return err
			})
		}),
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why the run should stop (required)")
	cmd.Flags().StringVar(&actor, "actor", "", "who asks (default $USER)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	_ = cmd.MarkFlagRequired("reason")
	return cmd
}
