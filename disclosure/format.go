package disclosure

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"

	"github.com/oklog/ulid/v2"

	"github.com/runseal/runseal/internal/canon"
	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// Format constants. spec/disclosure.md is normative; these mirror it.
const (
	// Version is the format version this package writes and reads.
	Version = 1
	// CanonVersion names the canonical JSON rules records are hashed in
	// (spec/records.md section 3).
	CanonVersion = 1

	// Line kinds of a disclosure package.
	KindPackage     = "runseal.disclosure"
	KindPackageRun  = "runseal.disclosure.run"
	KindPackageCase = "runseal.disclosure.case"
	KindPackageEnd  = "runseal.disclosure.end"

	// Line kinds of a whole export.
	KindExport    = "runseal.export"
	KindExportRun = "runseal.export.run"
	KindExportEnd = "runseal.export.end"

	// MaxLine bounds every line, newline included, so that a reader holds at
	// most one line whatever the file: a record is at most 1 MiB of raw
	// bytes, and a header at most a 1 MiB note plus the selection.
	MaxLine = 8 << 20
	// MaxSelectedRuns and MaxSelectedCases bound the selection a header
	// lists, and with it the header line.
	MaxSelectedRuns  = 100_000
	MaxSelectedCases = 10_000
	// MaxProof bounds an inclusion proof: a tree of 2^64 leaves has depth 64.
	MaxProof = 64
)

// routingFields are the body members spec/records.md section 2 reserves;
// every other member is the kind's own and opaque here.
var routingFields = [...]string{"case", "effect_key", "epoch", "kind", "phase", "run", "seq", "step", "v"}

// storeReadKinds are the kinds whose fields the store validates
// (spec/records.md section 5); their bodies are decoded in full.
func storeReadKind(k string) bool {
	switch k {
	case store.KindRunAdmitted, store.KindEffectStarted, store.KindRunSuspended, store.KindRunCancelled, store.KindRunConcluded:
		return true
	}
	return false
}

// decodeRecordBody decodes a record's raw bytes with exactly the rules of
// store.DecodeBody, at hashing speed: canon.CheckObject proves the bytes
// canonical in one pass without building a tree, and the routing members
// are decoded from the bytes it hands over, by the rules of spec/records.md
// section 2 (FuzzDecodeRecordBody holds this to store.DecodeBody on every
// input). Members outside the routing set are the kind's own and never make
// a body invalid, so only the bodies of the kinds the store reads are
// decoded in full, by store.DecodeBody, and their fields validated by
// store.ReadFacts, whose outcome the caller needs. The fields of other
// kinds are not returned.
func decodeRecordBody(raw []byte) (store.Body, store.Facts, error) {
	return decodeRecordBodyCached(raw, nil)
}

// bodyCache remembers the last run id and case id decoded and the last few
// kinds, so that the records of one run, which repeat them, are decoded
// without parsing an id again or allocating its string. A value is taken
// from it only for the very bytes it was decoded and checked from. It
// changes no result.
type bodyCache struct {
	run    idMemo[store.RunID]
	caseID idMemo[store.CaseID]
	kinds  [4]string // valid kinds, most recently added at kinds[next-1]
	next   int
	// concluded are the fields of the last RunConcluded record whose
	// fields store.ReadFacts accepted, and concludedFacts what it read
	// from them: a function of the kind and those bytes alone, and Facts
	// of that kind hold no pointer a caller could share. Most runs end in
	// one of a few outcomes, so this spares parsing the fields into a tree.
	concluded      []byte
	concludedFacts store.Facts
}

// idMemo is the last id of one body field decoded and checked, with its
// text: the same 28 bytes again (the quotes and 26 characters, none of them
// an escape) are that id, parsed and checked before.
type idMemo[T ~[16]byte] struct {
	text [26]byte
	id   T
	ok   bool
}

// bodyID decodes the id field v (a JSON string), a run's or a case's,
// requiring the bare, non-zero ULID in its one upper-case spelling (the
// rule of store.ParseRunID and ParseCaseID without their display
// prefixes), through m when it is not nil. It parses with ulid directly
// rather than through a parse function it is given: a call through a
// function value makes the string escape, an allocation per id.
func bodyID[T ~[16]byte](m *idMemo[T], v []byte, field string, fail func(string, ...any)) T {
	if m != nil && m.ok && len(v) == 28 && v[0] == '"' && bytes.Equal(v[1:27], m.text[:]) {
		return m.id
	}
	s := bodyString(v, field, fail)
	u, err := ulid.ParseStrict(s)
	if err != nil || u.String() != s || u == (ulid.ULID{}) {
		fail("%s %q is not a bare, non-zero ULID", field, s)
		return T{}
	}
	if m != nil {
		copy(m.text[:], s)
		m.id, m.ok = T(u), true
	}
	return T(u)
}

// maxConcludedMemo bounds the RunConcluded fields bodyCache keeps.
const maxConcludedMemo = 256

// kind returns the cached kind spelled v (a JSON string with its quotes).
func (c *bodyCache) kind(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	for _, k := range c.kinds {
		if k != "" && string(v[1:len(v)-1]) == k {
			return k, true
		}
	}
	return "", false
}

// addKind remembers a valid kind, forgetting the oldest.
func (c *bodyCache) addKind(k string) {
	c.kinds[c.next] = k
	c.next = (c.next + 1) % len(c.kinds)
}

// decodeRecordBodyCached is decodeRecordBody with a cache (nil: none).
func decodeRecordBodyCached(raw []byte, c *bodyCache) (store.Body, store.Facts, error) {
	b, f, _, err := decodeRecord(raw, c, nil)
	return b, f, err
}

// decodeRecord is decodeRecordBodyCached that also reports whether filter
// (when not nil) accepted one of the body's top-level members, each given
// as its key between its quotes and its value's exact bytes.
func decodeRecord(raw []byte, c *bodyCache, filter func(key, value []byte) bool) (store.Body, store.Facts, bool, error) {
	if len(raw) > store.MaxRecordBytes {
		return store.Body{}, store.Facts{}, false, &store.RecordTooLargeError{Bytes: len(raw), Limit: store.MaxRecordBytes}
	}
	var b store.Body
	var seen [len(routingFields)]bool
	var ferr error
	relevant := false
	fail := func(format string, args ...any) {
		if ferr == nil {
			ferr = fmt.Errorf("record body: "+format, args...)
		}
	}
	// The kind's own members, as spans of raw from a key's opening quote
	// to the end of its value, for the Fields of the kinds the store reads
	// (most bodies have few; more fall back to store.DecodeBody).
	var own [8][2]int
	nOwn := 0
	err := canon.CheckObject(raw, func(k, v []byte) {
		if filter != nil && !relevant && filter(k, v) {
			relevant = true
		}
		switch string(k) {
		default:
			// k and v alias raw (CheckObject), so their offsets in it
			// follow from their capacities.
			if nOwn < len(own) {
				own[nOwn] = [2]int{cap(raw) - cap(k) - 1, cap(raw) - cap(v) + len(v)}
			}
			nOwn++
		case "seq":
			seen[6] = true
			b.Seq = store.Seq(bodyUint(v, 64, "seq", fail))
		case "epoch":
			seen[2] = true
			b.Epoch = store.Epoch(bodyUint(v, 64, "epoch", fail))
		case "v":
			seen[8] = true
			b.V = uint16(bodyUint(v, 16, "v", fail))
		case "step":
			seen[7] = true
			n := uint32(bodyUint(v, 32, "step", fail))
			b.Step = &n
		case "run":
			seen[5] = true
			var m *idMemo[store.RunID]
			if c != nil {
				m = &c.run
			}
			b.Run = bodyID(m, v, "run", fail)
		case "case":
			seen[0] = true
			var m *idMemo[store.CaseID]
			if c != nil {
				m = &c.caseID
			}
			b.Case = bodyID(m, v, "case", fail)
		case "phase":
			seen[4] = true
			if s := bodyString(v, "phase", fail); s != string(store.Compensating) {
				fail("phase %q is not \"compensating\"", s)
			}
			b.Phase = store.Compensating
		case "effect_key":
			seen[1] = true
			d, err := store.ParseDigest(bodyString(v, "effect_key", fail))
			if err != nil {
				fail("effect_key: %v", err)
			}
			b.EffectKey = &d
		case "kind":
			seen[3] = true
			if c != nil {
				if k, ok := c.kind(v); ok {
					b.Kind = k
					return
				}
			}
			s := bodyString(v, "kind", fail)
			if !validKind(s) {
				fail("kind %q is not 1 to 64 characters of [A-Za-z0-9_.-]", s)
			} else if c != nil {
				c.addKind(s)
			}
			b.Kind = s
		}
	})
	if err != nil {
		return store.Body{}, store.Facts{}, false, fmt.Errorf("record body: %w", err)
	}
	if ferr != nil {
		return store.Body{}, store.Facts{}, false, ferr
	}
	for _, i := range [...]int{6, 5, 2, 8, 3} { // seq, run, epoch, v, kind
		if !seen[i] {
			return store.Body{}, store.Facts{}, false, fmt.Errorf("record body: missing %q", routingFields[i])
		}
	}
	if b.Seq == 0 {
		return store.Body{}, store.Facts{}, false, fmt.Errorf("record body: seq 0 (seqs start at 1)")
	}
	if err := store.CheckBodyRules(b); err != nil {
		return store.Body{}, store.Facts{}, false, err
	}
	if !storeReadKind(b.Kind) {
		return b, store.Facts{}, relevant, nil
	}
	full := b
	if nOwn <= len(own) {
		// raw is canonical, so the kind's own members, as written and in
		// order, are the canonical object of its fields: what
		// store.DecodeBody would marshal again after parsing the whole
		// body into a tree (FuzzDecodeRecordBody holds the two equal).
		n := 2
		for _, sp := range own[:nOwn] {
			n += sp[1] - sp[0] + 1
		}
		fields := make([]byte, 0, n)
		fields = append(fields, '{')
		for i, sp := range own[:nOwn] {
			if i > 0 {
				fields = append(fields, ',')
			}
			fields = append(fields, raw[sp[0]:sp[1]]...)
		}
		full.Fields = append(fields, '}')
	} else if full, err = store.DecodeBody(raw); err != nil {
		return store.Body{}, store.Facts{}, false, err
	}
	if c != nil && full.Kind == store.KindRunConcluded && c.concluded != nil && bytes.Equal(full.Fields, c.concluded) {
		return full, c.concludedFacts, relevant, nil
	}
	f, err := store.ReadFacts(full)
	if err != nil {
		return store.Body{}, store.Facts{}, false, fmt.Errorf("record body: %w", err)
	}
	if c != nil && full.Kind == store.KindRunConcluded && len(full.Fields) <= maxConcludedMemo {
		c.concluded, c.concludedFacts = append(c.concluded[:0], full.Fields...), f
	}
	return full, f, relevant, nil
}

// bodyUint reads a routing member that must be a non-negative integer of at
// most bits bits. A canonical number is all digits exactly when it is a
// non-negative integer.
func bodyUint(v []byte, bits int, name string, fail func(string, ...any)) uint64 {
	var n uint64
	for _, c := range v {
		if c < '0' || c > '9' {
			fail("%q is not a non-negative integer", name)
			return 0
		}
		n = n*10 + uint64(c-'0')
	}
	// Up to 19 digits cannot overflow 64 bits: the common case needs no
	// second pass; longer ones go to strconv, which knows where 2^64 is.
	if len(v) <= 19 {
		if bits < 64 && n>>bits != 0 {
			fail("%q out of range for %d bits", name, bits)
		}
		return n
	}
	n, err := strconv.ParseUint(string(v), 10, bits)
	if err != nil {
		fail("%q out of range for %d bits", name, bits)
	}
	return n
}

// bodyString reads a routing member that must be a string. Every routing
// string's valid values are free of the characters canonical JSON escapes,
// so the bytes between the quotes are the value, and a value with an escape
// is refused by the caller's own check of it.
func bodyString(v []byte, name string, fail func(string, ...any)) string {
	if len(v) < 2 || v[0] != '"' {
		fail("%q is not a string", name)
		return ""
	}
	return string(v[1 : len(v)-1])
}

// validKind is store's rule for kinds: 1 to 64 characters of [A-Za-z0-9_.-].
func validKind(k string) bool {
	if k == "" || len(k) > 64 {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// runBlock is a run block line: the run, how many record lines follow, and
// its place in the log if it has one.
type runBlock struct {
	Run     store.RunID
	Records uint64
	Sealed  bool
	Index   uint64
	Seal    store.Digest
	Proof   []log.Hash // package blocks only
}

// appendRunBlock writes a run block line. Members are in canonical order, so
// the line is canonical JSON.
func appendRunBlock(b []byte, kind string, blk *runBlock, withProof bool) []byte {
	if !blk.Sealed {
		b = append(b, `{"kind":"`...)
		b = append(b, kind...)
		b = append(b, `","records":`...)
		b = strconv.AppendUint(b, blk.Records, 10)
		b = append(b, `,"run":"`...)
		b = append(b, blk.Run.String()...)
		return append(b, `","unsealed":true}`+"\n"...)
	}
	b = append(b, `{"index":`...)
	b = strconv.AppendUint(b, blk.Index, 10)
	b = append(b, `,"kind":"`...)
	b = append(b, kind...)
	b = append(b, '"')
	if withProof {
		b = append(b, `,"proof":[`...)
		for i, h := range blk.Proof {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '"')
			b = hex.AppendEncode(b, h[:])
			b = append(b, '"')
		}
		b = append(b, ']')
	}
	b = append(b, `,"records":`...)
	b = strconv.AppendUint(b, blk.Records, 10)
	b = append(b, `,"run":"`...)
	b = append(b, blk.Run.String()...)
	b = append(b, `","seal":"`...)
	b = hex.AppendEncode(b, blk.Seal[:])
	return append(b, `"}`+"\n"...)
}

// appendRecordLine writes a record line: the record's hash, then its raw
// bytes verbatim as the value of "raw". Raw bytes are a canonical JSON
// object, so they embed without escaping and the line stays canonical.
func appendRecordLine(b []byte, hash store.Digest, raw []byte) []byte {
	b = append(b, `{"hash":"`...)
	b = hex.AppendEncode(b, hash[:])
	b = append(b, `","raw":`...)
	b = append(b, raw...)
	return append(b, "}\n"...)
}

// cursor reads a line of fixed layout strictly: every spelling the writer
// does not produce is refused, so a line has one spelling.
type cursor struct {
	b   []byte
	pos int
	err error
}

func (c *cursor) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("byte %d: %s", c.pos+1, fmt.Sprintf(format, args...))
	}
}

func (c *cursor) lit(s string) bool {
	if c.err != nil {
		return false
	}
	if !bytes.HasPrefix(c.b[c.pos:], []byte(s)) {
		c.fail("expected %q", s)
		return false
	}
	c.pos += len(s)
	return true
}

func (c *cursor) peek(s string) bool {
	return c.err == nil && bytes.HasPrefix(c.b[c.pos:], []byte(s))
}

// uint reads a canonical JSON unsigned integer that fits 64 bits.
func (c *cursor) uint() uint64 {
	if c.err != nil {
		return 0
	}
	start := c.pos
	for c.pos < len(c.b) && c.b[c.pos] >= '0' && c.b[c.pos] <= '9' {
		c.pos++
	}
	d := c.b[start:c.pos]
	if len(d) == 0 || (d[0] == '0' && len(d) > 1) {
		c.pos = start
		c.fail("expected an unsigned integer without leading zeros")
		return 0
	}
	n, err := strconv.ParseUint(string(d), 10, 64)
	if err != nil {
		c.pos = start
		c.fail("integer out of range")
		return 0
	}
	return n
}

// digest reads 64 lower-case hex characters.
func (c *cursor) digest() (d [32]byte) {
	if c.err != nil {
		return d
	}
	if len(c.b)-c.pos < 64 {
		c.fail("expected 64 hex characters")
		return d
	}
	h := c.b[c.pos : c.pos+64]
	bad := byte(0)
	for i := range d {
		hi, lo := unhex[h[2*i]], unhex[h[2*i+1]]
		bad |= hi | lo
		d[i] = hi<<4 | lo&0x0f
	}
	if bad&0xf0 != 0 {
		c.fail("expected 64 lower-case hex characters")
		return [32]byte{}
	}
	c.pos += 64
	return d
}

// unhex maps a lower-case hex digit to its value and every other byte to
// 0xff, so a run of digits decodes with one table look-up each and a single
// check at the end.
var unhex = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i, c := range "0123456789abcdef" {
		t[c] = byte(i)
	}
	return t
}()

// runID reads a bare, non-zero, canonical ULID.
func (c *cursor) runID() store.RunID {
	if c.err != nil {
		return store.RunID{}
	}
	if len(c.b)-c.pos < 26 {
		c.fail("expected a 26-character run id")
		return store.RunID{}
	}
	r, err := store.ParseRunID(string(c.b[c.pos : c.pos+26]))
	if err != nil || r.IsZero() || r.String() != string(c.b[c.pos:c.pos+26]) {
		c.fail("expected a bare, non-zero, upper-case run id")
		return store.RunID{}
	}
	c.pos += 26
	return r
}

func (c *cursor) end() {
	if c.err == nil && c.pos != len(c.b) {
		c.fail("unexpected data after the line's last member")
	}
}

// parseRunBlock parses a run block line (without its newline) of the given
// kind; a package block carries a proof when sealed, an export block never.
// blk.Proof is reused.
func parseRunBlock(line []byte, kind string, withProof bool, blk *runBlock) error {
	c := cursor{b: line}
	proof := blk.Proof[:0]
	*blk = runBlock{}
	if c.peek(`{"index":`) {
		c.lit(`{"index":`)
		blk.Sealed = true
		blk.Index = c.uint()
		c.lit(`,"kind":"`)
		c.lit(kind)
		c.lit(`"`)
		if withProof {
			c.lit(`,"proof":[`)
			for c.err == nil && !c.peek("]") {
				if len(proof) > 0 {
					c.lit(",")
				}
				c.lit(`"`)
				d := c.digest()
				c.lit(`"`)
				if len(proof) == MaxProof {
					c.fail("proof longer than %d hashes", MaxProof)
				}
				proof = append(proof, d)
			}
			c.lit("]")
		}
		c.lit(`,"records":`)
		blk.Records = c.uint()
		c.lit(`,"run":"`)
		blk.Run = c.runID()
		c.lit(`","seal":"`)
		blk.Seal = c.digest()
		c.lit(`"}`)
	} else {
		c.lit(`{"kind":"`)
		c.lit(kind)
		c.lit(`","records":`)
		blk.Records = c.uint()
		c.lit(`,"run":"`)
		blk.Run = c.runID()
		c.lit(`","unsealed":true}`)
	}
	c.end()
	blk.Proof = proof
	return c.err
}

// isRunBlock reports whether a line starts like a run block of kind.
func isRunBlock(line []byte, kind string) bool {
	const open, after = `{"kind":"`, `","records":`
	return bytes.HasPrefix(line, []byte(`{"index":`)) ||
		(bytes.HasPrefix(line, []byte(open)) && bytes.HasPrefix(line[len(open):], []byte(kind)) &&
			bytes.HasPrefix(line[len(open)+len(kind):], []byte(after)))
}

// parseRecordLine parses a record line (without its newline) and returns
// the claimed hash and the raw bytes, which alias line.
func parseRecordLine(line []byte) (store.Digest, []byte, error) {
	c := cursor{b: line}
	c.lit(`{"hash":"`)
	h := c.digest()
	c.lit(`","raw":`)
	if c.err != nil {
		return h, nil, c.err
	}
	if len(line) < c.pos+2 || line[len(line)-1] != '}' {
		return h, nil, fmt.Errorf("byte %d: expected the record's bytes and a closing '}'", len(line))
	}
	// The raw bytes run to the line's last '}'; whether they are one
	// canonical object (and so contain no stray member) is the body
	// decoder's to check.
	return h, line[c.pos : len(line)-1], nil
}

// object reads a small framing line (header, case block, trailer) strictly:
// canonical JSON, every member known, each of the expected type.
type object struct {
	v    canon.Value
	used map[string]bool
	err  error
}

func parseObject(line []byte) (*object, error) {
	if err := canon.Check(line); err != nil {
		return nil, fmt.Errorf("not a canonical JSON line: %w", err)
	}
	v, err := canon.Parse(line)
	if err != nil {
		return nil, err
	}
	if v.Kind != canon.Object {
		return nil, fmt.Errorf("not a JSON object")
	}
	return &object{v: v, used: map[string]bool{}}, nil
}

func (o *object) get(key string, kind canon.Kind) (canon.Value, bool) {
	v, ok := o.v.Get(key)
	if !ok {
		if o.err == nil {
			o.err = fmt.Errorf("member %q is missing", key)
		}
		return v, false
	}
	o.used[key] = true
	if v.Kind != kind {
		if o.err == nil {
			o.err = fmt.Errorf("member %q has the wrong type", key)
		}
		return v, false
	}
	return v, true
}

func (o *object) str(key string) string {
	v, _ := o.get(key, canon.String)
	return v.Str
}

func (o *object) uint(key string) uint64 {
	v, ok := o.get(key, canon.Number)
	if !ok {
		return 0
	}
	return o.toUint(key, v)
}

func (o *object) toUint(key string, v canon.Value) uint64 {
	if !v.IsInteger() || v.Str[0] == '-' {
		if o.err == nil {
			o.err = fmt.Errorf("member %q is not an unsigned integer", key)
		}
		return 0
	}
	n, err := strconv.ParseUint(v.Str, 10, 64)
	if err != nil && o.err == nil {
		o.err = fmt.Errorf("member %q is out of range", key)
	}
	return n
}

func (o *object) digest(key string, v canon.Value) store.Digest {
	d, err := store.ParseDigest(v.Str)
	if err != nil && o.err == nil {
		o.err = fmt.Errorf("member %q is not 64 lower-case hex characters", key)
	}
	return d
}

// done refuses members nobody asked for: a framing line has one spelling.
func (o *object) done() error {
	if o.err != nil {
		return o.err
	}
	for _, m := range o.v.Members {
		if !o.used[m.Key] {
			return fmt.Errorf("unknown member %q", m.Key)
		}
	}
	return nil
}

// kindOf returns the "kind" member of a framing line, if it has one.
func kindOf(line []byte) (string, bool) {
	v, err := canon.Parse(line)
	if err != nil || v.Kind != canon.Object {
		return "", false
	}
	k, ok := v.Get("kind")
	if !ok || k.Kind != canon.String {
		return "", false
	}
	return k.Str, true
}

// header is the first line of a package or an export.
type header struct {
	Kind       string
	Version    uint64
	Canon      uint64
	Checkpoint store.Checkpoint
	Note       []byte    // package: the signed checkpoint note
	Selection  Selection // package
	Tenant     string    // export
}

func checkpointValue(cp store.Checkpoint) canon.Value {
	v, _ := canon.NewObject([]canon.Member{
		{Key: "origin", Value: canon.StringValue(cp.Origin)},
		{Key: "root", Value: canon.StringValue(cp.Root.String())},
		{Key: "size", Value: canon.UintValue(cp.Size)},
	})
	return v
}

// marshalHeader returns the header line, newline included.
func marshalHeader(h *header) ([]byte, error) {
	ms := []canon.Member{
		{Key: "kind", Value: canon.StringValue(h.Kind)},
		{Key: "version", Value: canon.UintValue(h.Version)},
		{Key: "canon", Value: canon.UintValue(h.Canon)},
		{Key: "checkpoint", Value: checkpointValue(h.Checkpoint)},
	}
	switch h.Kind {
	case KindPackage:
		ms = append(ms, canon.Member{Key: "note", Value: canon.StringValue(string(h.Note))},
			canon.Member{Key: "selection", Value: selectionValue(h.Selection)})
	case KindExport:
		ms = append(ms, canon.Member{Key: "tenant", Value: canon.StringValue(h.Tenant)})
	default:
		return nil, fmt.Errorf("header kind %q", h.Kind)
	}
	v, err := canon.NewObject(ms)
	if err != nil {
		return nil, err
	}
	b := append(v.Marshal(), '\n')
	if len(b) > MaxLine {
		return nil, &SelectionError{Detail: fmt.Sprintf("the header would be %d bytes, over the %d-byte line limit", len(b), MaxLine)}
	}
	return b, nil
}

// headerKind reads just the kind and version of a first line, so that a
// file of another kind or a newer version is told apart from a damaged one.
// ok is false if the line is not a JSON object with a string kind. version
// is the version's canonical number (spec/records.md section 3) when that
// is an integer, of any sign and magnitude (-1 and 2^64 are integers, and
// versions this build does not read), and "" otherwise; uversion is it as
// a uint64 when it is one.
func headerKind(line []byte) (kind, version string, uversion uint64, ok bool) {
	v, err := canon.Parse(line)
	if err != nil || v.Kind != canon.Object {
		return "", "", 0, false
	}
	k, found := v.Get("kind")
	if !found || k.Kind != canon.String {
		return "", "", 0, false
	}
	ver, found := v.Get("version")
	if !found || !ver.IsInteger() {
		return k.Str, "", 0, true
	}
	n, _ := strconv.ParseUint(ver.Str, 10, 64)
	return k.Str, ver.Str, n, true
}

// parseHeader parses a header line (without its newline) of a known kind
// and version strictly.
func parseHeader(line []byte) (*header, error) {
	o, err := parseObject(line)
	if err != nil {
		return nil, err
	}
	h := &header{Kind: o.str("kind"), Version: o.uint("version"), Canon: o.uint("canon")}
	if cv, ok := o.get("checkpoint", canon.Object); ok {
		co := &object{v: cv, used: map[string]bool{}}
		h.Checkpoint.Origin = co.str("origin")
		if rv, ok := co.get("root", canon.String); ok {
			h.Checkpoint.Root = co.digest("root", rv)
		}
		h.Checkpoint.Size = co.uint("size")
		if err := co.done(); err != nil {
			return nil, fmt.Errorf("checkpoint: %w", err)
		}
	}
	switch h.Kind {
	case KindPackage:
		h.Note = []byte(o.str("note"))
		if sv, ok := o.get("selection", canon.Object); ok {
			so := &object{v: sv, used: map[string]bool{}}
			if rv, ok := so.get("runs", canon.Array); ok {
				for _, it := range rv.Items {
					r, err := store.ParseRunID(it.Str)
					if it.Kind != canon.String || err != nil || r.IsZero() || r.String() != it.Str {
						return nil, fmt.Errorf("selection: %q is not a bare, non-zero run id", it.Str)
					}
					h.Selection.Runs = append(h.Selection.Runs, r)
				}
			}
			if cv, ok := so.get("cases", canon.Array); ok {
				for _, it := range cv.Items {
					c, err := store.ParseCaseID(it.Str)
					if it.Kind != canon.String || err != nil || c.IsZero() || c.String() != it.Str {
						return nil, fmt.Errorf("selection: %q is not a bare, non-zero case id", it.Str)
					}
					h.Selection.Cases = append(h.Selection.Cases, c)
				}
			}
			if err := so.done(); err != nil {
				return nil, fmt.Errorf("selection: %w", err)
			}
			if err := h.Selection.checkSorted(); err != nil {
				return nil, err
			}
		}
	case KindExport:
		h.Tenant = o.str("tenant")
	}
	if err := o.done(); err != nil {
		return nil, err
	}
	if h.Canon != CanonVersion {
		return nil, fmt.Errorf("canon %d is not %d", h.Canon, CanonVersion)
	}
	return h, nil
}

// trailer is the last line: what the writer wrote, to be compared with what
// was read.
type trailer struct {
	Runs, Sealed, Records, Cases uint64
	// Statement is the package's signed statement (a package trailer only;
	// empty when absent, which the verifier reports).
	Statement string
}

func appendTrailer(b []byte, kind string, t trailer) []byte {
	if kind == KindPackageEnd {
		b = append(b, `{"cases":`...)
		b = strconv.AppendUint(b, t.Cases, 10)
		b = append(b, ',')
	} else {
		b = append(b, '{')
	}
	b = append(b, `"kind":"`...)
	b = append(b, kind...)
	b = append(b, `","records":`...)
	b = strconv.AppendUint(b, t.Records, 10)
	b = append(b, `,"runs":`...)
	b = strconv.AppendUint(b, t.Runs, 10)
	b = append(b, `,"sealed":`...)
	b = strconv.AppendUint(b, t.Sealed, 10)
	if t.Statement != "" {
		b = append(b, `,"statement":`...)
		b = append(b, canon.StringValue(t.Statement).Marshal()...)
	}
	return append(b, "}\n"...)
}

func parseTrailer(line []byte, kind string) (trailer, error) {
	o, err := parseObject(line)
	if err != nil {
		return trailer{}, err
	}
	var t trailer
	if o.str("kind") != kind && o.err == nil {
		return t, fmt.Errorf("kind is not %q", kind)
	}
	if kind == KindPackageEnd {
		t.Cases = o.uint("cases")
	}
	t.Records, t.Runs, t.Sealed = o.uint("records"), o.uint("runs"), o.uint("sealed")
	if _, ok := o.v.Get("statement"); ok && kind == KindPackageEnd {
		if t.Statement = o.str("statement"); t.Statement == "" && o.err == nil {
			o.err = fmt.Errorf("member \"statement\" is empty")
		}
	}
	return t, o.done()
}

func appendCaseBlock(b []byte, c store.CaseID, runs uint64) []byte {
	b = append(b, `{"case":"`...)
	b = append(b, c.String()...)
	b = append(b, `","kind":"`+KindPackageCase+`","runs":`...)
	b = strconv.AppendUint(b, runs, 10)
	return append(b, "}\n"...)
}

func parseCaseBlock(line []byte) (store.CaseID, uint64, error) {
	o, err := parseObject(line)
	if err != nil {
		return store.CaseID{}, 0, err
	}
	s := o.str("case")
	if o.str("kind") != KindPackageCase && o.err == nil {
		return store.CaseID{}, 0, fmt.Errorf("kind is not %q", KindPackageCase)
	}
	n := o.uint("runs")
	if err := o.done(); err != nil {
		return store.CaseID{}, 0, err
	}
	c, err := store.ParseCaseID(s)
	if err != nil || c.IsZero() || c.String() != s {
		return store.CaseID{}, 0, fmt.Errorf("case %q is not a bare, non-zero case id", s)
	}
	return c, n, nil
}

// Selection names what a package discloses: runs by id, and cases, each of
// which brings every run that wrote a record stamped with it.
type Selection struct {
	Runs  []store.RunID
	Cases []store.CaseID
}

// normalize sorts and de-duplicates the selection and checks its bounds.
func (s Selection) normalize() (Selection, error) {
	out := Selection{Runs: slices.Clone(s.Runs), Cases: slices.Clone(s.Cases)}
	slices.SortFunc(out.Runs, func(a, b store.RunID) int { return bytes.Compare(a[:], b[:]) })
	out.Runs = slices.Compact(out.Runs)
	slices.SortFunc(out.Cases, func(a, b store.CaseID) int { return bytes.Compare(a[:], b[:]) })
	out.Cases = slices.Compact(out.Cases)
	if len(out.Runs) == 0 && len(out.Cases) == 0 {
		return out, &SelectionError{Detail: "names no run and no case"}
	}
	if len(out.Runs) > MaxSelectedRuns || len(out.Cases) > MaxSelectedCases {
		return out, &SelectionError{Detail: fmt.Sprintf("names more than %d runs or %d cases; split the disclosure", MaxSelectedRuns, MaxSelectedCases)}
	}
	for _, r := range out.Runs {
		if r.IsZero() {
			return out, &SelectionError{Detail: "names the zero run id"}
		}
	}
	for _, c := range out.Cases {
		if c.IsZero() {
			return out, &SelectionError{Detail: "names the zero case id"}
		}
	}
	return out, nil
}

// checkSorted holds a parsed selection to the writer's form: strictly
// ascending, within bounds, not empty.
func (s Selection) checkSorted() error {
	if len(s.Runs) == 0 && len(s.Cases) == 0 {
		return fmt.Errorf("selection names no run and no case")
	}
	if len(s.Runs) > MaxSelectedRuns || len(s.Cases) > MaxSelectedCases {
		return fmt.Errorf("selection is over its bounds")
	}
	for i := 1; i < len(s.Runs); i++ {
		if bytes.Compare(s.Runs[i-1][:], s.Runs[i][:]) >= 0 {
			return fmt.Errorf("selection: runs are not strictly ascending at %s", s.Runs[i])
		}
	}
	for i := 1; i < len(s.Cases); i++ {
		if bytes.Compare(s.Cases[i-1][:], s.Cases[i][:]) >= 0 {
			return fmt.Errorf("selection: cases are not strictly ascending at %s", s.Cases[i])
		}
	}
	return nil
}
