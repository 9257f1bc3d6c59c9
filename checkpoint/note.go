package checkpoint

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/note"
)

// Limits on signed notes, bounding the work done on hostile input.
const (
	// MaxNoteLen is the longest signed note accepted, in bytes: room for a
	// maximal checkpoint and MaxSignatures post-quantum signatures.
	MaxNoteLen = 1 << 20

	// MaxSignatures is the most signature lines a note may carry, the same
	// limit as x/mod/sumdb/note; C2SP signed-note requires at least 16.
	MaxSignatures = 100
)

// sigPrefix starts every signature line: an em dash (U+2014) and a space.
const sigPrefix = "\u2014 "

// A sigLine is one syntactically valid signature line of a note.
type sigLine struct {
	line int    // 1-based line number in the parsed text, for errors
	raw  string // the line without its newline, to drop exact repeats
	name string
	hash uint32
	b64  string
	sig  []byte // the signature after the key ID
}

// nameHash identifies a key the way a signature line does.
type nameHash struct {
	name string
	hash uint32
}

// splitNote checks the signed-note framing of msg and returns the note text
// (ending in a newline) and its signature lines. It verifies nothing.
func splitNote(msg []byte) ([]byte, []sigLine, error) {
	if len(msg) > MaxNoteLen {
		return nil, nil, syntaxErr(ErrMalformedNote, 0, "", fmt.Sprintf("note is %d bytes, longer than %d", len(msg), MaxNoteLen))
	}
	if reason, at := badNoteBytes(msg); reason != "" {
		return nil, nil, syntaxErr(ErrMalformedNote, bytes.Count(msg[:at], []byte{'\n'})+1, "", reason)
	}
	// The text may not contain a blank line (Parse refuses one), but the
	// signed-note rule is that the last blank line separates the text from
	// the signatures, so split there and let Parse report a blank line.
	split := bytes.LastIndex(msg, []byte("\n\n"))
	if split < 0 {
		return nil, nil, syntaxErr(ErrMalformedNote, 0, "", "no blank line before the signatures")
	}
	text, block := msg[:split+1], msg[split+2:]
	first := bytes.Count(text, []byte{'\n'}) + 2 // line number of the first signature
	if len(block) == 0 {
		return nil, nil, syntaxErr(ErrMalformedNote, first, "signature", "no signature lines")
	}
	if block[len(block)-1] != '\n' {
		return nil, nil, syntaxErr(ErrMalformedNote, first+bytes.Count(block, []byte{'\n'}), "signature", "note does not end in a newline")
	}
	lines, err := splitSigLines(block, first)
	if err != nil {
		return nil, nil, err
	}
	return text, lines, nil
}

// splitSigLines parses a block of newline-terminated signature lines whose
// first line is line number first.
func splitSigLines(block []byte, first int) ([]sigLine, error) {
	var lines []sigLine
	for n := first; len(block) > 0; n++ {
		var l []byte
		l, block, _ = bytes.Cut(block, []byte{'\n'})
		if len(lines) == MaxSignatures {
			return nil, syntaxErr(ErrMalformedNote, n, "signature", fmt.Sprintf("more than %d signatures", MaxSignatures))
		}
		sl, err := parseSigLine(n, string(l))
		if err != nil {
			return nil, err
		}
		lines = append(lines, sl)
	}
	return lines, nil
}

// parseSigLine parses "— <key name> <base64(key ID || signature)>".
func parseSigLine(n int, l string) (sigLine, error) {
	rest, ok := strings.CutPrefix(l, sigPrefix)
	if !ok {
		return sigLine{}, syntaxErr(ErrMalformedNote, n, "signature", "does not start with an em dash (U+2014) and a space")
	}
	name, b64, ok := strings.Cut(rest, " ")
	if !ok || !isValidName(name) {
		return sigLine{}, syntaxErr(ErrMalformedNote, n, "signature", "key name is empty, or contains spaces or '+'")
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(b64)
	if err != nil || len(raw) < 5 {
		return sigLine{}, syntaxErr(ErrMalformedNote, n, "signature", "signature is not canonical base64 of a key ID and a signature")
	}
	return sigLine{line: n, raw: l, name: name, hash: binary.BigEndian.Uint32(raw), b64: b64, sig: raw[4:]}, nil
}

// badNoteBytes returns why msg cannot be a signed note and the offset of the
// fault, or "": notes are UTF-8 without control characters but newline.
func badNoteBytes(msg []byte) (string, int) {
	for i := 0; i < len(msg); {
		r, size := utf8.DecodeRune(msg[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			return "invalid UTF-8", i
		case r < 0x20 && r != '\n':
			return fmt.Sprintf("control character %U", r), i
		}
		i += size
	}
	return "", 0
}

// verifiedSig is a signature that verified, with what Open learned from it.
type verifiedSig struct {
	sig   note.Signature
	cosig bool      // made by a *CosignatureVerifier's key
	time  time.Time // the cosignature timestamp, if cosig
}

// verifyLines checks lines against known and returns the signatures that
// verified, at most one per key, in line order. Lines from unknown keys are
// skipped. A line from a known key that fails is a *SignatureError, even if
// another line from that key verified: the spec says a known key's
// signature must be verified, and a failure means tampering.
func verifyLines(text []byte, lines []sigLine, known note.Verifiers) ([]verifiedSig, error) {
	if known == nil {
		known = note.VerifierList()
	}
	var out []verifiedSig
	have := make(map[nameHash]bool)
	seen := make(map[string]bool)
	for _, l := range lines {
		if seen[l.raw] {
			continue // an exact repeat says nothing new
		}
		seen[l.raw] = true
		v, err := known.Verifier(l.name, l.hash)
		if err != nil {
			if _, ok := errors.AsType[*note.UnknownVerifierError](err); ok {
				continue
			}
			return nil, fmt.Errorf("line %d: key %s+%08x: %w", l.line, l.name, l.hash, err)
		}
		if v.Name() != l.name || v.KeyHash() != l.hash {
			return nil, fmt.Errorf("line %d: verifier for %s+%08x reports key %s+%08x", l.line, l.name, l.hash, v.Name(), v.KeyHash())
		}
		if !v.Verify(text, l.sig) {
			return nil, &SignatureError{Name: l.name, KeyHash: l.hash}
		}
		k := nameHash{l.name, l.hash}
		if have[k] {
			continue // counted once; a witness signing twice is one witness
		}
		have[k] = true
		vs := verifiedSig{sig: note.Signature{Name: l.name, Hash: l.hash, Base64: l.b64}}
		if _, ok := v.(*CosignatureVerifier); ok {
			t, _ := cosignatureTimestamp(l.sig) // Verify checked the shape
			vs.cosig, vs.time = true, time.Unix(int64(t), 0).UTC()
		}
		out = append(out, vs)
	}
	return out, nil
}

// A Signed is a checkpoint from a signed note together with the signatures
// on it that verified. It never holds a signature that did not verify, so
// its Note is safe to store, serve and cosign.
type Signed struct {
	cp   Checkpoint
	text []byte
	sigs []verifiedSig
}

// A Cosignature is a verified cosignature/v1 signature on a Signed.
type Cosignature struct {
	Name    string    // the witness's key name
	KeyHash uint32    // the witness's key ID
	Time    time.Time // when, by the witness's clock, it cosigned (UTC)
}

// Open parses and verifies a signed checkpoint note. It checks the framing
// (C2SP signed-note), parses the body strictly with Parse, then checks every
// signature line whose key name and key ID match a verifier in known:
//
//   - a line from an unknown key is ignored and not kept;
//   - a line from a known key that does not verify rejects the whole note
//     with a *SignatureError (ErrInvalidSignature);
//   - repeated signatures by one key are verified and kept once;
//   - if no line verified, the note is rejected with ErrUnverified;
//   - any error from known.Verifier other than *note.UnknownVerifierError
//     (an ambiguous key list, say) is returned.
//
// Only after the signatures verified does Open check coherence
// (ErrIncoherent), so that error means a key holder signed it.
//
// Open does not know which keys belong to the log and which to witnesses:
// a note verified only by witness keys opens. Check the log signature with
// Signed.SignedBy, or use Policy.Verify, which does.
func Open(msg []byte, known note.Verifiers) (*Signed, error) {
	text, lines, err := splitNote(msg)
	if err != nil {
		return nil, err
	}
	cp, err := Parse(text)
	if err != nil {
		return nil, err
	}
	sigs, err := verifyLines(text, lines, known)
	if err != nil {
		return nil, err
	}
	if len(sigs) == 0 {
		return nil, fmt.Errorf("%w: none of %d signatures on %q is from a known key", ErrUnverified, len(lines), cp.Origin)
	}
	if err := cp.Coherent(); err != nil {
		return nil, err
	}
	return &Signed{cp: cp, text: text, sigs: sigs}, nil
}

// OpenNote checks any signed note's framing (spec/checkpoint.md section 2.1
// items 1 to 4) and verifies its signature lines against known exactly as
// Open does (section 2.2: every line of a known key, not only its first), but
// does not read its text: it is for signed notes that are not checkpoints,
// such as a disclosure statement, whose caller parses the text itself. It
// returns the text (ending in a newline) and the signatures that verified,
// one per key, in note order; a failing line of a known key is a
// *SignatureError, and no verified line is ErrUnverified.
func OpenNote(msg []byte, known note.Verifiers) ([]byte, []note.Signature, error) {
	text, lines, err := splitNote(msg)
	if err != nil {
		return nil, nil, err
	}
	vs, err := verifyLines(text, lines, known)
	if err != nil {
		return nil, nil, err
	}
	if len(vs) == 0 {
		return nil, nil, fmt.Errorf("%w: none of %d signatures is from a known key", ErrUnverified, len(lines))
	}
	sigs := make([]note.Signature, len(vs))
	for i, v := range vs {
		sigs[i] = v.sig
	}
	return text, sigs, nil
}

// NoteOrigin returns the origin of the checkpoint in a signed note, checking
// the note's framing and body but no signature. It exists so that a verifier
// can pick the keys for that origin before calling Open; nothing else about
// an unverified note may be trusted.
func NoteOrigin(msg []byte) (string, error) {
	text, _, err := splitNote(msg)
	if err != nil {
		return "", err
	}
	cp, err := Parse(text)
	if err != nil {
		return "", err
	}
	return cp.Origin, nil
}

// Checkpoint returns the checkpoint.
func (s *Signed) Checkpoint() Checkpoint {
	cp := s.cp
	cp.Extensions = append([]string(nil), cp.Extensions...)
	return cp
}

// Text returns the checkpoint body exactly as signed.
func (s *Signed) Text() []byte { return append([]byte(nil), s.text...) }

// Signatures returns the verified signatures, one per key, in note order.
func (s *Signed) Signatures() []note.Signature {
	out := make([]note.Signature, len(s.sigs))
	for i, v := range s.sigs {
		out[i] = v.sig
	}
	return out
}

// Cosignatures returns the verified signatures made by *CosignatureVerifier
// keys, with their timestamps, in note order.
func (s *Signed) Cosignatures() []Cosignature {
	var out []Cosignature
	for _, v := range s.sigs {
		if v.cosig {
			out = append(out, Cosignature{Name: v.sig.Name, KeyHash: v.sig.Hash, Time: v.time})
		}
	}
	return out
}

// SignedBy reports whether a signature by v's key verified.
func (s *Signed) SignedBy(v note.Verifier) bool {
	for _, vs := range s.sigs {
		if vs.sig.Name == v.Name() && vs.sig.Hash == v.KeyHash() {
			return true
		}
	}
	return false
}

// Note returns the signed note rebuilt from the verified signatures only.
// Store and forward this, never the note that was opened: x/mod's note.Sign
// re-emits signatures it could not verify, and a forged line kept that way
// would later be served as if it had been checked.
func (s *Signed) Note() []byte {
	b := make([]byte, 0, len(s.text)+1+len(s.sigs)*128)
	b = append(b, s.text...)
	b = append(b, '\n')
	for _, v := range s.sigs {
		b = appendSigLine(b, v.sig)
	}
	return b
}

func appendSigLine(b []byte, sig note.Signature) []byte {
	b = append(b, sigPrefix...)
	b = append(b, sig.Name...)
	b = append(b, ' ')
	b = append(b, sig.Base64...)
	return append(b, '\n')
}

// WithSignatures returns a copy of s with the signature lines in lines added,
// as a log publisher does with a witness's add-checkpoint response. lines
// holds whole signature lines, each ending in a newline. Lines from unknown
// keys are dropped; a line from a known key that does not verify is a
// *SignatureError; at least one line must verify (ErrUnverified otherwise).
// A new signature replaces an existing one by the same key, so re-witnessing
// refreshes a cosignature's timestamp.
func (s *Signed) WithSignatures(lines []byte, known note.Verifiers) (*Signed, error) {
	if len(lines) > MaxNoteLen {
		return nil, syntaxErr(ErrMalformedNote, 0, "", fmt.Sprintf("signature lines are %d bytes, longer than %d", len(lines), MaxNoteLen))
	}
	if reason, at := badNoteBytes(lines); reason != "" {
		return nil, syntaxErr(ErrMalformedNote, bytes.Count(lines[:at], []byte{'\n'})+1, "signature", reason)
	}
	if len(lines) == 0 || lines[len(lines)-1] != '\n' {
		return nil, syntaxErr(ErrMalformedNote, bytes.Count(lines, []byte{'\n'})+1, "signature", "signature lines are empty or do not end in a newline")
	}
	parsed, err := splitSigLines(lines, 1)
	if err != nil {
		return nil, err
	}
	added, err := verifyLines(s.text, parsed, known)
	if err != nil {
		return nil, err
	}
	if len(added) == 0 {
		return nil, fmt.Errorf("%w: none of %d signature lines is from a known key", ErrUnverified, len(parsed))
	}
	replaced := make(map[nameHash]bool, len(added))
	for _, a := range added {
		replaced[nameHash{a.sig.Name, a.sig.Hash}] = true
	}
	out := &Signed{cp: s.cp, text: s.text}
	for _, v := range s.sigs {
		if !replaced[nameHash{v.sig.Name, v.sig.Hash}] {
			out.sigs = append(out.sigs, v)
		}
	}
	out.sigs = append(out.sigs, added...)
	if len(out.sigs) > MaxSignatures {
		return nil, syntaxErr(ErrMalformedNote, 0, "signature", fmt.Sprintf("more than %d signatures", MaxSignatures))
	}
	return out, nil
}

// Sign validates cp, refuses it if it is incoherent, and returns it as a
// signed note carrying one signature from each signer, in order. It goes
// through x/mod's note.Sign, and a *Cosigner signs as a witness.
func Sign(cp Checkpoint, signers ...note.Signer) ([]byte, error) {
	if err := cp.Validate(); err != nil {
		return nil, err
	}
	if err := cp.Coherent(); err != nil {
		return nil, err
	}
	if len(signers) == 0 {
		return nil, errors.New("checkpoint: Sign needs at least one signer")
	}
	if len(signers) > MaxSignatures {
		return nil, fmt.Errorf("checkpoint: %d signers, more than %d", len(signers), MaxSignatures)
	}
	seen := make(map[nameHash]bool, len(signers))
	for _, s := range signers {
		k := nameHash{s.Name(), s.KeyHash()}
		if seen[k] {
			return nil, fmt.Errorf("checkpoint: two signers for key %s+%08x", k.name, k.hash)
		}
		seen[k] = true
	}
	msg, err := note.Sign(&note.Note{Text: string(cp.Marshal())}, signers...)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: signing %q: %w", cp.Origin, err)
	}
	return msg, nil
}

// SignatureLines is Sign without the body: it returns only the new
// signature lines, as a witness answers add-checkpoint.
func SignatureLines(cp Checkpoint, signers ...note.Signer) ([]byte, error) {
	msg, err := Sign(cp, signers...)
	if err != nil {
		return nil, err
	}
	return msg[len(cp.Marshal())+1:], nil
}
