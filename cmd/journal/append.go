package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/appendinput"
	"github.com/runseal/runseal/store"
)

const appendLong = `Append records from a JSON Lines file (or stdin for "-" or no FILE).

Each line is one record:
  {"run":"<ULID>", "case":"<ULID>"?, "step":N?, "phase":"compensating"?,
   "effect_key":"<64 hex>"?, "kind":"<Kind>", ...the kind's fields}
Everything except the routing keys (run, case, step, phase, effect_key, kind)
becomes the kind's fields. phase is "compensating" or "forward" (the default,
which is not stored). seq, epoch and v are assigned by the store and may
not appear. Blank lines are skipped. JSON is parsed strictly: duplicate keys,
invalid UTF-8 and trailing data are refused.

Consecutive lines naming the same run form one batch: one append, written
all or nothing. The whole input is parsed and validated before anything is
written; an error names the line and the field.

A file naming several runs is several batches, and there is no transaction
across runs: if a later batch is refused (fenced, sealed run, duplicate
effect...), the earlier ones stay committed and the error says which. Put one
run in each file when the whole file must be all or nothing.

For each record written, prints "RUN SEQ HASH" (with --json, one JSON object
per record: line, run, seq, hash) as soon as its batch is durable.`

func (a *app) appendCmd() *cobra.Command {
	var epoch uint64
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "append --epoch N [FILE|-]",
		Short: "Append records from JSON Lines, one batch per run",
		Long:  appendLong,
		Example: `  echo '{"run":"01J9Z8Q4W5X6Y7Z8A9B0C1D2E3","kind":"RunAdmitted","source":"api"}' | journal append --epoch 1
  journal append --epoch 3 run.jsonl
  journal append --epoch 3 --json run.jsonl | jq .hash`,
		Args: cobra.MaximumNArgs(1),
		RunE: wrapRun(func(cmd *cobra.Command, args []string) error {
			ep, err := parseEpoch(epoch)
			if err != nil {
				return err
			}
			in, name := a.stdin, "stdin"
			if len(args) == 1 && args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return fmt.Errorf("open input: %w", err)
				}
				defer f.Close()
				in, name = f, args[0]
			}
			batches, err := appendinput.Parse(in, ep)
			if err != nil {
				return fmt.Errorf("%s: %w; nothing was written", name, err)
			}
			return a.withStore(cmd.Context(), func(s journalStore) error {
				return a.writeBatches(cmd, s, ep, batches, asJSON)
			})
		}),
	}
	cmd.Flags().Uint64Var(&epoch, "epoch", 0, "lease epoch to write under (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per written record")
	_ = cmd.MarkFlagRequired("epoch")
	return cmd
}

func (a *app) writeBatches(cmd *cobra.Command, s journalStore, epoch store.Epoch, batches []*appendinput.Batch, asJSON bool) error {
	ctx := cmd.Context()
	var out bytes.Buffer
	for i, b := range batches {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted before batch %d of %d (%s): %w%s", i+1, len(batches), b.Describe(), err, committed(batches[:i]))
		}
		recs, err := s.Append(ctx, epoch, b.Appends)
		if err != nil {
			err = fmt.Errorf("%w%s", err, notAttempted(len(batches)-i-1))
			var cu *store.CommitUnknownError
			if errors.As(err, &cu) {
				return fmt.Errorf("batch %d of %d (%s): %w; it may or may not have been written: check with 'journal read %s'%s",
					i+1, len(batches), b.Describe(), err, b.Run, committed(batches[:i]))
			}
			return fmt.Errorf("batch %d of %d (%s) was not written (none of it): %w%s", i+1, len(batches), b.Describe(), err, committed(batches[:i]))
		}
		// One write per batch, after its commit: a line on stdout is an
		// acknowledgement that the record is durable.
		out.Reset()
		for j, r := range recs {
			if asJSON {
				if err := writeJSON(&out, api.Ack{Line: b.Lines[j], Run: r.Run, Seq: r.Seq, Hash: r.Hash}); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(&out, "%s\t%d\t%s\n", r.Run, r.Seq, r.Hash)
			}
		}
		if _, err := a.stdout.Write(out.Bytes()); err != nil {
			return fmt.Errorf("batch %d of %d (%s) was committed, but writing its acknowledgement failed: %w%s",
				i+1, len(batches), b.Describe(), err, notAttempted(len(batches)-i-1))
		}
	}
	a.log.Info("appended", "batches", len(batches))
	return nil
}

// notAttempted says how many later batches were left unwritten.
func notAttempted(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; %d later batch(es) were not attempted", n)
}

// committed says which earlier batches are durable, for an error that stops
// partway through a multi-run input.
func committed(done []*appendinput.Batch) string {
	if len(done) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "; %d earlier batch(es) were committed and stay durable:", len(done))
	const show = 5
	for i, d := range done {
		if i == show {
			fmt.Fprintf(&b, " ... and %d more (see the acknowledgements printed above)", len(done)-show)
			break
		}
		fmt.Fprintf(&b, " [%s]", d.Describe())
	}
	return b.String()
}
