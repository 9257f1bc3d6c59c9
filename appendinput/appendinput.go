// Package appendinput parses the JSON Lines input of an append, shared by
// 'journal append' and POST /v1/append (spec/http.md).
//
// Each line is one record: the routing keys run, case, step, phase,
// effect_key and kind, and every other member as the kind's fields. Lines
// are parsed with the same strict parser the store canonicalizes with
// (duplicate keys, invalid UTF-8 and trailing data are refused), and each
// record is checked by the store's own encoder, so what Parse accepts fails
// later only on state: fencing, sealing, uniqueness against stored records.
//
// Consecutive lines naming one run form one Batch: one store.Append, all or
// nothing. Parse reads the whole input before returning, so a caller writes
// nothing when any line is bad.
package appendinput

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/runseal/runseal/internal/canon"
	"github.com/runseal/runseal/store"
)

// MaxLineBytes bounds one input line. It is well above store.MaxRecordBytes
// so a record is judged by its canonical size, which the store reports
// exactly, but it still keeps a runaway line from being buffered whole.
const MaxLineBytes = 8 << 20

// ErrNoRecords is returned for an input with no record in it.
var ErrNoRecords = errors.New("no records in the input")

// ErrLineTooLong is the class of a line over MaxLineBytes.
var ErrLineTooLong = errors.New("line too long")

// LineError names the input line at fault. It unwraps to the cause, which
// may be a store error (a *store.RecordTooLargeError for a record over
// store.MaxRecordBytes) or an I/O error of the reader.
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// Batch is a run of consecutive input lines naming one run: one Append.
type Batch struct {
	Run     store.RunID
	Lines   []int // input line number of each append
	Appends []store.Append
}

// Describe names the batch's run and lines, for messages.
func (b *Batch) Describe() string {
	first, last := b.Lines[0], b.Lines[len(b.Lines)-1]
	if first == last {
		return fmt.Sprintf("run %s, line %d", b.Run, first)
	}
	return fmt.Sprintf("run %s, lines %d-%d", b.Run, first, last)
}

// Parse reads and validates every line before returning, grouping
// consecutive lines of one run into batches. Blank lines are skipped.
func Parse(r io.Reader, epoch store.Epoch) ([]*Batch, error) {
	return parse(r, epoch, true)
}

// Split is Parse that leaves the store's encoding of each record to the
// store when the input is one batch: a store's Append checks a batch whole
// before writing any of it, so checking it here too would only do the
// work twice (a tenth of journal serve's CPU per one-record append). An
// input of several batches is checked whole, as by Parse, since a later
// batch's refusal would otherwise come after earlier ones committed.
//
// A caller of Split must call Check when the store refuses the one batch,
// and report Check's error when there is one: it names the line at fault,
// as Parse would have.
func Split(r io.Reader, epoch store.Epoch) ([]*Batch, error) {
	return parse(r, epoch, false)
}

// Check encodes every record of batches as Parse does, returning the first
// failure as a *LineError.
func Check(batches []*Batch, epoch store.Epoch) error {
	for _, b := range batches {
		for i, ap := range b.Appends {
			if _, err := store.BuildBatch(store.Head{}, epoch, []store.Append{ap}); err != nil {
				return &LineError{Line: b.Lines[i], Err: err}
			}
		}
	}
	return nil
}

func parse(r io.Reader, epoch store.Epoch, check bool) ([]*Batch, error) {
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	defer func() {
		br.Reset(nil)
		readers.Put(br)
	}()
	var batches []*Batch
	var cur *Batch
	var effects map[store.Digest]int // EffectStarted keys of cur, to their line
	for n := 1; ; n++ {
		line, err := readLine(br)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, &LineError{Line: n, Err: err}
		}
		if len(bytes.TrimSpace(line)) > 0 {
			ap, perr := ParseLine(line)
			if perr != nil {
				return nil, &LineError{Line: n, Err: perr}
			}
			if check {
				if _, berr := store.BuildBatch(store.Head{}, epoch, []store.Append{ap}); berr != nil {
					return nil, &LineError{Line: n, Err: berr}
				}
			}
			if cur == nil || cur.Run != ap.Run {
				cur = &Batch{Run: ap.Run}
				batches = append(batches, cur)
				effects = map[store.Digest]int{}
			}
			if ap.Kind == store.KindEffectStarted {
				if prev, ok := effects[*ap.EffectKey]; ok {
					return nil, &LineError{Line: n, Err: fmt.Errorf("effect_key %s already started at line %d of the same batch", ap.EffectKey, prev)}
				}
				effects[*ap.EffectKey] = n
			}
			cur.Lines = append(cur.Lines, n)
			cur.Appends = append(cur.Appends, ap)
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	if len(batches) == 0 {
		return nil, ErrNoRecords
	}
	if !check && len(batches) > 1 {
		if err := Check(batches, epoch); err != nil {
			return nil, err
		}
	}
	return batches, nil
}

// readers keeps Parse's 64 KiB read buffers for reuse. Allocating and
// clearing one per call was the largest cost of a one-record HTTP append
// that was not the database's (bench --http's profile: 11% of the
// server's CPU).
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

// readLine returns the next line without its terminator; io.EOF with the
// last (possibly empty) line.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > MaxLineBytes {
			return nil, fmt.Errorf("record too large: the line is over %d bytes, and a record is at most %d: %w", MaxLineBytes, store.MaxRecordBytes, ErrLineTooLong)
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

// ParseLine splits one input object into its routing keys and the kind's
// fields. It parses with the same strict parser the store hashes with, so
// the fields handed on are exactly what will be canonicalized.
func ParseLine(line []byte) (store.Append, error) {
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
				return ap, fmt.Errorf("field \"run\": %s is not a run id (ULID)", Quote(s))
			}
		case "case":
			s, err := stringMember(m)
			if err != nil {
				return ap, err
			}
			if ap.Case, err = store.ParseCaseID(s); err != nil {
				return ap, fmt.Errorf("field \"case\": %s is not a case id (ULID)", Quote(s))
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
				return ap, fmt.Errorf("field \"phase\": %s is not \"forward\" or \"compensating\"", Quote(s))
			}
		case "effect_key":
			s, err := stringMember(m)
			if err != nil {
				return ap, err
			}
			d, err := store.ParseDigest(s)
			if err != nil {
				return ap, fmt.Errorf("field \"effect_key\": %s is not 64 lowercase hex characters", Quote(s))
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
		return "", fmt.Errorf("field %s: must be a string", Quote(m.Key))
	}
	return m.Value.Str, nil
}

// quoteMax is how much of a bad outside value a message quotes: enough to
// recognise it, never enough to echo a large input back.
const quoteMax = 64

// Quote quotes at most a short prefix of s for an error message, marking a
// cut with "...".
func Quote(s string) string {
	if len(s) <= quoteMax {
		return strconv.Quote(s)
	}
	cut := quoteMax
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "..."
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
