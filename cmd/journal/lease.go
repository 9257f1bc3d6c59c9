package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/runseal/runseal/store"
)

func (a *app) leaseCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lease",
		Short: "Acquire, renew or release a run's lease (its fencing epoch)",
		Long: `A lease makes one owner the run's only writer: appends and seals must
present the lease's epoch, and any other epoch is refused (fenced).

  acquire  claims a free lease and always moves to a new epoch; a live lease
           is refused, even for its own holder
  renew    extends a live lease held by exactly (owner, epoch), same epoch
  release  hands the lease back if epoch holds it; idempotent

TTLs have whole-second granularity, at least 1s.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(a.stderr)
			_ = cmd.Help()
			return usageErrorf("lease needs a subcommand: acquire, renew or release")
		},
	}
	cmd.AddCommand(a.leaseAcquireCmd(), a.leaseRenewCmd(), a.leaseReleaseCmd())
	return cmd
}

func validateLeaseFlags(owner string, ttl time.Duration) error {
	if err := store.ValidateOwner(owner); err != nil {
		return usageErrorf("--owner: must be 1 to 256 bytes")
	}
	if _, err := store.TTLSeconds(ttl); err != nil {
		return usageErrorf("--ttl %s: must be from 1s to 100 years", ttl)
	}
	return nil
}

func (a *app) printLease(l store.Lease, verb string, asJSON bool) error {
	if asJSON {
		return writeJSON(a.stdout, l)
	}
	_, err := fmt.Fprintf(a.stdout, "%s run %s: owner %q, epoch %d, expires %s\n", verb, l.Run, l.Owner, l.Epoch, l.Expires.Format(time.RFC3339))
	return err
}

func (a *app) leaseAcquireCmd() *cobra.Command {
	var owner string
	var ttl time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "acquire RUN --owner O [--ttl 30s]",
		Short: "Claim a free lease at a new epoch",
		Long: `Claim RUN's lease for --owner for --ttl and print the new epoch, which
every append and seal of this owner must present. A run needs no records to
be leased: acquire before its first append.`,
		Example: `  journal lease acquire 01J9Z8Q4W5X6Y7Z8A9B0C1D2E3 --owner worker-7 --ttl 30s
  epoch=$(journal lease acquire 01J9Z8Q4W5X6Y7Z8A9B0C1D2E3 --owner w --json | jq .epoch)`,
		Args: cobra.ExactArgs(1),
		RunE: wrapRun(func(cmd *cobra.Command, args []string) error {
			run, err := parseRunArg(args[0])
			if err != nil {
				return err
			}
			if err := validateLeaseFlags(owner, ttl); err != nil {
				return err
			}
			return a.withStore(cmd.Context(), func(s journalStore) error {
				l, err := s.Acquire(cmd.Context(), run, owner, ttl)
				if err != nil {
					return err
				}
				return a.printLease(l, "acquired", asJSON)
			})
		}),
	}
	cmd.Flags().StringVar(&owner, "owner", "", "who holds the lease (required)")
	cmd.Flags().DurationVar(&ttl, "ttl", 30*time.Second, "how long the lease lasts unrenewed")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the lease as JSON")
	_ = cmd.MarkFlagRequired("owner")
	return cmd
}

func (a *app) leaseRenewCmd() *cobra.Command {
	var owner string
	var epoch uint64
	var ttl time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "renew RUN --owner O --epoch N [--ttl 30s]",
		Short: "Extend a live lease held by exactly (owner, epoch)",
		Long: `Extend RUN's lease by --ttl from now, keeping its epoch. Anyone but the
live holder (same owner, same epoch, not expired) is refused: the caller no
longer owns the run and must stop writing.`,
		Example: `  journal lease renew 01J9Z8Q4W5X6Y7Z8A9B0C1D2E3 --owner worker-7 --epoch 3 --ttl 30s`,
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
			if err := validateLeaseFlags(owner, ttl); err != nil {
				return err
			}
			return a.withStore(cmd.Context(), func(s journalStore) error {
				l, err := s.Renew(cmd.Context(), run, owner, ep, ttl)
				if err != nil {
					return err
				}
				return a.printLease(l, "renewed", asJSON)
			})
		}),
	}
	cmd.Flags().StringVar(&owner, "owner", "", "the lease's holder (required)")
	cmd.Flags().Uint64Var(&epoch, "epoch", 0, "the lease's epoch (required)")
	cmd.Flags().DurationVar(&ttl, "ttl", 30*time.Second, "new lifetime from now")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the lease as JSON")
	_ = cmd.MarkFlagRequired("owner")
	_ = cmd.MarkFlagRequired("epoch")
	return cmd
}

func (a *app) leaseReleaseCmd() *cobra.Command {
	var epoch uint64
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "release RUN --epoch N",
		Short: "Hand a lease back (idempotent)",
		Long: `Release RUN's lease if --epoch is the epoch holding it. The epoch is kept, so
the next acquire moves past it. Releasing a lease that epoch does not hold,
or one already released, changes nothing and is not an error.`,
		Example: `  journal lease release 01J9Z8Q4W5X6Y7Z8A9B0C1D2E3 --epoch 3`,
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
			return a.withStore(cmd.Context(), func(s journalStore) error {
				if err := s.ReleaseLease(cmd.Context(), run, ep); err != nil {
					return err
				}
				if asJSON {
					return writeJSON(a.stdout, map[string]any{"run": run, "epoch": ep, "released": true})
				}
				_, err := fmt.Fprintf(a.stdout, "released run %s at epoch %d (if that epoch held it)\n", run, ep)
				return err
			})
		}),
	}
	cmd.Flags().Uint64Var(&epoch, "epoch", 0, "the epoch to release (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	_ = cmd.MarkFlagRequired("epoch")
	return cmd
}
