package store

import (
	"fmt"
	"strconv"

	"github.com/runseal/runseal/internal/canon"
)

// MaxRecordBytes is the largest record body the store accepts (1 MiB).
const MaxRecordBytes = 1 << 20

// RecordVersion is the body schema version, the "v" field. It is 1 until the
// format freezes.
const RecordVersion = 1

// Phase says whether a step runs forward or compensates. Forward is the empty
// value and is omitted from the body.
type Phase string

// The phases.
const (
	Forward      Phase = ""
	Compensating Phase = "compensating"
)

// The record kinds the store reads. Every other kind is opaque to it.
const (
	KindRunAdmitted   = "RunAdmitted"
	KindEffectStarted = "EffectStarted"
	KindRunSuspended  = "RunSuspended"
	KindRunCancelled  = "RunCancelled"
	KindRunConcluded  = "RunConcluded"
)

// reserved are the body's routing fields; a kind's own fields may not use them.
var reserved = map[string]bool{
	"seq": true, "run": true, "case": true, "step": true, "phase": true,
	"effect_key": true, "epoch": true, "v": true, "kind": true,
}

// Body is the hashed part of a record: routing fields plus the kind's own
// fields. Its canonical JSON encoding is the record's raw bytes.
type Body struct {
	Seq       Seq
	Run       RunID
	Case      CaseID  // zero: no case
	Step      *uint32 // nil: no step
	Phase     Phase
	EffectKey *Digest // nil: none
	Epoch     Epoch
	V         uint16
	Kind      string
	// Fields is the kind's own fields as a canonical JSON object; "{}" when
	// the kind has none.
	Fields []byte
}

// Record is a body as stored: its exact bytes, and its place in the chain.
type Record struct {
	Body
	PrevHash Digest
	Hash     Digest
	// Raw is the canonical body bytes, kept verbatim; verification hashes
	// these bytes and never a re-serialization.
	Raw []byte
}

// Append is what a caller hands the store: the store assigns seq and epoch
// and links the chain.
type Append struct {
	Run       RunID
	Case      CaseID
	Step      *uint32
	Phase     Phase
	EffectKey *Digest
	Kind      string
	// Fields is a JSON object of the kind's own fields; nil means none.
	Fields []byte
	// Raw, when set, restores a record: these exact bytes are written, after
	// the store checks that their seq, run and epoch are the position it
	// assigns and that they are canonical. The other fields must be empty.
	Raw []byte
}

// Head is a run's chain head: the last seq and its hash. A run with no
// records has the genesis head {0, ZeroDigest}.
type Head struct {
	Seq  Seq
	Hash Digest
}

// EncodeBody returns the canonical bytes of b.
func EncodeBody(b Body) ([]byte, error) {
	raw, _, err := encodeBody(b)
	return raw, err
}

// encodeBody returns the canonical bytes of b and the value they encode, so
// that a caller can read the body back without parsing the bytes again.
func encodeBody(b Body) ([]byte, canon.Value, error) {
	obj, err := bodyValue(b)
	if err != nil {
		return nil, canon.Value{}, err
	}
	raw := obj.Marshal()
	if len(raw) > MaxRecordBytes {
		return nil, canon.Value{}, &RecordTooLargeError{Bytes: len(raw), Limit: MaxRecordBytes}
	}
	return raw, obj, nil
}

// bodyValue checks b and builds the canonical object its bytes encode.
func bodyValue(b Body) (canon.Value, error) {
	fields := canon.Value{Kind: canon.Object}
	if len(b.Fields) > 0 {
		v, err := canon.Parse(b.Fields)
		if err != nil {
			return canon.Value{}, &InvalidArgumentError{Field: "fields", Detail: err.Error()}
		}
		fields = v
	}
	return bodyValueOf(b, fields)
}

// bodyValueOf is bodyValue with the kind's fields already parsed (b.Fields
// is not read).
func bodyValueOf(b Body, fields canon.Value) (canon.Value, error) {
	if fields.Kind != canon.Object {
		return canon.Value{}, &InvalidArgumentError{Field: "fields", Detail: "must be a JSON object"}
	}
	if err := validKind(b.Kind); err != nil {
		return canon.Value{}, err
	}
	ms := make([]canon.Member, 0, len(fields.Members)+9)
	for _, m := range fields.Members {
		if reserved[m.Key] {
			return canon.Value{}, &InvalidArgumentError{Field: "fields." + m.Key, Detail: "collides with a routing field of the record body"}
		}
		ms = append(ms, m)
	}
	ms = append(ms,
		canon.Member{Key: "seq", Value: canon.UintValue(uint64(b.Seq))},
		canon.Member{Key: "run", Value: canon.StringValue(b.Run.String())},
		canon.Member{Key: "epoch", Value: canon.UintValue(uint64(b.Epoch))},
		canon.Member{Key: "v", Value: canon.UintValue(uint64(b.V))},
		canon.Member{Key: "kind", Value: canon.StringValue(b.Kind)},
	)
	if !b.Case.IsZero() {
		ms = append(ms, canon.Member{Key: "case", Value: canon.StringValue(b.Case.String())})
	}
	if b.Step != nil {
		ms = append(ms, canon.Member{Key: "step", Value: canon.UintValue(uint64(*b.Step))})
	}
	switch b.Phase {
	case Forward:
	case Compensating:
		ms = append(ms, canon.Member{Key: "phase", Value: canon.StringValue(string(b.Phase))})
	default:
		return canon.Value{}, &InvalidArgumentError{Field: "phase", Detail: fmt.Sprintf("%q is not forward or compensating", b.Phase)}
	}
	if b.EffectKey != nil {
		ms = append(ms, canon.Member{Key: "effect_key", Value: canon.StringValue(b.EffectKey.String())})
	}
	obj, err := canon.NewObject(ms)
	if err != nil {
		return canon.Value{}, &InvalidArgumentError{Field: "fields", Detail: err.Error()}
	}
	return obj, nil
}

// CheckBodyRules holds a decoded body to the rules spec/records.md states
// for every record beyond its shape: "v" is RecordVersion (section 2) and
// the epoch is from 1 to 2^62 (section 1). DecodeBody reads such bodies, so
// that a verifier can name what it refuses; the auditor refuses them here (a
// package whose chain was re-hashed around an epoch no lease can grant, or
// around a body of a schema no reader understands, is not sound), and so
// does an append of raw bytes, so the store never keeps a record its own
// packages would fail on.
func CheckBodyRules(b Body) error {
	if b.V != RecordVersion {
		return fmt.Errorf("record body: \"v\" is %d, not %d", b.V, RecordVersion)
	}
	if err := ValidateEpoch(b.Epoch); err != nil {
		return fmt.Errorf("record body: epoch %d: %w", b.Epoch, err)
	}
	return nil
}

// DecodeBody parses a record's raw bytes strictly: they must be canonical,
// carry every required routing field with the right type, and nothing else
// outside the kind's fields. It never repairs what it reads.
func DecodeBody(raw []byte) (Body, error) {
	b, _, err := decodeBody(raw)
	return b, err
}

// decodeBody is DecodeBody that also returns the kind's fields as a value.
func decodeBody(raw []byte) (Body, canon.Value, error) {
	if len(raw) > MaxRecordBytes {
		return Body{}, canon.Value{}, &RecordTooLargeError{Bytes: len(raw), Limit: MaxRecordBytes}
	}
	v, err := canon.Parse(raw)
	if err != nil {
		return Body{}, canon.Value{}, fmt.Errorf("record body: %w", err)
	}
	if v.Kind != canon.Object {
		return Body{}, canon.Value{}, fmt.Errorf("record body: not a JSON object")
	}
	// canon.Check answers as Marshal-and-compare would (its differential
	// fuzz target holds it to IsCanonical) in one pass with no encoding:
	// every restored or sealed append is checked here in the writer.
	if canon.Check(raw) != nil {
		return Body{}, canon.Value{}, fmt.Errorf("record body: bytes are not canonical JSON")
	}
	return bodyOf(v)
}

// bodyOf reads a body from the parsed value of canonical bytes: the routing
// members, checked as DecodeBody documents, and the kind's fields, returned
// both as canonical bytes (in Body.Fields) and as a value.
func bodyOf(v canon.Value) (Body, canon.Value, error) {
	var b Body
	var fields []canon.Member
	seen := map[string]bool{}
	for _, m := range v.Members {
		seen[m.Key] = true
		switch m.Key {
		case "seq":
			n, err := uintField(m, 64)
			if err != nil {
				return Body{}, canon.Value{}, err
			}
			b.Seq = Seq(n)
		case "epoch":
			n, err := uintField(m, 64)
			if err != nil {
				return Body{}, canon.Value{}, err
			}
			b.Epoch = Epoch(n)
		case "v":
			n, err := uintField(m, 16)
			if err != nil {
				return Body{}, canon.Value{}, err
			}
			b.V = uint16(n)
		case "step":
			n, err := uintField(m, 32)
			if err != nil {
				return Body{}, canon.Value{}, err
			}
			s := uint32(n)
			b.Step = &s
		case "run":
			s, err := strField(m)
			if err != nil {
				return Body{}, canon.Value{}, err
			}
			if b.Run, err = ParseRunID(s); err != nil || s != b.Run.String() || b.Run.IsZero() {
				return Body{}, canon.Value{}, fmt.Errorf("record body: run %q is not a bare, non-zero ULID", s)
			}
		case "case":
			s, err := strField(m)
			if err != nil {
				return Body{}, canon.Value{}, err
			}
			// The zero id means "no case" and is omitted, so writing it out
			// would be a second spelling of the same body.
			if b.Case, err = ParseCaseID(s); err != nil || s != b.Case.String() || b.Case.IsZero() {
				return Body{}, canon.Value{}, fmt.Errorf("record body: case %q is not a bare, non-zero ULID", s)
			}
		case "phase":
			s, err := strField(m)
			if err != nil {
				return Body{}, canon.Value{}, err
			}
			if Phase(s) != Compensating {
				return Body{}, canon.Value{}, fmt.Errorf("record body: phase %q is not \"compensating\" (forward is omitted)", s)
			}
			b.Phase = Compensating
		case "effect_key":
			s, err := strField(m)
			if err != nil {
				return Body{}, canon.Value{}, err
			}
			d, err := ParseDigest(s)
			if err != nil {
				return Body{}, canon.Value{}, fmt.Errorf("record body: effect_key: %w", err)
			}
			b.EffectKey = &d
		case "kind":
			s, err := strField(m)
			if err != nil {
				return Body{}, canon.Value{}, err
			}
			if err := validKind(s); err != nil {
				return Body{}, canon.Value{}, fmt.Errorf("record body: %w", err)
			}
			b.Kind = s
		default:
			fields = append(fields, m)
		}
	}
	for _, k := range []string{"seq", "run", "epoch", "v", "kind"} {
		if !seen[k] {
			return Body{}, canon.Value{}, fmt.Errorf("record body: missing %q", k)
		}
	}
	if b.Seq == 0 {
		return Body{}, canon.Value{}, fmt.Errorf("record body: seq 0 (seqs start at 1)")
	}
	fv := canon.Value{Kind: canon.Object, Members: fields}
	b.Fields = fv.MarshalSized()
	return b, fv, nil
}

func uintField(m canon.Member, bits int) (uint64, error) {
	if !m.Value.IsInteger() || m.Value.Str[0] == '-' {
		return 0, fmt.Errorf("record body: %q is not a non-negative integer", m.Key)
	}
	n, err := strconv.ParseUint(m.Value.Str, 10, bits)
	if err != nil {
		return 0, fmt.Errorf("record body: %q out of range for %d bits", m.Key, bits)
	}
	return n, nil
}

func strField(m canon.Member) (string, error) {
	if m.Value.Kind != canon.String {
		return "", fmt.Errorf("record body: %q is not a string", m.Key)
	}
	return m.Value.Str, nil
}

// validKind keeps kinds to identifier characters: they are stored in an
// indexed column and shown to operators, and a kind with spaces or control
// characters is a mistake, not a name.
func validKind(k string) error {
	if k == "" || len(k) > 64 {
		return &InvalidArgumentError{Field: "kind", Detail: "must be 1 to 64 characters"}
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return &InvalidArgumentError{Field: "kind", Detail: fmt.Sprintf("%q has a character outside [A-Za-z0-9_.-]", k)}
		}
	}
	return nil
}

// DecodeRecord checks a stored record before trusting it: the hash must cover
// prev and raw, and raw must decode. A mismatch is CorruptError.
func DecodeRecord(run RunID, seq Seq, prev, hash Digest, raw []byte) (Record, error) {
	if ChainHash(prev, raw) != hash {
		return Record{}, &CorruptError{Run: run, Seq: seq, Detail: "stored hash does not cover the stored bytes"}
	}
	b, err := DecodeBody(raw)
	if err != nil {
		return Record{}, &CorruptError{Run: run, Seq: seq, Detail: err.Error()}
	}
	if b.Run != run || b.Seq != seq {
		return Record{}, &CorruptError{Run: run, Seq: seq, Detail: fmt.Sprintf("body names run %s seq %d", b.Run, b.Seq)}
	}
	return Record{Body: b, PrevHash: prev, Hash: hash, Raw: raw}, nil
}

// ChainVerifier checks a run's records in order, one at a time, so a run of
// any length verifies in constant memory.
type ChainVerifier struct {
	Run  RunID
	head Head
}

// NewChainVerifier starts at the genesis head of run.
func NewChainVerifier(run RunID) *ChainVerifier { return &ChainVerifier{Run: run} }

// Next checks that r is the next record: same run, contiguous seq, prev_hash
// linked to the head, hash covering the raw bytes, raw bytes canonical and
// agreeing with the decoded body.
func (v *ChainVerifier) Next(r Record) error {
	want := v.head.Seq + 1
	if r.Seq != want {
		return &CorruptError{Run: v.Run, Seq: r.Seq, Detail: fmt.Sprintf("seq gap: expected %d", want)}
	}
	if r.PrevHash != v.head.Hash {
		return &CorruptError{Run: v.Run, Seq: r.Seq, Detail: "prev_hash does not link to the previous record"}
	}
	if ChainHash(r.PrevHash, r.Raw) != r.Hash {
		return &CorruptError{Run: v.Run, Seq: r.Seq, Detail: "hash does not cover the record bytes"}
	}
	b, err := DecodeBody(r.Raw)
	if err != nil {
		return &CorruptError{Run: v.Run, Seq: r.Seq, Detail: err.Error()}
	}
	if b.Run != v.Run || b.Seq != r.Seq {
		return &CorruptError{Run: v.Run, Seq: r.Seq, Detail: fmt.Sprintf("body names run %s seq %d", b.Run, b.Seq)}
	}
	v.head = Head{Seq: r.Seq, Hash: r.Hash}
	return nil
}

// Head is the head after the records checked so far.
func (v *ChainVerifier) Head() Head { return v.head }
