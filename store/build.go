package store

import (
	"fmt"

	"github.com/runseal/runseal/internal/canon"
)

// Prepared is one record of a batch built on the run's head, with the facts
// the derived indexes need. Backends write Prepared records; building them
// here keeps encoding, hashing and validation identical in every backend.
type Prepared struct {
	Record
	Facts Facts
}

// ValidateBatch checks what can be checked without the store: a non-empty
// batch of one run under a valid epoch. It returns the run.
func ValidateBatch(epoch Epoch, batch []Append) (RunID, error) {
	if err := ValidateEpoch(epoch); err != nil {
		return RunID{}, err
	}
	if len(batch) == 0 {
		return RunID{}, &InvalidArgumentError{Field: "batch", Detail: "is empty"}
	}
	run := batch[0].Run
	if run.IsZero() {
		return RunID{}, &InvalidArgumentError{Field: "run", Detail: "is missing"}
	}
	for i, a := range batch {
		if a.Run != run {
			return RunID{}, &InvalidArgumentError{Field: fmt.Sprintf("batch[%d].run", i), Detail: fmt.Sprintf("batch spans runs %s and %s; a batch is one run", run, a.Run)}
		}
	}
	return run, nil
}

// BuildBatch encodes, validates and chains a batch on top of head. It does
// not consult the store: fencing, sealing and the uniqueness constraints are
// the backend's, inside its transaction.
func BuildBatch(head Head, epoch Epoch, batch []Append) ([]Prepared, error) {
	run, err := ValidateBatch(epoch, batch)
	if err != nil {
		return nil, err
	}
	out := make([]Prepared, 0, len(batch))
	prev := head
	effects := map[Digest]bool{}
	for i, a := range batch {
		seq := prev.Seq + 1
		var body Body
		var fields canon.Value
		var raw []byte
		if a.Raw != nil {
			if a.Kind != "" || a.Fields != nil || !a.Case.IsZero() || a.Step != nil || a.Phase != "" || a.EffectKey != nil {
				return nil, &InvalidArgumentError{Field: fmt.Sprintf("batch[%d]", i), Detail: "a restored append carries only its raw bytes"}
			}
			if len(a.Raw) > MaxRecordBytes {
				return nil, &RecordTooLargeError{Bytes: len(a.Raw), Limit: MaxRecordBytes}
			}
			body, fields, err = decodeBody(a.Raw)
			if err != nil {
				return nil, &InvalidArgumentError{Field: fmt.Sprintf("batch[%d].raw", i), Detail: err.Error()}
			}
			if body.Run != run || body.Seq != seq || body.Epoch != epoch {
				return nil, &InvalidArgumentError{Field: fmt.Sprintf("batch[%d].raw", i),
					Detail: fmt.Sprintf("bytes name run %s seq %d epoch %d; the store assigns run %s seq %d epoch %d", body.Run, body.Seq, body.Epoch, run, seq, epoch)}
			}
			raw = a.Raw
		} else {
			body = Body{Seq: seq, Run: run, Case: a.Case, Step: a.Step, Phase: a.Phase, EffectKey: a.EffectKey, Epoch: epoch, V: RecordVersion, Kind: a.Kind, Fields: a.Fields}
			var obj canon.Value
			raw, obj, err = encodeBody(body)
			if err != nil {
				return nil, err
			}
			// Read back what was encoded, with the decoder every reader and
			// verifier uses. This round trip guards two things: the Record
			// carries exactly what a later read of these bytes yields
			// (canonical Fields included), and a record the decoder would
			// refuse, which would read as corrupt forever, is never written.
			// It reads the value the encoder built rather than parsing raw
			// again: raw is that value's Marshal, and canon's Parse and
			// Marshal are inverses (internal/canon's fuzz targets hold it).
			if body, fields, err = bodyOf(obj); err != nil {
				return nil, fmt.Errorf("encoded body does not decode: %w", err)
			}
		}
		// The fields are passed parsed: a record is parsed once on the way in.
		facts, err := readFacts(body, fields)
		if err != nil {
			return nil, err
		}
		if body.Kind == KindEffectStarted {
			if effects[*body.EffectKey] {
				return nil, &DuplicateEffectError{Run: run, Key: *body.EffectKey}
			}
			effects[*body.EffectKey] = true
		}
		r := Record{Body: body, PrevHash: prev.Hash, Raw: raw}
		r.Hash = ChainHash(r.PrevHash, raw)
		out = append(out, Prepared{Record: r, Facts: facts})
		prev = Head{Seq: seq, Hash: r.Hash}
	}
	return out, nil
}
