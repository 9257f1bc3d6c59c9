package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// RunVerdict is one run's verdict from VerifyRun: a broken or missing chain
// is a verdict with OK false, not an error.
type RunVerdict struct {
	Run   RunID   `json:"run"`
	OK    bool    `json:"ok"`
	Seq   Seq     `json:"seq,omitempty"`  // head seq when ok; the failing seq when not
	Head  *Digest `json:"head,omitempty"` // the verified head hash
	Error string  `json:"error,omitempty"`
}

// VerifySummary says what VerifyAll checked, with counts, so that "intact"
// has a stated scope.
type VerifySummary struct {
	Failed uint64 `json:"failed"` // runs whose chain, seal or outcome index failed
	Runs   uint64 `json:"runs"`   // chains checked
	LogReport
	LogOK    bool   `json:"log_ok"`
	LogError string `json:"log_error,omitempty"`
	// FirstFailure is the first run whose verdict was not OK, nil if none.
	FirstFailure *RunVerdict `json:"-"`
}

// RunChecker is what verifying one run needs of a store.
type RunChecker interface {
	Head(ctx context.Context, run RunID) (Head, error)
	Verify(ctx context.Context, run RunID) (Digest, error)
}

// AllChecker is what VerifyAll needs of a store: every run's chain, then
// the log.
type AllChecker interface {
	RunChecker
	RunsByID(ctx context.Context, after *RunID, limit int) ([]RunID, error)
	LogVerifier
}

// verifyPage is how many run ids VerifyAll reads per page.
const verifyPage = 1000

// VerifyRun verifies one run's chain, seal and outcome index. A broken or
// missing chain is a verdict (OK false, Seq the failing seq when known);
// only a failure to check at all is an error.
func VerifyRun(ctx context.Context, j RunChecker, run RunID) (*RunVerdict, error) {
	head, err := j.Head(ctx, run)
	if err != nil && !IsVerdict(err) {
		return nil, err
	}
	d, err := j.Verify(ctx, run)
	if err != nil {
		if !IsVerdict(err) {
			return nil, err
		}
		res := &RunVerdict{Run: run, Error: oneLine(err.Error())}
		var ce *CorruptError
		if errors.As(err, &ce) {
			res.Seq = ce.Seq
		}
		return res, nil
	}
	res := &RunVerdict{Run: run, OK: true, Head: &d}
	if head.Hash == d {
		// The head read before Verify is the one it verified; after a
		// concurrent append it is not, and no seq is claimed.
		res.Seq = head.Seq
	}
	return res, nil
}

// VerifyAll pages through every run by id and verifies each with VerifyRun,
// in constant memory however many runs there are, calling onRun (if not
// nil) with each verdict; then it verifies the Merkle log and the signed
// checkpoints with VerifyLog. Broken chains and a broken log are counted
// in the summary, not returned: the error is a failure to check at all,
// or onRun's error.
func VerifyAll(ctx context.Context, j AllChecker, onRun func(*RunVerdict) error) (VerifySummary, error) {
	var sum VerifySummary
	var after *RunID
	for {
		page, err := j.RunsByID(ctx, after, verifyPage)
		if err != nil {
			return sum, fmt.Errorf("list runs after %d verified: %w", sum.Runs, err)
		}
		for _, run := range page {
			res, err := VerifyRun(ctx, j, run)
			if err != nil {
				return sum, fmt.Errorf("verify run %s (after %d runs verified): %w", run, sum.Runs, err)
			}
			sum.Runs++
			if !res.OK {
				sum.Failed++
				if sum.FirstFailure == nil {
					sum.FirstFailure = res
				}
			}
			if onRun != nil {
				if err := onRun(res); err != nil {
					return sum, err
				}
			}
		}
		if len(page) < verifyPage {
			break
		}
		after = &page[len(page)-1]
	}
	rep, err := j.VerifyLog(ctx)
	sum.LogReport = rep
	switch {
	case err == nil:
		sum.LogOK = true
	case IsVerdict(err):
		sum.LogError = oneLine(err.Error())
	default:
		return sum, fmt.Errorf("verify the log: %w", err)
	}
	return sum, nil
}

// IsVerdict reports whether err says something about the journal's content
// (a broken chain, an unknown run) rather than that a check failed to run.
func IsVerdict(err error) bool {
	var ce *CorruptError
	var nf *NotFoundError
	return errors.As(err, &ce) || errors.As(err, &nf)
}

// oneLine keeps a message on one line for line-oriented output.
func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }
