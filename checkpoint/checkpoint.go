package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Limits on checkpoint bodies. They bound the work a parser does on hostile
// input; real checkpoints are about 100 bytes.
const (
	// MaxOriginLen is the longest origin line accepted, in bytes. 255 is
	// the bound the ML-DSA cosignature format can encode (opaque<1..255>)
	// and the one other strict parsers apply, so a checkpoint we accept
	// can be cosigned by every cosignature type.
	MaxOriginLen = 255

	// MaxCheckpointLen is the longest checkpoint body accepted, in bytes,
	// extension lines included.
	MaxCheckpointLen = 64 << 10
)

// emptyRoot is the RFC 6962 root of the empty tree, SHA-256 of no bytes.
var emptyRoot = sha256.Sum256(nil)

// EmptyRoot returns the root hash of the empty tree, SHA-256(""), the only
// root a checkpoint of size 0 may carry.
func EmptyRoot() [32]byte { return emptyRoot }

// A Checkpoint is the state of a log at one size: the body of a C2SP
// tlog-checkpoint signed note.
type Checkpoint struct {
	// Origin identifies the log (for runseal, one tenant of a log; see
	// Origin). It is the first line of the body.
	Origin string
	// Size is the number of leaves in the tree.
	Size uint64
	// Root is the RFC 6962 Merkle tree hash of the first Size leaves.
	Root [32]byte
	// Extensions holds the optional lines after the root, in order,
	// without their newlines. Cosigners make no statement about them;
	// runseal logs do not emit any.
	Extensions []string
}

// Origin returns the checkpoint origin of a tenant's log: logOrigin itself
// for the tenant "default", otherwise logOrigin + "/" + tenant. Each tenant
// has its own tree, so it needs its own origin, or a witness would see two
// trees under one name and refuse one as a fork.
//
// Origin does not validate its result; Checkpoint.Validate does.
func Origin(logOrigin, tenant string) string {
	if tenant == "default" {
		return logOrigin
	}
	return logOrigin + "/" + tenant
}

// Marshal returns the checkpoint body: the origin, the decimal size, the
// standard base64 root and each extension line, each ending in a newline.
// It does not validate c; an invalid checkpoint marshals to text that Parse
// rejects. Sign validates before signing.
func (c Checkpoint) Marshal() []byte {
	b := make([]byte, 0, len(c.Origin)+1+20+1+44+1)
	b = append(b, c.Origin...)
	b = append(b, '\n')
	b = strconv.AppendUint(b, c.Size, 10)
	b = append(b, '\n')
	b = base64.StdEncoding.AppendEncode(b, c.Root[:])
	b = append(b, '\n')
	for _, e := range c.Extensions {
		b = append(b, e...)
		b = append(b, '\n')
	}
	return b
}

// String returns the body as text, for logs and error messages.
func (c Checkpoint) String() string { return string(c.Marshal()) }

// Validate reports whether c marshals to a body that Parse accepts, as a
// *SyntaxError wrapping ErrMalformedCheckpoint. It does not check
// coherence; see Coherent.
func (c Checkpoint) Validate() error {
	if err := checkOrigin(c.Origin); err != nil {
		return err
	}
	for i, e := range c.Extensions {
		if err := checkExtension(4+i, e); err != nil {
			return err
		}
	}
	if n := len(c.Marshal()); n > MaxCheckpointLen {
		return syntaxErr(ErrMalformedCheckpoint, 0, "", fmt.Sprintf("body is %d bytes, longer than %d", n, MaxCheckpointLen))
	}
	return nil
}

// Coherent reports, as an error wrapping ErrIncoherent, a checkpoint that
// no honest log can produce: size 0 with a root other than EmptyRoot.
// The text format allows it, so Parse accepts it; Sign, Open, the cosigner
// and the policy functions refuse it.
func (c Checkpoint) Coherent() error {
	if c.Size == 0 && c.Root != emptyRoot {
		return fmt.Errorf("%w: size 0 with root %s, want the empty root %s", ErrIncoherent,
			base64.StdEncoding.EncodeToString(c.Root[:]), base64.StdEncoding.EncodeToString(emptyRoot[:]))
	}
	return nil
}

// Parse parses a checkpoint body strictly: exactly the texts that Marshal
// produces from a valid Checkpoint are accepted, so Parse(text).Marshal()
// returns text unchanged. The rules, with the line they apply to:
//
//   - the text is at most MaxCheckpointLen bytes of UTF-8, without ASCII
//     control characters other than newline, and ends in a newline;
//   - line 1, the origin, is 1 to MaxOriginLen bytes and contains no DEL;
//   - line 2, the size, is decimal without sign or leading zeros and fits in
//     a uint64;
//   - line 3, the root, is padded standard base64 of exactly 32 bytes, in
//     its one canonical spelling;
//   - further lines are extension lines and must not be empty, so a body
//     never contains a blank line.
//
// Errors are *SyntaxError values wrapping ErrMalformedCheckpoint. Parse does
// not check coherence; see Coherent.
func Parse(text []byte) (Checkpoint, error) {
	if len(text) > MaxCheckpointLen {
		return Checkpoint{}, syntaxErr(ErrMalformedCheckpoint, 0, "", fmt.Sprintf("body is %d bytes, longer than %d", len(text), MaxCheckpointLen))
	}
	if len(text) == 0 {
		return Checkpoint{}, syntaxErr(ErrMalformedCheckpoint, 1, "origin", "empty body")
	}
	if text[len(text)-1] != '\n' {
		return Checkpoint{}, syntaxErr(ErrMalformedCheckpoint, bytes.Count(text, []byte{'\n'})+1, "", "body does not end in a newline")
	}
	var (
		c     Checkpoint
		line  int
		rest  = text
		ok    bool
		field []byte
	)
	for len(rest) > 0 {
		line++
		field, rest, _ = bytes.Cut(rest, []byte{'\n'})
		switch line {
		case 1:
			if err := checkOrigin(string(field)); err != nil {
				return Checkpoint{}, err
			}
			c.Origin = string(field)
		case 2:
			if c.Size, ok = parseDecimal(field); !ok {
				return Checkpoint{}, syntaxErr(ErrMalformedCheckpoint, 2, "size", sizeReason(field))
			}
		case 3:
			if c.Root, ok = parseHash(field); !ok {
				return Checkpoint{}, syntaxErr(ErrMalformedCheckpoint, 3, "root", rootReason(field))
			}
		default:
			if err := checkExtension(line, string(field)); err != nil {
				return Checkpoint{}, err
			}
			c.Extensions = append(c.Extensions, string(field))
		}
	}
	switch line {
	case 1:
		return Checkpoint{}, syntaxErr(ErrMalformedCheckpoint, 2, "size", "missing")
	case 2:
		return Checkpoint{}, syntaxErr(ErrMalformedCheckpoint, 3, "root", "missing")
	}
	return c, nil
}

// checkOrigin applies the origin rules of Parse.
func checkOrigin(o string) error {
	switch {
	case o == "":
		return syntaxErr(ErrMalformedCheckpoint, 1, "origin", "empty")
	case len(o) > MaxOriginLen:
		return syntaxErr(ErrMalformedCheckpoint, 1, "origin", fmt.Sprintf("%d bytes, longer than %d", len(o), MaxOriginLen))
	}
	if reason := badText(o); reason != "" {
		return syntaxErr(ErrMalformedCheckpoint, 1, "origin", reason)
	}
	return nil
}

// checkExtension applies the extension line rules of Parse.
func checkExtension(line int, e string) error {
	if e == "" {
		return syntaxErr(ErrMalformedCheckpoint, line, "extension", "empty line")
	}
	if reason := badText(e); reason != "" {
		return syntaxErr(ErrMalformedCheckpoint, line, "extension", reason)
	}
	return nil
}

// badText returns why s cannot be one line of a checkpoint, or "".
// Signed notes forbid control characters, so a body with one could never be
// signed; DEL is refused too because it is invisible in every display an
// auditor might read an origin on.
func badText(s string) string {
	if !utf8.ValidString(s) {
		return "invalid UTF-8"
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return fmt.Sprintf("contains control character %U", r)
		}
	}
	return ""
}

// parseDecimal parses canonical unsigned decimal: "0", or a non-zero digit
// followed by digits, no larger than 2^64-1.
func parseDecimal(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(string(b), 10, 64)
	return n, err == nil
}

func sizeReason(b []byte) string {
	switch {
	case len(b) == 0:
		return "empty"
	case len(b) > 1 && b[0] == '0':
		return "leading zero"
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return "not an unsigned decimal number"
		}
	}
	return "larger than 2^64-1"
}

// parseHash decodes the one canonical standard-base64 spelling of a 32-byte
// hash: 44 characters, one '=' of padding, zero trailing bits.
func parseHash(b []byte) ([32]byte, bool) {
	var h [32]byte
	if len(b) != base64.StdEncoding.EncodedLen(len(h)) {
		return h, false
	}
	// Decode into a full-size buffer: 44 characters without padding are 33
	// bytes, and Decode panics if dst is too short.
	var buf [33]byte
	n, err := base64.StdEncoding.Strict().Decode(buf[:], b)
	if err != nil || n != len(h) {
		return h, false
	}
	copy(h[:], buf[:n])
	// Strict rejects non-zero trailing bits, but the explicit round trip
	// makes the canonical-spelling guarantee independent of that detail.
	if base64.StdEncoding.EncodeToString(h[:]) != string(b) {
		return h, false
	}
	return h, true
}

func rootReason(b []byte) string {
	if len(b) == 0 {
		return "empty"
	}
	d, err := base64.StdEncoding.DecodeString(string(b))
	switch {
	case err != nil:
		return "not padded standard base64"
	case len(d) != 32:
		return fmt.Sprintf("%d bytes, want 32", len(d))
	}
	return "not the canonical base64 spelling"
}
