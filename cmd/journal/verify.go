package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sqlite"
)

// verifyResult is one run's verdict, as verify prints it.
type verifyResult = store.RunVerdict

func (a *app) verifyCmd() *cobra.Command {
	var all, asJSON bool
	cmd := &cobra.Command{
		Use:   "verify (RUN | --all)",
		Short: "Re-check hash chains, seals, the Merkle log and signed checkpoints; exit 1 on any break",
		Long: `Re-check a run's whole chain from genesis, or every run's with --all: each
record's hash must cover its stored bytes, each prev_hash must link to the
record before it, seqs must be contiguous from 1, the chain must end at the
run's recorded head, the outcome index must be the chain's latest
conclusion, a sealed run's leaf must be its terminal hash and its sealed
outcome the chain's latest conclusion, and the Merkle log must hold a
sealed run's head at the run's log index and no record of an open run
(a seal removed by editing the database; spec/records.md section 7).

verify --all then checks the tenant's Merkle log in one snapshot, streaming:
every stored node recomputed from the leaves (and no other node stored),
every log index held by exactly one sealed run whose leaf it is, every
sealed run in the log, and every stored signed checkpoint: its note names
this log with the stored size and root, the root is the log's root at that
size, and each is consistent with the one before; and every witnessed note
is the checkpoint signed at its size. (Signatures and cosignatures are not
checked here; the store holds no key. The auditor checks them.)

Exit code 0 means everything checked is intact, and the last lines say
what was checked, with counts; 1 means at least one check failed (or could
not run), and the message names the run and seq, or the log node. verify
--all checks every run even after a failure, printing one line per run
(JSON Lines with --json, then a summary object carrying the same counts),
and shows a progress line on stderr when stderr is a terminal.

Memory stays bounded however big the journal: runs are paged, the log is
streamed, and a SQLite journal is read through SQLite's page cache rather
than its memory map, so the file does not become resident in the process.`,
		Example: `  journal verify 01J9Z8Q4W5X6Y7Z8A9B0C1D2E3
  journal verify --all
  journal verify --all --json | jq -c 'select(.ok == false)'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) == 1) || len(args) > 1 {
				return usageErrorf("give either one RUN or --all")
			}
			return nil
		},
		RunE: wrapRun(func(cmd *cobra.Command, args []string) error {
			if all {
				return a.withStore(cmd.Context(), func(s journalStore) error {
					c, err := wholeFileChecker(cmd.Context(), s)
					if err != nil {
						return err
					}
					defer c.Close()
					return a.verifyAll(cmd.Context(), c, asJSON)
				})
			}
			run, err := parseRunArg(args[0])
			if err != nil {
				return err
			}
			return a.withStore(cmd.Context(), func(s journalStore) error {
				res, err := store.VerifyRun(cmd.Context(), s, run)
				if err != nil && res == nil {
					return err
				}
				if werr := a.printVerify(a.stdout, res, asJSON); werr != nil {
					return werr
				}
				if !res.OK {
					return fmt.Errorf("verification FAILED: %s", res.Error)
				}
				return nil
			})
		}),
	}
	cmd.Flags().BoolVar(&all, "all", false, "verify every run of the tenant")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (JSON Lines with --all)")
	return cmd
}

// storeChecker is what verify --all needs: every run's chain, then the log.
type storeChecker = store.AllChecker

// closingChecker is a storeChecker the caller closes.
type closingChecker interface {
	storeChecker
	Close() error
}

// wholeFileChecker is the checker for verify --all: a SQLite journal's own
// (sqlite.Checker: off the memory map, so a pass over the whole file does
// not stay resident), else the store itself, whose Close is left to the
// caller that opened it.
func wholeFileChecker(ctx context.Context, s journalStore) (closingChecker, error) {
	if db, ok := s.(*sqlite.Store); ok {
		c, err := db.Checker(ctx)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	return unclosed{s}, nil
}

// unclosed is a checker whose Close leaves the store open.
type unclosed struct{ storeChecker }

func (unclosed) Close() error { return nil }

func (a *app) printVerify(w io.Writer, r *verifyResult, asJSON bool) error {
	if asJSON {
		return writeJSON(w, r)
	}
	var err error
	if r.OK {
		if r.Seq != 0 {
			_, err = fmt.Fprintf(w, "ok\t%s\tseq %d\thead %s\n", r.Run, r.Seq, r.Head)
		} else {
			_, err = fmt.Fprintf(w, "ok\t%s\thead %s\n", r.Run, r.Head)
		}
	} else {
		_, err = fmt.Fprintf(w, "FAILED\t%s\t%s\n", r.Run, r.Error)
	}
	return err
}

// verifySummary is the last line of verify --all --json: what was checked,
// with counts, so that "intact" has a stated scope.
type verifySummary = store.VerifySummary

// logProgress shows a progress line before the log check starts.
type logProgress struct {
	storeChecker
	before func()
}

func (p logProgress) VerifyLog(ctx context.Context) (store.LogReport, error) {
	p.before()
	return p.storeChecker.VerifyLog(ctx)
}

// verifyAll runs store.VerifyAll, printing each run's line, a progress
// line on a terminal, and the summary of what was checked.
func (a *app) verifyAll(ctx context.Context, s storeChecker, asJSON bool) error {
	w := bufio.NewWriter(a.stdout)
	defer w.Flush()
	progress := isTerminal(a.stderr)
	var runs, failed uint64
	last := time.Now()
	if progress {
		s = logProgress{s, func() { fmt.Fprint(a.stderr, "\rverifying the log ...\033[K") }}
	}
	sum, err := store.VerifyAll(ctx, s, func(res *verifyResult) error {
		runs++
		if !res.OK {
			failed++
		}
		if err := a.printVerify(w, res, asJSON); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
		if progress && time.Since(last) > 500*time.Millisecond {
			last = time.Now()
			fmt.Fprintf(a.stderr, "\rverified %d runs, %d failed ...", runs, failed)
		}
		return nil
	})
	if err != nil {
		return err
	}
	rep := sum.LogReport
	if progress {
		fmt.Fprint(a.stderr, "\r\033[K")
	}
	if asJSON {
		if err := writeJSON(w, map[string]any{"summary": sum}); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	fmt.Fprintf(a.stderr, "journal: chains: %d runs, %d failed (hashes, links, seqs, head, outcome index)\n", sum.Runs, sum.Failed)
	if sum.LogOK {
		fmt.Fprintf(a.stderr, "journal: seals: %d sealed runs, each holding one log index whose leaf is its terminal hash\n", rep.Sealed)
		fmt.Fprintf(a.stderr, "journal: log: %d leaves, %d stored nodes recomputed from the leaves\n", rep.Size, rep.Nodes)
		fmt.Fprintf(a.stderr, "journal: checkpoints: %d signed checkpoints, each the log's root at its size and consistent with the one before; %d witnessed notes, each the checkpoint signed at its size\n", rep.Checkpoints, rep.Witnessed)
	}
	if err := verifyVerdict(sum); err != nil {
		return err
	}
	fmt.Fprintf(a.stderr, "journal: %s\n", intactLine(sum))
	return nil
}

// verifyVerdict is verify --all's error for a summary with any failure.
func verifyVerdict(sum verifySummary) error {
	switch {
	case sum.Failed > 0 && !sum.LogOK:
		return fmt.Errorf("verification FAILED for %d of %d runs (first: %s) and for the log: %s", sum.Failed, sum.Runs, sum.FirstFailure.Error, sum.LogError)
	case sum.Failed > 0:
		return fmt.Errorf("verification FAILED for %d of %d runs; first: %s", sum.Failed, sum.Runs, sum.FirstFailure.Error)
	case !sum.LogOK:
		return fmt.Errorf("verification FAILED for the log: %s", sum.LogError)
	}
	return nil
}

// intactLine states the scope of a summary with no failure.
func intactLine(sum verifySummary) string {
	return fmt.Sprintf("verified %d runs, their seals, the log and %d signed checkpoints: all intact", sum.Runs, sum.Checkpoints)
}
