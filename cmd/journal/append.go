package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/runseal/runseal/internal/canon"
	"github.com/runseal/runseal/store"
)

// maxLineBytes bounds one input line. It is well above MaxRecordBytes so a
// record is judged by its canonical size, which the store reports exactly,
// but it still keeps a runaway line from being buffered whole.
const maxLineBytes = 8 << 20

// batch is a run of consecutive input lines naming one run: one Append.
type batch struct {
	run     store.RunID
	lines   []int // input line number of each append
	appends []store.Append
}

func (b *batch) describe() string {
	first, last := b.lines[0], b.lines[len(b.lines)-1]
	if first == last {
		return fmt.Sprintf("run %s, line %d", b.run, first)
	}
	return fmt.Sprintf("run %s, lines %d-%d", b.run, first, last)
}

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
			batches, err := parseAppends(in, ep)
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

// ackLine is what append prints for each durable record.
type ackLine struct {
	Line int          `json:"line"`
	Run  store.RunID  `json:"run"`
	Seq  store.Seq    `json:"seq"`
	Hash store.Digest `json:"hash"`
}

func (a *app) writeBatches(cmd *cobra.Command, s journalStore, epoch store.Epoch, batches []*batch, asJSON bool) error {
	ctx := cmd.Context()
	var out bytes.Buffer
	for i, b := range batches {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted before batch %d of %d (%s): %w%s", i+1, len(batches), b.describe(), err, committed(batches[:i]))
		}
		recs, err := s.Append(ctx, epoch, b.appends)
		if err != nil {
			err = fmt.Errorf("%w%s", err, notAttempted(len(batches)-i-1))
			var cu *store.CommitUnknownError
			if errors.As(err, &cu) {
				return fmt.Errorf("batch %d of %d (%s): %w; it may or may not have been written: check with 'journal read %s'%s",
					i+1, len(batches), b.describe(), err, b.run, committed(batches[:i]))
			}
			return fmt.Errorf("batch %d of %d (%s) was not written (none of it): %w%s", i+1, len(batches), b.describe(), err, committed(batches[:i]))
		}
		// One write per batch, after its commit: a line on stdout is an
		// acknowledgement that the record is durable.
		out.Reset()
		for j, r := range recs {
			if asJSON {
				if err := writeJSON(&out, ackLine{Line: b.lines[j], Run: r.Run, Seq: r.Seq, Hash: r.Hash}); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(&out, "%s\t%d\t%s\n", r.Run, r.Seq, r.Hash)
			}
		}
		if _, err := a.stdout.Write(out.Bytes()); err != nil {
			return fmt.Errorf("batch %d of %d (%s) was committed, but writing its acknowledgement failed: %w%s",
				i+1, len(batches), b.describe(), err, notAttempted(len(batches)-i-1))
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
func committed(done []*batch) string {
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
		fmt.Fprintf(&b, " [%s]", d.describe())
	}
	return b.String()
}

// parseAppends reads and validates every line before anything is written,
// grouping consecutive lines of one run into batches. Each line is checked
// by the store's own encoder (store.BuildBatch), so what passes here fails
// later only on state: fencing, sealing, uniqueness against stored records.
func parseAppends(r io.Reader, epoch store.Epoch) ([]*batch, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var batches []*batch
	var cur *batch
	var effects map[store.Digest]int // EffectStarted keys of cur, to their line
	for n := 1; ; n++ {
		line, err := readLine(br)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if len(bytes.TrimSpace(line)) > 0 {
			ap, perr := parseAppendLine(line)
			if perr != nil {
				return nil, fmt.Errorf("line %d: %w", n, perr)
			}
			if _, berr := store.BuildBatch(store.Head{}, epoch, []store.Append{ap}); berr != nil {
				return nil, fmt.Errorf("line %d: %w", n, berr)
			}
			if cur == nil || cur.run != ap.Run {
				cur = &batch{run: ap.Run}
				batches = append(batches, cur)
				effects = map[store.Digest]int{}
			}
			if ap.Kind == store.KindEffectStarted {
				if prev, ok := effects[*ap.EffectKey]; ok {
					return nil, fmt.Errorf("line %d: effect_key %s already started at line %d of the same batch", n, ap.EffectKey, prev)
				}
				effects[*ap.EffectKey] = n
			}
			cur.lines = append(cur.lines, n)
			cur.appends = append(cur.appends, ap)
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	if len(batches) == 0 {
		return nil, errors.New("no records in the input")
	}
	return batches, nil
}

// readLine returns the next line without its terminator; io.EOF with the
// last (possibly empty) line.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > maxLineBytes {
			return nil, fmt.Errorf("record too large: the line is over %d bytes, and a record is at most %d", maxLineBytes, store.MaxRecordBytes)
		}
		line = append(line, frag...)
		switch {
		case err == nil:
			return bytes.TrimSuffix(bytes.TrimSuffix(line, []byte{'\n'}), []byte{'\r'}), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return line, io.EOF
		default:
			return nil, fmt.Errorf("read input: %w", err)
		}
	}
}

// parseAppendLine splits one input object into its routing keys and the
// kind's fields. It parses with the same strict parser the store hashes
// with, so the fields handed on are exactly what will be canonicalized.
func parseAppendLine(line []byte) (store.Append, error) {
	var ap store.Append
	v, err := canon.Parse(line)
	if err != nil {
		return ap, fmt.Errorf("malformed JSON: %w", err)
	}
	if v.Kind != canon.Object {
		return ap, errors.New("malformed input: a line must be a JSON object")
	}
	var fields []canon.Member
	var haveKind bool
	for _, m := range v.Members {
		switch m.Key {
		case "run":
			s, err := stringMember(m)
			if err != nil {
				return ap, err
			}
			if ap.Run, err = store.ParseRunID(s); err != nil {
				return ap, fmt.Errorf("field \"run\": %q is not a run id (ULID)", s)
			}
		case "case":
			s, err := stringMember(m)
			if err != nil {
				return ap, err
			}
			if ap.Case, err = store.ParseCaseID(s); err != nil {
				return ap, fmt.Errorf("field \"case\": %q is not a case id (ULID)", s)
			}
		case "step":
			if !m.Value.IsInteger() || strings.HasPrefix(m.Value.Str, "-") {
				return ap, errors.New("field \"step\": must be a non-negative integer")
			}
			n, err := strconv.ParseUint(m.Value.Str, 10, 32)
			if err != nil {
				return ap, errors.New("field \"step\": out of range (at most 4294967295)")
			}
			step := uint32(n)
			ap.Step = &step
		case "phase":
			s, err := stringMember(m)
			if err != nil {
				return ap, err
			}
			switch store.Phase(s) {
			case store.Compensating:
				ap.Phase = store.Compensating
			case "forward":
				ap.Phase = store.Forward
			default:
				return ap, fmt.Errorf("field \"phase\": %q is not \"forward\" or \"compensating\"", s)
			}
		case "effect_key":
			s, err := stringMember(m)
			if err != nil {
				return ap, err
			}
			d, err := store.ParseDigest(s)
			if err != nil {
				return ap, fmt.Errorf("field \"effect_key\": %q is not 64 lowercase hex characters", s)
			}
			ap.EffectKey = &d
		case "kind":
			s, err := stringMember(m)
			if err != nil {
				return ap, err
			}
			ap.Kind, haveKind = s, true
		case "seq", "epoch", "v":
			return ap, fmt.Errorf("field %q: assigned by the store, it may not appear in the input", m.Key)
		default:
			fields = append(fields, m)
		}
	}
	if ap.Run.IsZero() {
		return ap, errors.New("field \"run\": missing")
	}
	if !haveKind {
		return ap, errors.New("field \"kind\": missing")
	}
	// Members come back sorted, and a subset of a sorted list is sorted.
	ap.Fields = canon.Value{Kind: canon.Object, Members: fields}.Marshal()
	return ap, nil
}

func stringMember(m canon.Member) (string, error) {
	if m.Value.Kind != canon.String {
		return "", fmt.Errorf("field %q: must be a string", m.Key)
	}
	return m.Value.Str, nil
}
