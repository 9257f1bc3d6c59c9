package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/runseal/runseal/store"
)

// pageSize is how many records one read transaction fetches. Reading page by
// page keeps memory flat however long a run is.
const pageSize = 1000

func (a *app) readCmd() *cobra.Command {
	var from, limit uint64
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "read RUN",
		Short: "Print a run's records, checking each link as it goes",
		Long: `Print a run's records in seq order, page by page in constant memory.

Every record is checked as it is read: its hash must cover its stored bytes
and its prev_hash must link to the record before it (from seq 1, to the
genesis hash; with --from, from the first record printed). A record that
fails stops the read with exit code 1 and names the run and seq; use
"journal verify" for a whole-chain check against the run's head and seal.

Text output: one line per record, "SEQ KIND HASH BODY". With --json, JSON
Lines: {"run","seq","kind","prev_hash","hash","raw"}, where raw is the
record's canonical body, byte for byte as stored and hashed.`,
		Example: `  journal read 01J9Z8Q4W5X6Y7Z8A9B0C1D2E3
  journal read 01J9Z8Q4W5X6Y7Z8A9B0C1D2E3 --from 1000 --limit 100
  journal read 01J9Z8Q4W5X6Y7Z8A9B0C1D2E3 --json | jq -c .raw`,
		Args: cobra.ExactArgs(1),
		RunE: wrapRun(func(cmd *cobra.Command, args []string) error {
			run, err := parseRunArg(args[0])
			if err != nil {
				return err
			}
			if from == 0 {
				return usageErrorf("--from 0: seqs start at 1")
			}
			return a.withStore(cmd.Context(), func(s journalStore) error {
				w := bufio.NewWriterSize(a.stdout, 64<<10)
				err := readRun(cmd.Context(), s, run, store.Seq(from), limit, w, asJSON)
				if ferr := w.Flush(); ferr != nil && err == nil {
					err = fmt.Errorf("write output: %w", ferr)
				}
				return err
			})
		}),
	}
	cmd.Flags().Uint64Var(&from, "from", 1, "first seq to print")
	cmd.Flags().Uint64Var(&limit, "limit", 0, "print at most this many records (0: all)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON Lines")
	return cmd
}

// readRun streams a run's records from seq from, limit of them (0: all).
func readRun(ctx context.Context, j store.Journal, run store.RunID, from store.Seq, limit uint64, w io.Writer, asJSON bool) error {
	head, err := j.Head(ctx, run)
	if err != nil {
		return err
	}
	if head.Seq == 0 {
		return &store.NotFoundError{What: "run " + run.String()}
	}
	expect := from
	// Pages are separate read transactions, so the link between the last
	// record of one page and the first of the next is checked here. From
	// seq 1 the first link is to the genesis hash.
	var prev *store.Digest
	if from == 1 {
		prev = &store.ZeroDigest
	}
	var printed uint64
	var buf []byte
	format := func(b []byte, r store.Record, asJSON bool) ([]byte, error) { return appendRecord(b, r, asJSON), nil }
	if ss, ok := asSealed(j); ok {
		format = ss.openedFormatter(ctx) // sealing.go: opened body, erased fields
	}
	for limit == 0 || printed < limit {
		n := uint64(pageSize)
		if limit != 0 && limit-printed < n {
			n = limit - printed
		}
		recs, err := j.ReadPage(ctx, run, expect, int(n))
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			if r.Seq != expect {
				return &store.CorruptError{Run: run, Seq: expect, Detail: fmt.Sprintf("seq gap: found %d", r.Seq)}
			}
			if prev != nil && r.PrevHash != *prev {
				return &store.CorruptError{Run: run, Seq: r.Seq, Detail: "prev_hash does not link to the previous record"}
			}
			if buf, err = format(buf[:0], r, asJSON); err != nil {
				return err
			}
			if _, err := w.Write(buf); err != nil {
				return fmt.Errorf("write output: %w", err)
			}
			h := r.Hash
			prev = &h
			expect++
		}
		printed += uint64(len(recs))
		if len(recs) < int(n) {
			break
		}
	}
	return nil
}

// appendRecord formats one record. The JSON form is assembled by hand so raw
// is embedded exactly as stored: an encoder would be free to re-escape it,
// and a re-serialized body no longer matches its hash.
func appendRecord(b []byte, r store.Record, asJSON bool) []byte {
	if !asJSON {
		b = strconv.AppendUint(b, uint64(r.Seq), 10)
		b = append(b, '\t')
		b = append(b, r.Kind...)
		b = append(b, '\t')
		b = append(b, r.Hash.String()...)
		b = append(b, '\t')
		b = append(b, r.Raw...)
		return append(b, '\n')
	}
	// run, kind and the digests are ULIDs, [A-Za-z0-9_.-] and hex: none
	// needs escaping.
	b = append(b, `{"run":"`...)
	b = append(b, r.Run.String()...)
	b = append(b, `","seq":`...)
	b = strconv.AppendUint(b, uint64(r.Seq), 10)
	b = append(b, `,"kind":"`...)
	b = append(b, r.Kind...)
	b = append(b, `","prev_hash":"`...)
	b = append(b, r.PrevHash.String()...)
	b = append(b, `","hash":"`...)
	b = append(b, r.Hash.String()...)
	b = append(b, `","raw":`...)
	b = append(b, r.Raw...)
	return append(b, "}\n"...)
}

func (a *app) runsCmd() *cobra.Command {
	var (
		outcome, source, caseArg        string
		recent, waiting, abandoned, cnt bool
		limit                           int
		asJSON                          bool
	)
	cmd := &cobra.Command{
		Use:   "runs (--outcome O [--count] | --recent [--source S] | --waiting | --abandoned | --case C)",
		Short: "List runs from the journal's indexes",
		Long: `List runs by one of the journal's derived indexes (exactly one selector):

  --outcome O   runs whose latest conclusion is O, newest conclusion first
                (--count: how many, from the same index, not a page of it)
  --recent      runs by last append, newest first (--source S: admitted by S)
  --waiting     runs whose last record is a suspension, soonest deadline first
  --abandoned   runs whose lease expired without release, oldest expiry first
  --case C      every record stamped with case C, whichever run wrote it

A listing holds at most --limit entries (1..10000); a full page means "at
least that many", and a note on stderr says so.`,
		Example: `  journal runs --outcome quarantined
  journal runs --outcome quarantined --count
  journal runs --recent --limit 20 --json
  journal runs --waiting
  journal runs --case 01J9Z8Q4W5X6Y7Z8A9B0C1D2E3`,
		Args: cobra.NoArgs,
		RunE: wrapRun(func(cmd *cobra.Command, _ []string) error {
			if err := store.ValidateLimit(limit); err != nil {
				return usageErrorf("--limit %d: must be from 1 to %d", limit, store.MaxLimit)
			}
			if cmd.Flags().Changed("outcome") {
				if err := store.ValidateOutcome(outcome); err != nil {
					return usageErrorf("--outcome: %v", err)
				}
			}
			if cnt && !cmd.Flags().Changed("outcome") {
				return usageErrorf("--count goes with --outcome")
			}
			if source != "" && !recent {
				return usageErrorf("--source goes with --recent")
			}
			var c store.CaseID
			if cmd.Flags().Changed("case") {
				var err error
				if c, err = store.ParseCaseID(caseArg); err != nil || c.IsZero() {
					return usageErrorf("--case %q is not a case id (a 26-character ULID, optionally prefixed case_)", caseArg)
				}
			}
			return a.withStore(cmd.Context(), func(s journalStore) error {
				ctx := cmd.Context()
				var n int
				var err error
				switch {
				case cnt:
					var total uint64
					if total, err = s.CountByOutcome(ctx, outcome); err != nil {
						return err
					}
					if asJSON {
						return writeJSON(a.stdout, map[string]any{"outcome": outcome, "count": total})
					}
					_, err = fmt.Fprintln(a.stdout, total)
					return err
				case cmd.Flags().Changed("outcome"):
					var runs []store.RunID
					if runs, err = s.RunsByOutcome(ctx, outcome, limit); err != nil {
						return err
					}
					n, err = len(runs), a.printRunIDs(runs, asJSON)
				case recent:
					var acts []store.Activity
					if source != "" {
						acts, err = s.RecentRunsFrom(ctx, source, nil, limit)
					} else {
						acts, err = s.RecentRuns(ctx, nil, limit)
					}
					if err != nil {
						return err
					}
					n, err = len(acts), a.printActivity(acts, asJSON)
				case waiting:
					var ws []store.WaitingRun
					if ws, err = s.WaitingRuns(ctx, limit); err != nil {
						return err
					}
					n, err = len(ws), a.printWaiting(ws, asJSON)
				case abandoned:
					var runs []store.RunID
					if runs, err = s.AbandonedRuns(ctx, limit); err != nil {
						return err
					}
					n, err = len(runs), a.printRunIDs(runs, asJSON)
				default:
					var recs []store.Record
					if recs, err = s.CaseHistory(ctx, c, limit); err != nil {
						return err
					}
					n, err = len(recs), a.printRecords(recs, asJSON)
				}
				if err == nil && n == limit {
					fmt.Fprintf(a.stderr, "journal: %d shown, the --limit; there may be more\n", n)
				}
				return err
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&outcome, "outcome", "", "runs whose latest conclusion is this outcome")
	f.BoolVar(&cnt, "count", false, "with --outcome: print only how many runs")
	f.BoolVar(&recent, "recent", false, "runs by last activity, newest first")
	f.StringVar(&source, "source", "", "with --recent: only runs admitted by this source")
	f.BoolVar(&waiting, "waiting", false, "suspended runs, soonest deadline first")
	f.BoolVar(&abandoned, "abandoned", false, "runs whose lease expired unreleased")
	f.StringVar(&caseArg, "case", "", "records of this case, oldest first")
	f.IntVar(&limit, "limit", 100, "most entries to list (1..10000)")
	f.BoolVar(&asJSON, "json", false, "print one JSON document")
	cmd.MarkFlagsOneRequired("outcome", "recent", "waiting", "abandoned", "case")
	cmd.MarkFlagsMutuallyExclusive("outcome", "recent", "waiting", "abandoned", "case")
	return cmd
}

// printRunIDs prints a plain list of run ids.
func (a *app) printRunIDs(runs []store.RunID, asJSON bool) error {
	if asJSON {
		out := make([]map[string]store.RunID, len(runs))
		for i, r := range runs {
			out[i] = map[string]store.RunID{"run": r}
		}
		return writeJSON(a.stdout, out)
	}
	w := bufio.NewWriter(a.stdout)
	for _, r := range runs {
		fmt.Fprintln(w, r)
	}
	return w.Flush()
}

func (a *app) printActivity(acts []store.Activity, asJSON bool) error {
	if asJSON {
		type row struct {
			Run    store.RunID `json:"run"`
			At     uint64      `json:"at"`
			Active string      `json:"active"`
		}
		out := make([]row, len(acts))
		for i, x := range acts {
			out[i] = row{Run: x.Run, At: x.At, Active: unixText(x.At)}
		}
		return writeJSON(a.stdout, out)
	}
	w := bufio.NewWriter(a.stdout)
	for _, x := range acts {
		fmt.Fprintf(w, "%s\t%s\n", x.Run, unixText(x.At))
	}
	return w.Flush()
}

func unixText(sec uint64) string {
	if sec > 1<<40 {
		return strconv.FormatUint(sec, 10)
	}
	return time.Unix(int64(sec), 0).UTC().Format(time.RFC3339)
}

func (a *app) printWaiting(ws []store.WaitingRun, asJSON bool) error {
	if asJSON {
		return writeJSON(a.stdout, ws)
	}
	w := bufio.NewWriter(a.stdout)
	for _, x := range ws {
		until := "-"
		if !x.Reason.Until.IsZero() {
			until = x.Reason.Until.Format(time.RFC3339Nano)
		}
		what := string(x.Reason.Awaiting)
		if x.Reason.Event != "" {
			what += ":" + x.Reason.Event
		}
		fmt.Fprintf(w, "%s\t%s\tuntil %s\n", x.Run, what, until)
	}
	return w.Flush()
}

// printRecords prints a bounded list of records (a case history): JSON as
// one array document, its elements in read's JSON Lines shape.
func (a *app) printRecords(recs []store.Record, asJSON bool) error {
	w := bufio.NewWriter(a.stdout)
	var buf []byte
	if asJSON {
		w.WriteByte('[')
	}
	for i, r := range recs {
		if asJSON && i > 0 {
			w.WriteByte(',')
		}
		if !asJSON {
			w.WriteString(r.Run.String())
			w.WriteByte('\t')
		}
		buf = appendRecord(buf[:0], r, asJSON)
		if asJSON {
			buf = buf[:len(buf)-1] // the array holds them, not lines
		}
		w.Write(buf)
	}
	if asJSON {
		w.WriteString("]\n")
	}
	return w.Flush()
}
