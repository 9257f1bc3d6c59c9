package main

import (
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/runseal/runseal/audit"
	"github.com/runseal/runseal/disclosure"
	"github.com/runseal/runseal/store/sealed"
)

const verifyLong = `Verify a runseal disclosure package, offline, with nothing but the log's key,
a witness policy and the journal's disclosure key. It checks, in one pass and
constant memory:

  - the header's checkpoint: the log's signature, each witness cosignature,
    the quorum, and that the header's plain copy is the signed one;
  - every record: its exact bytes are a canonical record body naming its
    run and the next seq from 1, and its hash is SHA-256(prev_hash || raw);
  - every sealed run: its seal is the terminal hash recomputed from its
    records, its last conclusion seals, and its inclusion proof puts that
    hash at its log index under the checkpoint's size and root;
  - no unsealed run ends in a sealing conclusion (a stripped leaf), no run
    or log index appears twice, selected runs are carried and carried runs
    selected, case blocks and the trailer count what was read;
  - the discloser's signed statement (in the trailer): signed by a
    --disclosure-key, it covers the checkpoint, the recipient, the selection,
    the counts and every run and case block with its records, so a run
    dropped from the package, counts fixed, is found.

A log key given with --log-key and also named by the --policy's log line is
one key, and a --disclosure-key given twice is one key. The disclosure key is
the journal's own ("journal key --disclosure" prints it), named
<origin>/disclosure for the package's checkpoint origin, never its log key
nor a witness's: without it, or with a statement no given key of that name
signed, the verdict is unverifiable; without a statement, with one that does
not match, or with any failing signature line by a given disclosure key, not
sound.

The report lists what was proven, every finding, and, as plainly, what a
package cannot prove (unsealed runs' completeness, case membership, that
the discloser's register holds this act: compare the SHA-256 it prints with
the register).

Exit codes: 0 sound; 1 not sound (tampered or inconsistent); 3 incomplete
or unverifiable (cut file, unknown version, keys or policy that cannot
establish the checkpoint, read error); 2 usage error.`

const verifyExample = `  auditor verify pkg.jsonl --log-key "$(cat log.vkey)" --disclosure-key @disclosure.vkey \
      --witness @w1.vkey --witness @w2.vkey --quorum 2
  auditor verify pkg.jsonl --log-key @log.vkey --policy witnesses.policy --disclosure-key @disclosure.vkey --json
  curl -s https://example.com/pkg.jsonl | auditor verify - --policy p.txt --disclosure-key @disclosure.vkey`

func (a *app) verifyCmd() *cobra.Command {
	var tf trustFlags
	var asJSON, noProgress bool
	var cpuProfile string
	cmd := &cobra.Command{
		Use:     "verify PACKAGE",
		Short:   "Verify a disclosure package offline",
		Long:    verifyLong,
		Example: verifyExample,
		Args:    cobra.ExactArgs(1),
		RunE: wrapRun(func(cmd *cobra.Command, args []string) error {
			tr, err := tf.load()
			if err != nil {
				return err
			}
			in, size, closeIn, err := a.openInput(args[0])
			if err != nil {
				return err
			}
			defer closeIn()
			opts := tr.opts
			var bar *progressbar.ProgressBar
			if !noProgress && size > 0 && isTerminal(a.stderr) {
				bar = progressbar.NewOptions64(size,
					progressbar.OptionSetWriter(a.stderr),
					progressbar.OptionSetDescription("verifying"),
					progressbar.OptionShowBytes(true),
					progressbar.OptionSetPredictTime(true),
					progressbar.OptionThrottle(100*time.Millisecond),
					progressbar.OptionClearOnFinish())
				opts.Progress = func(n int64) { _ = bar.Set64(n) }
			}
			var insp sealed.Inspector // sealing.go: sealed and erased fields
			opts.OnRecord, opts.RecordFilter = insp.Add, sealed.Relevant
			stopProfile, err := startCPUProfile(cpuProfile)
			if err != nil {
				return err
			}
			start := time.Now()
			rep, verr := disclosure.Verify(cmd.Context(), in, opts)
			if err := stopProfile(); err != nil {
				return err
			}
			if bar != nil {
				_ = bar.Finish()
			}
			a.log.Info("verified", "file", args[0], "verdict", rep.Verdict, "bytes", rep.Counts.Bytes,
				"records", rep.Counts.Records, "seconds", time.Since(start).Seconds())
			code := verdictCode(rep.Verdict)
			if asJSON {
				if err := (audit.Output{File: args[0], ExitCode: code, Report: rep, Sealing: sealingOf(&insp)}).WriteJSON(a.stdout); err != nil {
					return err
				}
			} else {
				printReport(a.stdout, args[0], rep)
				printSealing(a.stdout, sealingOf(&insp))
			}
			if verr != nil {
				return unverifiablef("%s: %v", args[0], verr)
			}
			if code != exitSound {
				return verdictError(code, "%s: %s", args[0], strings.ToUpper(strings.ReplaceAll(string(rep.Verdict), "_", " ")))
			}
			return nil
		}),
	}
	tf.register(cmd.Flags())
	tf.registerDisclosure(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().BoolVar(&noProgress, "no-progress", false, "never show the progress bar (it shows only when stderr is a terminal)")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the verification to this file (for go tool pprof)")
	_ = cmd.Flags().MarkHidden("cpuprofile")
	return cmd
}

// startCPUProfile starts a CPU profile into path (nothing when path is
// empty) and returns the function that stops it and closes the file.
func startCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, usageErrorf("--cpuprofile: %v", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, usageErrorf("--cpuprofile: %v", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// openInput opens a file, or stdin for "-", and returns its size when known.
func (a *app) openInput(path string) (io.Reader, int64, func(), error) {
	if path == "-" {
		return a.stdin, 0, func() {}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, nil, unverifiablef("%v", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, nil, unverifiablef("%v", err)
	}
	if fi.IsDir() {
		f.Close()
		return nil, 0, nil, usageErrorf("%s is a directory", path)
	}
	return f, fi.Size(), func() { f.Close() }, nil
}

func verdictCode(v disclosure.Verdict) int { return audit.ExitCode(v) }

// printReport writes the human report: the verdict first, then what was
// read, the findings, what was proven, and what was not checked.
func printReport(w io.Writer, file string, r *disclosure.Report) { audit.WriteReport(w, file, r, nil) }
