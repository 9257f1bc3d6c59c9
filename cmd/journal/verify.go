package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/runseal/runseal/store"
)

// verifyResult is one run's verdict, as verify prints it.
type verifyResult struct {
	Run   store.RunID   `json:"run"`
	OK    bool          `json:"ok"`
	Seq   store.Seq     `json:"seq,omitempty"`  // head seq when ok; the failing seq when not
	Head  *store.Digest `json:"head,omitempty"` // the verified head hash
	Error string        `json:"error,omitempty"`
}

func (a *app) verifyCmd() *cobra.Command {
	var all, asJSON bool
	cmd := &cobra.Command{
		Use:   "verify (RUN | --all)",
		Short: "Re-check hash chains, seals, the Merkle log and signed checkpoints; exit 1 on any break",
		Long: `Re-check a run's whole chain from genesis, or every run's with --all: each
record's hash must cover its stored bytes, each prev_hash must link to the
record before it, seqs must be contiguous from 1, the chain must end at the
run's recorded head, the outcome index must be the chain's latest
conclusion, and a sealed run's leaf must be its terminal hash and its
sealed outcome the chain's latest conclusion.

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
and shows a progress line on stderr when stderr is a terminal.`,
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
					return a.verifyAll(cmd.Context(), s, asJSON)
				})
			}
			run, err := parseRunArg(args[0])
			if err != nil {
				return err
			}
			return a.withStore(cmd.Context(), func(s journalStore) error {
				res, err := verifyRun(cmd.Context(), s, run)
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

// chainChecker is what verifying one run needs of a store.
type chainChecker interface {
	Head(ctx context.Context, run store.RunID) (store.Head, error)
	Verify(ctx context.Context, run store.RunID) (store.Digest, error)
}

// storeChecker is what verify --all needs: every run's chain, then the log.
type storeChecker interface {
	chainChecker
	RunsByID(ctx context.Context, after *store.RunID, limit int) ([]store.RunID, error)
	store.LogVerifier
}

// verifyRun verifies one run. A broken or missing chain is a verdict (a
// result with OK false); only a failure to check at all is an error.
func verifyRun(ctx context.Context, j chainChecker, run store.RunID) (*verifyResult, error) {
	head, err := j.Head(ctx, run)
	if err != nil && !isVerdict(err) {
		return nil, err
	}
	d, err := j.Verify(ctx, run)
	if err != nil {
		if !isVerdict(err) {
			return nil, err
		}
		res := &verifyResult{Run: run, Error: oneLine(err.Error())}
		var ce *store.CorruptError
		if errors.As(err, &ce) {
			res.Seq = ce.Seq
		}
		return res, nil
	}
	res := &verifyResult{Run: run, OK: true, Head: &d}
	if head.Hash == d {
		// The head read before Verify is the one it verified; after a
		// concurrent append it is not, and no seq is claimed.
		res.Seq = head.Seq
	}
	return res, nil
}

// isVerdict reports whether err says something about the journal's content
// (a broken chain, an unknown run) rather than that the check failed to run.
func isVerdict(err error) bool {
	var ce *store.CorruptError
	var nf *store.NotFoundError
	return errors.As(err, &ce) || errors.As(err, &nf)
}

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
type verifySummary struct {
	Failed uint64 `json:"failed"` // runs whose chain, seal or outcome index failed
	Runs   uint64 `json:"runs"`   // chains checked
	store.LogReport
	LogOK    bool   `json:"log_ok"`
	LogError string `json:"log_error,omitempty"`
}

// verifyAll pages through every run by id and verifies each, in constant
// memory however many runs there are, then verifies the Merkle log and the
// signed checkpoints.
func (a *app) verifyAll(ctx context.Context, s storeChecker, asJSON bool) error {
	w := bufio.NewWriter(a.stdout)
	defer w.Flush()
	progress := isTerminal(a.stderr)
	var sum verifySummary
	var firstFail *verifyResult
	last := time.Now()
	var after *store.RunID
	for {
		page, err := s.RunsByID(ctx, after, pageSize)
		if err != nil {
			return fmt.Errorf("list runs after %d verified: %w", sum.Runs, err)
		}
		for _, run := range page {
			res, err := verifyRun(ctx, s, run)
			if err != nil {
				return fmt.Errorf("verify run %s (after %d runs verified): %w", run, sum.Runs, err)
			}
			sum.Runs++
			if !res.OK {
				sum.Failed++
				if firstFail == nil {
					firstFail = res
				}
			}
			if err := a.printVerify(w, res, asJSON); err != nil {
				return fmt.Errorf("write output: %w", err)
			}
			if progress && time.Since(last) > 500*time.Millisecond {
				last = time.Now()
				fmt.Fprintf(a.stderr, "\rverified %d runs, %d failed ...", sum.Runs, sum.Failed)
			}
		}
		if len(page) < pageSize {
			break
		}
		after = &page[len(page)-1]
	}
	if progress {
		fmt.Fprint(a.stderr, "\rverifying the log ...\033[K")
	}
	rep, err := s.VerifyLog(ctx)
	sum.LogReport = rep
	switch {
	case err == nil:
		sum.LogOK = true
	case isVerdict(err):
		sum.LogError = oneLine(err.Error())
	default:
		return fmt.Errorf("verify the log: %w", err)
	}
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
	switch {
	case sum.Failed > 0 && !sum.LogOK:
		return fmt.Errorf("verification FAILED for %d of %d runs (first: %s) and for the log: %s", sum.Failed, sum.Runs, firstFail.Error, sum.LogError)
	case sum.Failed > 0:
		return fmt.Errorf("verification FAILED for %d of %d runs; first: %s", sum.Failed, sum.Runs, firstFail.Error)
	case !sum.LogOK:
		return fmt.Errorf("verification FAILED for the log: %s", sum.LogError)
	}
	fmt.Fprintf(a.stderr, "journal: verified %d runs, their seals, the log and %d signed checkpoints: all intact\n", sum.Runs, rep.Checkpoints)
	return nil
}
