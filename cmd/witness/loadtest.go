package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime/pprof"
	"time"

	"github.com/spf13/cobra"

	"github.com/runseal/runseal/internal/loadtest"
)

// Defaults of "witness loadtest" that are durations.
const (
	loadtestStep    = 5 * time.Second
	loadtestP99     = 250 * time.Millisecond
	loadtestCeiling = time.Second
)

func (a *app) loadtestCmd() *cobra.Command {
	var (
		cfg     loadtest.Config
		pretty  bool
		profile string
	)
	cmd := &cobra.Command{
		Use:   "loadtest",
		Short: "Drive a witness with simulated logs at increasing rates",
		Long: `Simulate --logs logs, each with a real Merkle tree and its own key, sending
add-checkpoint requests with consistency proofs, one at a time per log, at a
total rate that starts at --start-qps and grows by --factor every --step, until
a step's p99 latency passes --max-p99, the rate cannot be reached, or more
than 1% of answers are errors.

The load is open-loop: each step's requests are due on a fixed schedule,
latency is measured from the due time (a witness that falls behind shows it
as latency, not as fewer requests), and answers that arrive after the step
ends still count for it. A request that could not even be sent within the
larger of the step and 10 x --max-p99 of its due time is an error, "late".
When the escalation stops on a failure, --refine more steps bisect between
the last rate held and the first that failed (a factor of 1.25 narrows to
about 3% with the default 3), so the figure is not up to a whole factor
below the witness's limit. The sustained rate is the highest step that kept
p99 within the bound with at most 1% errors. Print the result as JSON on stdout; progress
goes to stderr.

By default the witness under test runs in this process, on a fresh state file
(in --dir, else a temporary directory), with the durability of "witness
serve": every answer is sent after its checkpoint is committed to disk. The
generator shares the machine's cores with it.

With --url, test a running witness instead: the simulated logs are registered
in its state file (--db, $` + envDB + ` or ./` + defaultDB + `), where they stay, so never
point this at a production witness; --witness-vkey lets the answers be
verified.

Before the steps, the same run measures the machine's ceilings: Ed25519 sign
and verify rates on all cores (and the request rate at which the run's
Ed25519 work alone would fill them), and single-row durable SQLite commits
per second (what a witness without group commit could do).

The JSON: sustained_qps (the best step that met the bound, its p50_ms and
p99_ms), errors_by_status, steps, ceilings, commit (transactions and writes
per transaction of the in-process witness), stopped_because,
refined_between_qps (the rates held and failed after the bisection).`,
		Example: `  witness loadtest
  witness loadtest --logs 256 --start-qps 1000 --factor 1.2 --step 10s --max-p99 100ms
  witness loadtest --start-qps 2000 --max-qps 2000 --step 20s --cpuprofile cpu.out
  witness loadtest --url http://localhost:7380 --db witness.db --witness-vkey "$(witness key)"`,
		Args: cobra.NoArgs,
		RunE: wrapRun(func(cmd *cobra.Command, _ []string) error {
			if cfg.URL != "" {
				cfg.DB = a.dbPath()
			} else if len(cfg.WitnessVKeys) > 0 {
				return usageErrorf("--witness-vkey applies only with --url")
			}
			if cfg.Factor != 0 && cfg.Factor <= 1 {
				return usageErrorf("--factor must be more than 1")
			}
			cfg.Logger = a.log
			if profile != "" {
				f, err := os.Create(profile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			rep, err := loadtest.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			var b []byte
			if pretty {
				b, err = json.MarshalIndent(rep, "", "  ")
			} else {
				b, err = json.Marshal(rep)
			}
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(a.stdout, string(b))
			return err
		}),
	}
	f := cmd.Flags()
	f.StringVar(&cfg.URL, "url", "", "submission prefix of a running witness to test (default: one in this process)")
	f.StringArrayVar(&cfg.WitnessVKeys, "witness-vkey", nil, "with --url: witness verifier key to check answers with, repeatable")
	f.StringVar(&cfg.Dir, "dir", "", "directory for the in-process witness's state file (default a temporary one)")
	f.IntVar(&cfg.Logs, "logs", 128, "simulated logs")
	f.Float64Var(&cfg.StartQPS, "start-qps", 250, "rate of the first step, requests per second")
	f.Float64Var(&cfg.Factor, "factor", 1.25, "rate multiplier from one step to the next")
	f.Float64Var(&cfg.MaxQPS, "max-qps", 50000, "highest rate to try")
	f.DurationVar(&cfg.Step, "step", loadtestStep, "length of each step")
	f.DurationVar(&cfg.MaxP99, "max-p99", loadtestP99, "latency bound: stop after a step whose p99 is above it")
	f.IntVar(&cfg.Leaves, "leaves", 1, "leaves each log appends between checkpoints")
	f.IntVar(&cfg.VerifyEvery, "verify-every", 1, "verify every n-th cosignature (-1: none)")
	f.IntVar(&cfg.Refine, "refine", 3, "steps that bisect between the last rate held and the first that failed (-1: none)")
	f.DurationVar(&cfg.Ceiling, "ceiling-time", loadtestCeiling, "how long each ceiling measurement runs")
	f.BoolVar(&pretty, "pretty", false, "indent the JSON")
	f.StringVar(&profile, "cpuprofile", "", "write a CPU profile of the whole run (generator and in-process witness) to this file, for go tool pprof")
	return cmd
}
