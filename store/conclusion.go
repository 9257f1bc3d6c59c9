package store

import (
	"fmt"
	"strconv"

	"github.com/runseal/runseal/internal/canon"
)

// ConclusionOutcome reads the outcome of a RunConcluded record from its
// exact bytes, for a reader that has checked the chain over those bytes and
// wants only the outcome (an export, holding a sealed run to its latest
// conclusion): one parse, the record's kind, run and seq, and the outcome
// read and validated as ReadFacts reads it, without DecodeRecord's
// canonical-form and full-body checks (Restore applies those to every
// record).
func ConclusionOutcome(run RunID, seq Seq, raw []byte) (string, error) {
	if len(raw) > MaxRecordBytes {
		return "", &CorruptError{Run: run, Seq: seq, Detail: fmt.Sprintf("record of %d bytes, over the %d-byte limit", len(raw), MaxRecordBytes)}
	}
	v, err := canon.Parse(raw)
	if err != nil || v.Kind != canon.Object {
		return "", &CorruptError{Run: run, Seq: seq, Detail: "record body is not a JSON object"}
	}
	kind, _ := v.Get("kind")
	if kind.Kind != canon.String || kind.Str != KindRunConcluded {
		return "", &CorruptError{Run: run, Seq: seq, Detail: "the store's kind column says RunConcluded, the record does not"}
	}
	r, _ := v.Get("run")
	s, _ := v.Get("seq")
	if r.Kind != canon.String || r.Str != run.String() || s.Kind != canon.Number || s.Str != strconv.FormatUint(uint64(seq), 10) {
		return "", &CorruptError{Run: run, Seq: seq, Detail: "the record's body names another run or seq"}
	}
	f, err := readFacts(Body{Kind: KindRunConcluded}, v)
	if err != nil {
		return "", &CorruptError{Run: run, Seq: seq, Detail: "RunConcluded does not read: " + err.Error()}
	}
	return f.Outcome, nil
}
