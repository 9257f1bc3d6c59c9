package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

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
one key. The disclosure key is the journal's own ("journal key --disclosure"
prints it), never its log key: without it, or with a statement no given key
signed, the verdict is unverifiable; without a statement, or with one that
does not match, not sound.

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

// verifyOutput is what verify --json prints.
type verifyOutput struct {
	File     string `json:"file"`
	ExitCode int    `json:"exit_code"`
	*disclosure.Report
	Sealing *sealed.Inspection `json:"sealing,omitempty"` // sealing.go
}

func (a *app) verifyCmd() *cobra.Command {
	var tf trustFlags
	var asJSON, noProgress bool
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
			start := time.Now()
			rep, verr := disclosure.Verify(cmd.Context(), in, opts)
			if bar != nil {
				_ = bar.Finish()
			}
			a.log.Info("verified", "file", args[0], "verdict", rep.Verdict, "bytes", rep.Counts.Bytes,
				"records", rep.Counts.Records, "seconds", time.Since(start).Seconds())
			code := verdictCode(rep.Verdict)
			if asJSON {
				if err := writeJSON(a.stdout, verifyOutput{File: args[0], ExitCode: code, Report: rep, Sealing: sealingOf(&insp)}); err != nil {
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
	return cmd
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

func verdictCode(v disclosure.Verdict) int {
	switch v {
	case disclosure.Sound:
		return exitSound
	case disclosure.NotSound:
		return exitNotSound
	}
	return exitUnverifiable
}

// printReport writes the human report: the verdict first, then what was
// read, the findings, what was proven, and what was not checked.
func printReport(w io.Writer, file string, r *disclosure.Report) {
	verdict := map[disclosure.Verdict]string{
		disclosure.Sound:        "SOUND",
		disclosure.NotSound:     "NOT SOUND: the package is tampered or inconsistent",
		disclosure.Unverifiable: "UNVERIFIABLE: no verdict could be reached",
	}[r.Verdict]
	fmt.Fprintf(w, "%s: %s\n", file, verdict)
	fmt.Fprintf(w, "  file        %d bytes, %d lines, sha256 %s\n", r.Counts.Bytes, r.Counts.Lines, r.SHA256)
	if cr := r.Checkpoint; cr != nil {
		nc := &disclosure.NoteCheck{Report: *cr}
		fmt.Fprint(w, describeNote(nc))
		c := r.Counts
		fmt.Fprintf(w, "  read        %d runs (%d sealed, %d unsealed), %d records, %d case blocks; %s\n",
			c.Runs, c.Sealed, c.Unsealed, c.Records, c.Cases, yesNo(r.Complete, "complete through the trailer", "NOT complete"))
		fmt.Fprintf(w, "  selection   %d runs, %d cases\n", len(r.SelectedRuns), len(r.SelectedCases))
	}
	if st := r.Statement; st != nil {
		if st.Verified {
			fmt.Fprintf(w, "  statement   signed for %q by disclosure key %s, and it covers this package\n", st.Recipient, strings.Join(st.Keys, ", "))
		} else {
			fmt.Fprintf(w, "  statement   NOT verified (recipient as stated: %q)\n", st.Recipient)
		}
	}
	if len(r.Findings) > 0 {
		fmt.Fprintf(w, "\nFindings (%d):\n", len(r.Findings)+r.FindingsOmitted)
		for _, f := range r.Findings {
			where := fmt.Sprintf("line %d", f.Line)
			if f.Run != "" {
				where += " run " + f.Run
			}
			if f.Seq != 0 {
				where += fmt.Sprintf(" seq %d", f.Seq)
			}
			fmt.Fprintf(w, "  - [%s] %s: %s\n", f.Check, where, f.Detail)
		}
		if r.FindingsOmitted > 0 {
			fmt.Fprintf(w, "  ... and %d more\n", r.FindingsOmitted)
		}
	}
	if len(r.Unverifiable) > 0 {
		fmt.Fprintln(w, "\nNot established:")
		for _, u := range r.Unverifiable {
			fmt.Fprintf(w, "  - %s\n", u)
		}
	}
	if len(r.Proven) > 0 {
		fmt.Fprintln(w, "\nProven:")
		for _, p := range r.Proven {
			fmt.Fprintf(w, "  - %s\n", p)
		}
	}
	if len(r.NotChecked) > 0 {
		fmt.Fprintln(w, "\nNot checked (a package cannot prove these):")
		for _, n := range r.NotChecked {
			fmt.Fprintf(w, "  - %s\n", n)
		}
	}
}
