package checkpoint

import (
	"errors"
	"fmt"
	"strconv"
)

// Sentinel errors. Every error returned by this package wraps at most one of
// them, so callers can branch with [errors.Is] (a witness maps them to HTTP
// statuses, an auditor to a verdict) without matching message text.
var (
	// ErrMalformedCheckpoint reports a checkpoint body that does not follow
	// the format. The error is a *SyntaxError naming the line and field.
	ErrMalformedCheckpoint = errors.New("malformed checkpoint")

	// ErrIncoherent reports a well-formed checkpoint that cannot describe a
	// real tree: size 0 with a root other than SHA-256 of the empty string.
	// Open and Policy.Verify return it only after the signatures verified,
	// so a witness can tell it apart from a forgery (422, not 403).
	ErrIncoherent = errors.New("incoherent checkpoint")

	// ErrMalformedNote reports a signed note that does not follow the
	// signed-note format: bad encoding, no signature block, a malformed
	// signature line, too many signatures. The error is a *SyntaxError.
	ErrMalformedNote = errors.New("malformed note")

	// ErrUnverified reports a note on which no signature from a known key
	// verified, or, for Policy.Verify, none from a log key for the origin.
	ErrUnverified = errors.New("no verified signature")

	// ErrInvalidSignature reports a signature that names a known key (name
	// and key ID both match) but does not verify. The whole note is rejected:
	// the key holder did not make it, so someone tampered with the note.
	// The error is a *SignatureError.
	ErrInvalidSignature = errors.New("invalid signature")

	// ErrMalformedKey reports a signer or verifier key string that cannot be
	// decoded, or whose key ID does not match its name and public key.
	ErrMalformedKey = errors.New("malformed key")

	// ErrUnsupportedKey reports a well-formed key of a signature type this
	// package does not implement, or of the wrong type for its use (for
	// example a plain Ed25519 key given as a witness key).
	ErrUnsupportedKey = errors.New("unsupported key type")

	// ErrMalformedPolicy reports a witness policy that cannot be parsed or is
	// inconsistent (unknown names, duplicate keys, impossible thresholds).
	// Parse errors are *SyntaxError values naming the line.
	ErrMalformedPolicy = errors.New("malformed policy")

	// ErrPolicyNotMet reports a checkpoint whose valid cosignatures do not
	// satisfy the witness policy's quorum.
	ErrPolicyNotMet = errors.New("witness policy not met")
)

// A SyntaxError describes where a checkpoint, note or policy text departs
// from its format. It unwraps to ErrMalformedCheckpoint, ErrMalformedNote or
// ErrMalformedPolicy.
type SyntaxError struct {
	Err    error  // the sentinel: ErrMalformedCheckpoint, ErrMalformedNote or ErrMalformedPolicy
	Line   int    // 1-based line number in the parsed text; 0 if not tied to a line
	Field  string // the part of the line at fault, such as "origin", "size", "root"; may be empty
	Reason string // what is wrong, in a few words
}

// Error formats the error as "<kind>: line <n> (<field>): <reason>".
func (e *SyntaxError) Error() string {
	s := e.Err.Error()
	if e.Line > 0 {
		s += ": line " + strconv.Itoa(e.Line)
		if e.Field != "" {
			s += " (" + e.Field + ")"
		}
	} else if e.Field != "" {
		s += ": " + e.Field
	}
	return s + ": " + e.Reason
}

// Unwrap returns the sentinel so errors.Is works.
func (e *SyntaxError) Unwrap() error { return e.Err }

// A SignatureError reports a signature line whose key name and key ID match a
// known key but whose signature does not verify. It unwraps to
// ErrInvalidSignature.
type SignatureError struct {
	Name    string // key name from the signature line
	KeyHash uint32 // key ID from the signature line
}

// Error names the key whose signature failed.
func (e *SignatureError) Error() string {
	return fmt.Sprintf("invalid signature for key %s+%08x", e.Name, e.KeyHash)
}

// Unwrap returns ErrInvalidSignature so errors.Is works.
func (e *SignatureError) Unwrap() error { return ErrInvalidSignature }

func syntaxErr(kind error, line int, field, reason string) error {
	return &SyntaxError{Err: kind, Line: line, Field: field, Reason: reason}
}
