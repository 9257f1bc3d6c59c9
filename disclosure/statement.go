package disclosure

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/internal/canon"
	"github.com/runseal/runseal/store"
)

// StatementLine is the first line of a disclosure statement's text. A
// checkpoint's second line is its decimal size, and a statement's second
// line never is, so a statement can never be read as a checkpoint, nor a
// checkpoint as a statement (spec/disclosure.md section 2.7).
const StatementLine = "runseal.dev/disclosure-statement/v1"

// DisclosureKeySuffix names a journal's disclosure key for a log origin:
// the key that signs statements is named origin + this suffix, and it is
// never the log's checkpoint key.
const DisclosureKeySuffix = "/disclosure"

// maxStatement bounds a statement note: its text is eight short lines, and
// a few signatures follow.
const maxStatement = 64 << 10

// Statement is what a discloser signs for a package: to whom it went, the
// checkpoint it was written against, a digest of its selection, its counts,
// and a digest binding every run block (with its records, through their
// recomputed chain head) and every case block. With it, a package's framing
// is authenticated: removing a run carried because of a case and fixing the
// counts changes the blocks digest.
type Statement struct {
	Checkpoint store.Checkpoint
	Recipient  string
	Selection  store.Digest // SHA-256 of the header's canonical "selection" value
	Runs       uint64
	Sealed     uint64
	Records    uint64
	Cases      uint64
	Blocks     store.Digest // see blockDigest
}

// Marshal returns the statement's text, the body its signatures cover.
func (s Statement) Marshal() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\norigin %s\nsize %d\nroot %s\nrecipient %s\nselection %s\ncounts %d %d %d %d\nblocks %s\n",
		StatementLine, s.Checkpoint.Origin, s.Checkpoint.Size, s.Checkpoint.Root, s.Recipient, s.Selection,
		s.Runs, s.Sealed, s.Records, s.Cases, s.Blocks)
	return b.Bytes()
}

// ParseStatement parses a statement's text strictly: the eight lines of
// Marshal, each with one spelling.
func ParseStatement(text []byte) (Statement, error) {
	var s Statement
	if !bytes.HasSuffix(text, []byte("\n")) {
		return s, errors.New("statement text does not end in a line feed")
	}
	ls := strings.Split(string(text[:len(text)-1]), "\n")
	if len(ls) != 8 {
		return s, fmt.Errorf("statement has %d lines, want 8", len(ls))
	}
	if ls[0] != StatementLine {
		return s, fmt.Errorf("statement's first line is not %q", StatementLine)
	}
	field := func(i int, name string) string {
		v, ok := strings.CutPrefix(ls[i], name+" ")
		if !ok {
			return "\x00"
		}
		return v
	}
	num := func(v string) (uint64, bool) {
		if v == "" || (v[0] == '0' && len(v) > 1) {
			return 0, false
		}
		for _, c := range []byte(v) {
			if c < '0' || c > '9' {
				return 0, false
			}
		}
		n, err := strconv.ParseUint(v, 10, 64)
		return n, err == nil
	}
	dig := func(v string) (store.Digest, bool) {
		d, err := store.ParseDigest(v)
		return d, err == nil && d.String() == v
	}
	var ok bool
	if s.Checkpoint.Origin = field(1, "origin"); s.Checkpoint.Origin == "\x00" || s.Checkpoint.Origin == "" {
		return s, errors.New("statement line 2 is not \"origin ORIGIN\"")
	}
	if s.Checkpoint.Size, ok = num(field(2, "size")); !ok {
		return s, errors.New("statement line 3 is not \"size N\"")
	}
	if s.Checkpoint.Root, ok = dig(field(3, "root")); !ok {
		return s, errors.New("statement line 4 is not \"root HEX\"")
	}
	if s.Recipient = field(4, "recipient"); s.Recipient == "\x00" || store.ValidateRecipient(s.Recipient) != nil {
		return s, errors.New("statement line 5 is not \"recipient WHO\" with a valid recipient")
	}
	if s.Selection, ok = dig(field(5, "selection")); !ok {
		return s, errors.New("statement line 6 is not \"selection HEX\"")
	}
	cs := strings.Split(field(6, "counts"), " ")
	if len(cs) != 4 {
		return s, errors.New("statement line 7 is not \"counts RUNS SEALED RECORDS CASES\"")
	}
	for i, p := range []*uint64{&s.Runs, &s.Sealed, &s.Records, &s.Cases} {
		if *p, ok = num(cs[i]); !ok {
			return s, errors.New("statement line 7 is not \"counts RUNS SEALED RECORDS CASES\"")
		}
	}
	if s.Blocks, ok = dig(field(7, "blocks")); !ok {
		return s, errors.New("statement line 8 is not \"blocks HEX\"")
	}
	return s, nil
}

// SignStatement signs s with the disclosure key and returns the signed note.
func SignStatement(s Statement, key note.Signer) ([]byte, error) {
	if key == nil {
		return nil, errors.New("no disclosure key to sign the statement with")
	}
	if err := store.ValidateRecipient(s.Recipient); err != nil {
		return nil, err
	}
	return note.Sign(&note.Note{Text: string(s.Marshal())}, key)
}

// StatementReport is what the verifier established about a package's signed
// statement.
type StatementReport struct {
	Recipient string `json:"recipient,omitempty"`
	// Keys are the disclosure keys (name+hash) whose signatures verified.
	Keys []string `json:"keys,omitempty"`
	// Verified is true when a given disclosure key signed the statement and
	// the statement matches the package read.
	Verified bool `json:"verified"`
}

// openStatement opens a signed statement with the disclosure keys, for a
// package whose checkpoint has origin. It returns the statement text's parse
// (when the note's framing allows) and the keys that verified; errs says
// what failed: a finding (malformed, a failing line of any given key, its
// first line or a later one) or, wrapped in errNoDisclosureKey, that no given
// key named origin + DisclosureKeySuffix signed it. The note is a signed note
// of spec/checkpoint.md section 2, opened by checkpoint.OpenNote as a
// checkpoint's note is, so both read signature lines by the same rules.
func openStatement(n []byte, keys []note.Verifier, origin string) (Statement, []string, error) {
	if len(n) > maxStatement {
		return Statement{}, nil, fmt.Errorf("statement is %d bytes, over %d", len(n), maxStatement)
	}
	// The last blank line separates the text from the signatures, as in
	// every signed note (spec/checkpoint.md 2.1 item 2): a blank line among
	// the signatures makes the text not a statement, never a signature
	// block to skip.
	i := bytes.LastIndex(n, []byte("\n\n"))
	if i < 0 {
		return Statement{}, nil, errors.New("statement is not a signed note")
	}
	st, err := ParseStatement(n[:i+1])
	if err != nil {
		return st, nil, err
	}
	_, sigs, err := checkpoint.OpenNote(n, note.VerifierList(keys...))
	switch {
	case errors.Is(err, checkpoint.ErrUnverified) && len(keys) == 0:
		return st, nil, fmt.Errorf("%w: the statement's signature was not checked", errNoDisclosureKey)
	case errors.Is(err, checkpoint.ErrUnverified):
		return st, nil, fmt.Errorf("%w: no given disclosure key signed the statement", errNoDisclosureKey)
	case err != nil:
		return st, nil, fmt.Errorf("the statement does not verify: %w", err)
	}
	name := origin + DisclosureKeySuffix
	var who []string
	for _, s := range sigs {
		if s.Name == name {
			who = append(who, fmt.Sprintf("%s+%08x", s.Name, s.Hash))
		}
	}
	if len(who) == 0 {
		return st, nil, fmt.Errorf("%w: no given disclosure key named %s signed the statement (a statement counts only under the key named for its checkpoint's origin)", errNoDisclosureKey, name)
	}
	return st, who, nil
}

// errNoDisclosureKey marks a statement no given key could check: that
// leaves the package unverifiable, not unsound.
var errNoDisclosureKey = errors.New("no disclosure key")

// selectionValue is the header's "selection" member; its canonical bytes
// are what the statement's selection digest covers.
func selectionValue(sel Selection) canon.Value {
	runs := canon.Value{Kind: canon.Array, Items: []canon.Value{}}
	for _, r := range sel.Runs {
		runs.Items = append(runs.Items, canon.StringValue(r.String()))
	}
	cases := canon.Value{Kind: canon.Array, Items: []canon.Value{}}
	for _, c := range sel.Cases {
		cases.Items = append(cases.Items, canon.StringValue(c.String()))
	}
	v, _ := canon.NewObject([]canon.Member{{Key: "runs", Value: runs}, {Key: "cases", Value: cases}})
	return v
}

func selectionDigest(sel Selection) store.Digest {
	return store.Digest(sha256.Sum256(selectionValue(sel).Marshal()))
}

// blockDigest accumulates the statement's blocks digest: SHA-256 over, in
// file order, each run block line (its line feed included) followed by the
// 32-byte chain head recomputed from its records, and each case block line
// (its line feed included). The records are bound through their chain head,
// so the digest costs one hash of a short line per block, not a second pass
// over the records.
type blockDigest struct {
	h   hash.Hash
	buf [sha256.Size]byte // what head and line write, kept here: a slice of a local escapes through h
}

func newBlockDigest() *blockDigest { return &blockDigest{h: sha256.New()} }

// line adds a block line; nl says whether line already ends in its line feed.
func (d *blockDigest) line(line []byte, nl bool) {
	d.h.Write(line)
	if !nl {
		d.buf[0] = '\n'
		d.h.Write(d.buf[:1])
	}
}

func (d *blockDigest) head(h store.Digest) {
	copy(d.buf[:], h[:])
	d.h.Write(d.buf[:len(h)])
}

func (d *blockDigest) sum() (s store.Digest) {
	d.h.Sum(s[:0])
	return s
}

// sameStatement lists what differs between the statement signed and the
// one recomputed from the package.
func sameStatement(signed, read Statement) []string {
	var diff []string
	if signed.Checkpoint != read.Checkpoint {
		diff = append(diff, fmt.Sprintf("checkpoint (signed %s %d %s, package %s %d %s)",
			signed.Checkpoint.Origin, signed.Checkpoint.Size, signed.Checkpoint.Root, read.Checkpoint.Origin, read.Checkpoint.Size, read.Checkpoint.Root))
	}
	if signed.Selection != read.Selection {
		diff = append(diff, "selection")
	}
	if signed.Runs != read.Runs || signed.Sealed != read.Sealed || signed.Records != read.Records || signed.Cases != read.Cases {
		diff = append(diff, fmt.Sprintf("counts (signed %d %d %d %d, package %d %d %d %d)",
			signed.Runs, signed.Sealed, signed.Records, signed.Cases, read.Runs, read.Sealed, read.Records, read.Cases))
	}
	if signed.Blocks != read.Blocks {
		diff = append(diff, "blocks digest (a run or case block, or a record, differs from what was signed)")
	}
	return diff
}
