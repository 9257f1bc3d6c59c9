package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/connlimit"
	"github.com/runseal/runseal/monitor"
)

const monitorLong = `Follow a running journal serve (spec/http.md, section 3) and check that its
log only ever grows. URL is the server's base URL; a query in it (such as
?tenant=acme) is kept on every request. Each check:

  1. fetches the latest witnessed checkpoint (GET URL/v1/checkpoint/witnessed)
     and verifies the log's signature and the witness policy;
  2. compares it with the last checkpoint verified, kept in --state DIR:
     a larger size must come with a consistency proof
     (GET URL/v1/proof/consistency?old=N&new=M) that verifies; the same
     size must have the same root; a smaller size is a rollback and is
     refused;
  3. saves the new checkpoint atomically (write, fsync, rename, fsync).

The first check trusts the checkpoint it finds (there is nothing to compare
it with) and says so. A fork is the log equivocating: signing two
checkpoints that cannot both be true (the same size with another root, or a
consistency proof that reproduces the newer signed root but gives another
root for the saved size). When a proof fails otherwise, the monitor fetches
the checkpoint the log signed at the saved size (GET URL/v1/checkpoint/N):
another root there is a fork; the same root means the server sent a bad
proof, which is no verdict (exit 3) and is checked again. On a fork it writes self-contained evidence to
DIR/fork-<time>.json (mode 0600): both signed checkpoints, and the keys and
policy used, so anyone can check it without the log; then it exits 4.

Redirects are followed only to the same host and scheme (never https to
http), and credentials in URL are redacted from logs and evidence.

With --tiles URL|DIR it follows the log's C2SP tlog-tiles layout instead
(spec/tiles.md): the checkpoint from checkpoint-witnessed (else checkpoint),
and the consistency proof built from tiles, each authenticated against the
new checkpoint's root; a tile that is malformed or does not lead to that
root is named and gives no verdict (3), never a fork.

With --once it checks once and exits (for cron). Otherwise it checks every
--interval, logs each result, serves Prometheus metrics on --metrics-addr,
keeps going after errors (they are logged and counted), exits 0 on SIGINT or
SIGTERM, and exits 4 on a fork.

Exit codes (--once): 0 the log is consistent with the state (or the state
was started); 1 the log served a checkpoint that does not verify, changed
origin, or rolled back; 3 no verdict (network error, quorum not met, a bad
proof, state unreadable); 4 fork, evidence written; 2 usage error.`

const monitorExample = `  auditor monitor https://log.example/acme --state /var/lib/runseal-monitor/acme \
      --log-key @log.vkey --witness @w1.vkey --witness @w2.vkey --quorum 2 --once
  auditor monitor https://log.example/acme --state ./mon --log-key @log.vkey \
      --policy witnesses.policy --interval 1m --metrics-addr 127.0.0.1:9464`

func (a *app) monitorCmd() *cobra.Command {
	var tf trustFlags
	var stateDir, metricsAddr, tilesLoc string
	var once, asJSON bool
	var interval, timeout time.Duration
	cmd := &cobra.Command{
		Use:     "monitor (URL | --tiles URL|DIR) --state DIR",
		Short:   "Follow a running log: verify every checkpoint's consistency, detect forks",
		Long:    monitorLong,
		Example: monitorExample,
		Args:    cobra.MaximumNArgs(1),
		RunE: wrapRun(func(cmd *cobra.Command, args []string) error {
			if stateDir == "" {
				return usageErrorf("--state DIR is required")
			}
			var src monitor.Source
			switch {
			case tilesLoc != "" && len(args) == 0:
				f, err := openTiles(tilesLoc, timeout)
				if err != nil {
					return err
				}
				src = monitor.NewTilesSource(tilesLoc, f)
			case tilesLoc == "" && len(args) == 1:
				ac, err := api.NewClient(args[0], api.ClientOptions{HTTPClient: &http.Client{Timeout: timeout}, UserAgent: "runseal-auditor"})
				if err != nil {
					return usageErrorf("URL: %v", err)
				}
				src = ac
			default:
				return usageErrorf("give either the journal's URL or --tiles URL|DIR")
			}
			if interval < time.Second {
				return usageErrorf("--interval %s: at least 1s", interval)
			}
			tr, err := tf.load()
			if err != nil {
				return err
			}
			m, err := tr.follower(src, stateDir)
			if err != nil {
				return unverifiablef("%v", err)
			}
			defer m.Close()
			metrics := monitor.NewMetrics()
			report := func(res monitor.Result) {
				metrics.Observe(res, time.Now())
				a.reportCheck(m, res)
			}
			ctx := cmd.Context()
			if once {
				res := m.Check(ctx)
				report(res)
				out := newCheckResult(res)
				if asJSON {
					if err := writeJSON(a.stdout, out); err != nil {
						return err
					}
				} else {
					fmt.Fprintf(a.stdout, "%s: %s\n", out.Result, out.Message)
				}
				if out.Code != exitSound {
					return verdictError(out.Code, "%s", out.Message)
				}
				return nil
			}
			return a.runMonitor(ctx, m, metrics, interval, metricsAddr, report)
		}),
	}
	tf.register(cmd.Flags())
	cmd.Flags().StringVar(&tilesLoc, "tiles", "", "follow the log's C2SP tlog-tiles layout (a URL prefix or a directory) instead of its API, building proofs from tiles (spec/tiles.md)")
	cmd.Flags().StringVar(&stateDir, "state", "", "directory for the last verified checkpoint, the lock and fork evidence (created 0700 if missing)")
	cmd.Flags().BoolVar(&once, "once", false, "check once and exit with the result's code (for cron)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "with --once, print the result as JSON")
	cmd.Flags().DurationVar(&interval, "interval", 5*time.Minute, "time between checks when running continuously")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "HTTP request timeout")
	cmd.Flags().StringVar(&metricsAddr, "metrics-addr", "127.0.0.1:9464", "where to serve Prometheus metrics (/metrics) when running continuously; empty for none")
	return cmd
}

// follower opens a monitor.Follower on dir that checks src with the
// trusted keys and policy.
func (tr *trust) follower(src monitor.Source, dir string) (*monitor.Follower, error) {
	return monitor.Open(monitor.Config{Source: src, Trust: tr.opts, LogKeys: tr.logKeys, Policy: tr.policyText, Dir: dir})
}

// checkResult is how a check's result is printed with --json.
type checkResult struct {
	Result   string `json:"result"` // a monitor.Outcome: started, advanced, unchanged, invalid, origin_changed, rollback, fork, bad_proof, unverifiable
	Code     int    `json:"exit_code"`
	Message  string `json:"message"`
	Size     uint64 `json:"size,omitempty"` // the verified size after the check
	Evidence string `json:"evidence,omitempty"`
}

func newCheckResult(res monitor.Result) checkResult {
	return checkResult{Result: string(res.Outcome), Code: outcomeCode(res.Outcome), Message: res.Message, Size: res.Size, Evidence: res.Evidence}
}

// outcomeCode maps a check's outcome to the exit code of --once.
func outcomeCode(o monitor.Outcome) int {
	switch o.Class() {
	case monitor.Consistent:
		return exitSound
	case monitor.NotSound:
		return exitNotSound
	case monitor.Forked:
		return exitFork
	}
	return exitUnverifiable
}

// runMonitor checks every interval, serving metrics on metricsAddr (none
// when empty), until the context ends (nil) or a fork (exit 4).
func (a *app) runMonitor(ctx context.Context, m *monitor.Follower, metrics *monitor.Metrics, interval time.Duration, metricsAddr string, report func(monitor.Result)) error {
	if metricsAddr != "" {
		inner, err := net.Listen("tcp", metricsAddr)
		if err != nil {
			return usageErrorf("--metrics-addr %s: %v", metricsAddr, err)
		}
		// Bounded like every server of ours: a scraper, or anyone who
		// reaches the port, holds few connections, and none for long.
		ln := connlimit.New(inner, connlimit.Config{Name: "metrics", Logger: a.log})
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", metrics)
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
			WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 16 << 10, ConnState: ln.ConnState}
		go srv.Serve(ln)
		defer srv.Close()
		a.log.Info("serving metrics", "addr", ln.Addr().String())
	}
	err := m.Run(ctx, interval, report)
	var fe *monitor.ForkError
	if errors.As(err, &fe) {
		return verdictError(exitFork, "%s", fe.Result.Message)
	}
	if err == nil {
		a.log.Info("stopping")
	}
	return err
}

// reportCheck logs a result.
func (a *app) reportCheck(m *monitor.Follower, res monitor.Result) {
	attrs := []any{"result", string(res.Outcome), "size", res.Size, "url", m.Source().Base()}
	if res.Evidence != "" {
		attrs = append(attrs, "evidence", res.Evidence)
	}
	switch res.Outcome.Class() {
	case monitor.Consistent:
		a.log.Info(res.Message, attrs...)
	case monitor.NoVerdict:
		a.log.Warn(res.Message, attrs...)
	default:
		a.log.Error(res.Message, attrs...)
	}
}
