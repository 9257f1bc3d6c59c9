package store

import (
	"fmt"
	"strconv"

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
// the backend's, inside its transaction. It is ParseBatch then Build.
func BuildBatch(head Head, epoch Epoch, batch []Append) ([]Prepared, error) {
	p, err := ParseBatch(epoch, batch)
	if err != nil {
		return nil, err
	}
	return p.Build(head)
}

// Parsed is a batch parsed and checked as far as it can be without its
// run's head: every restored append decoded (strictly, as DecodeBody), every
// fresh append's body encoded (its fields spliced as they stand when they
// are canonical, else parsed, encoded and read back), and the index facts
// of every record read. Build is then left with what needs
// the head: the seq, the position check of restored bytes, and the chain
// hash. A backend may parse before an append queues for its writer; the
// SQLite store parses in its writer, which measured better at 64 appenders
// on a busy 2-core machine (callers slower to queue again split groups).
type Parsed struct {
	run   RunID
	epoch Epoch
	recs  []parsedRecord
}

type parsedRecord struct {
	body  Body // Seq is set by Build for a fresh append
	facts Facts
	// A restored append's bytes; or a fresh append's canonical bytes
	// around the value of "seq", which alone depends on the head.
	raw, before, after []byte
}

// ParseBatch parses batch (a non-empty batch of one run under a valid
// epoch) for Build.
func ParseBatch(epoch Epoch, batch []Append) (*Parsed, error) {
	run, err := ValidateBatch(epoch, batch)
	if err != nil {
		return nil, err
	}
	p := &Parsed{run: run, epoch: epoch, recs: make([]parsedRecord, len(batch))}
	effects := map[Digest]bool{}
	for i, a := range batch {
		r := &p.recs[i]
		var fields canon.Value
		if a.Raw != nil {
			if a.Kind != "" || a.Fields != nil || !a.Case.IsZero() || a.Step != nil || a.Phase != "" || a.EffectKey != nil {
				return nil, &InvalidArgumentError{Field: fmt.Sprintf("batch[%d]", i), Detail: "a restored append carries only its raw bytes"}
			}
			if len(a.Raw) > MaxRecordBytes {
				return nil, &RecordTooLargeError{Bytes: len(a.Raw), Limit: MaxRecordBytes}
			}
			if body, ok := decodeBodyCanonical(a.Raw); ok {
				r.body = body
			} else if r.body, fields, err = decodeBody(a.Raw); err != nil {
				return nil, &InvalidArgumentError{Field: fmt.Sprintf("batch[%d].raw", i), Detail: err.Error()}
			}
			if err := CheckBodyRules(r.body); err != nil {
				return nil, &InvalidArgumentError{Field: fmt.Sprintf("batch[%d].raw", i), Detail: err.Error()}
			}
			r.raw = a.Raw
		} else if ok, err := parseFreshCanonical(r, run, epoch, a); err != nil {
			return nil, err
		} else if !ok {
			if fields, err = parseFreshValue(r, run, epoch, a); err != nil {
				return nil, err
			}
		}
		// The fields are passed parsed: a record is parsed once on the way
		// in (the canonical path passes none: its kinds' facts read none).
		if r.facts, err = readFacts(r.body, fields); err != nil {
			return nil, err
		}
		if r.body.Kind == KindEffectStarted {
			if effects[*r.body.EffectKey] {
				return nil, &DuplicateEffectError{Run: run, Key: *r.body.EffectKey}
			}
			effects[*r.body.EffectKey] = true
		}
	}
	return p, nil
}

// parseFreshValue is ParseBatch's path for any fresh append: its fields
// parsed into a value, the body built from it and encoded. It fills r and
// returns the fields' value, which readFacts reads.
func parseFreshValue(r *parsedRecord, run RunID, epoch Epoch, a Append) (canon.Value, error) {
	// Encoded at seq 1, then split around the seq's value: Build writes
	// the bytes at any other seq by putting its digits between the two
	// parts (the members' order does not depend on a value), with no
	// second sort or encoding.
	body := Body{Seq: 1, Run: run, Case: a.Case, Step: a.Step, Phase: a.Phase, EffectKey: a.EffectKey, Epoch: epoch, V: RecordVersion, Kind: a.Kind, Fields: a.Fields}
	obj, err := bodyValue(body)
	var fields canon.Value
	if err != nil {
		return canon.Value{}, err
	}
	// Read back what was encoded, with the decoder every reader and
	// verifier uses. This round trip guards two things: the Record
	// carries exactly what a later read of these bytes yields
	// (canonical Fields included), and a record the decoder would
	// refuse, which would read as corrupt forever, is never written.
	// It reads the value the encoder built rather than parsing the
	// bytes again: they are that value's Marshal, and canon's Parse
	// and Marshal are inverses (internal/canon's fuzz targets hold
	// it). The seq it reads is 1; any seq Build writes decodes alike
	// (an unsigned integer other than 0).
	if r.body, fields, err = bodyOf(obj); err != nil {
		return canon.Value{}, fmt.Errorf("encoded body does not decode: %w", err)
	}
	var ok bool
	if r.before, r.after, ok = obj.MarshalAround("seq"); !ok {
		return canon.Value{}, fmt.Errorf("encoded body has no seq")
	}
	if n := len(r.before) + 1 + len(r.after); n > MaxRecordBytes {
		return canon.Value{}, &RecordTooLargeError{Bytes: n, Limit: MaxRecordBytes}
	}
	return fields, nil
}

// Run is the run the batch appends to.
func (p *Parsed) Run() RunID { return p.run }

// Build places the parsed batch on top of head: seqs head.Seq+1 on, each
// record chained to the one before. A restored append's bytes must name
// the run, seq and epoch the store assigns.
func (p *Parsed) Build(head Head) ([]Prepared, error) {
	out := make([]Prepared, len(p.recs))
	prev := head
	for i, r := range p.recs {
		seq := prev.Seq + 1
		body, raw := r.body, r.raw
		if raw != nil {
			if body.Run != p.run || body.Seq != seq || body.Epoch != p.epoch {
				return nil, &InvalidArgumentError{Field: fmt.Sprintf("batch[%d].raw", i),
					Detail: fmt.Sprintf("bytes name run %s seq %d epoch %d; the store assigns run %s seq %d epoch %d", body.Run, body.Seq, body.Epoch, p.run, seq, p.epoch)}
			}
		} else {
			raw = make([]byte, 0, len(r.before)+20+len(r.after))
			raw = append(raw, r.before...)
			raw = strconv.AppendUint(raw, uint64(seq), 10)
			raw = append(raw, r.after...)
			if len(raw) > MaxRecordBytes {
				return nil, &RecordTooLargeError{Bytes: len(raw), Limit: MaxRecordBytes}
			}
			body.Seq = seq
		}
		rec := Record{Body: body, PrevHash: prev.Hash, Raw: raw}
		rec.Hash = ChainHash(rec.PrevHash, raw)
		out[i] = Prepared{Record: rec, Facts: r.facts}
		prev = Head{Seq: seq, Hash: rec.Hash}
	}
	return out, nil
}
