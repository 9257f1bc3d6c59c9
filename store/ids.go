package store

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/oklog/ulid/v2"
)

// RunID names a run. It is a ULID, so ids sort by creation time and can be
// minted without coordination. Its text form is the bare 26-character ULID;
// ParseRunID also accepts the display spelling with a "run_" prefix.
type RunID ulid.ULID

// CaseID names a case (a matter several runs belong to). Zero means none.
type CaseID ulid.ULID

// NewRunID mints a fresh run id.
func NewRunID() RunID { return RunID(ulid.Make()) }

// NewCaseID mints a fresh case id.
func NewCaseID() CaseID { return CaseID(ulid.Make()) }

// ParseRunID parses a run id, bare or with the "run_" prefix.
func ParseRunID(s string) (RunID, error) {
	u, err := parseULID(strings.TrimPrefix(s, "run_"))
	if err != nil {
		return RunID{}, &InvalidArgumentError{Field: "run", Detail: fmt.Sprintf("%q is not a ULID: %v", s, err)}
	}
	return RunID(u), nil
}

// ParseCaseID parses a case id, bare or with the "case_" prefix.
func ParseCaseID(s string) (CaseID, error) {
	u, err := parseULID(strings.TrimPrefix(s, "case_"))
	if err != nil {
		return CaseID{}, &InvalidArgumentError{Field: "case", Detail: fmt.Sprintf("%q is not a ULID: %v", s, err)}
	}
	return CaseID(u), nil
}

// parseULID is strict: ulid.ParseStrict refuses invalid characters, and the
// upper-case check refuses a second spelling of the same id, because ids are
// hashed into records and one id must have one text form.
func parseULID(s string) (ulid.ULID, error) {
	u, err := ulid.ParseStrict(s)
	if err != nil {
		return ulid.ULID{}, err
	}
	if u.String() != s {
		return ulid.ULID{}, fmt.Errorf("not in canonical upper-case form")
	}
	return u, nil
}

func (r RunID) String() string { return ulid.ULID(r).String() }

// IsZero reports whether r is the zero id, which names no run.
func (r RunID) IsZero() bool { return r == RunID{} }

// MarshalText writes the bare ULID.
func (r RunID) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText parses with ParseRunID.
func (r *RunID) UnmarshalText(b []byte) error {
	v, err := ParseRunID(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

func (c CaseID) String() string { return ulid.ULID(c).String() }

// IsZero reports whether c is the zero id, which means "no case".
func (c CaseID) IsZero() bool { return c == CaseID{} }

// MarshalText writes the bare ULID.
func (c CaseID) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText parses with ParseCaseID.
func (c *CaseID) UnmarshalText(b []byte) error {
	v, err := ParseCaseID(string(b))
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// Seq is a record's 1-based position in its run.
type Seq uint64

// Epoch is a lease's fencing token. Epochs start at 1; 0 is never valid.
type Epoch uint64

// Digest is a SHA-256 value. Its text form is lowercase hex.
type Digest [32]byte

// ZeroDigest is the genesis prev_hash: 32 zero bytes.
var ZeroDigest Digest

// Sum returns SHA-256(b).
func Sum(b []byte) Digest { return sha256.Sum256(b) }

// ChainHash is the record hash: SHA-256(prev || raw), over the stored bytes.
func ChainHash(prev Digest, raw []byte) Digest {
	h := sha256.New()
	h.Write(prev[:])
	h.Write(raw)
	var d Digest
	h.Sum(d[:0])
	return d
}

// ParseDigest parses 64 lowercase hex characters.
func ParseDigest(s string) (Digest, error) {
	var d Digest
	if len(s) != 64 || strings.ToLower(s) != s {
		return d, &InvalidArgumentError{Field: "digest", Detail: fmt.Sprintf("%q is not 64 lowercase hex characters", s)}
	}
	if _, err := hex.Decode(d[:], []byte(s)); err != nil {
		return d, &InvalidArgumentError{Field: "digest", Detail: fmt.Sprintf("%q: %v", s, err)}
	}
	return d, nil
}

func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// MarshalText writes lowercase hex.
func (d Digest) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText parses lowercase hex.
func (d *Digest) UnmarshalText(b []byte) error {
	v, err := ParseDigest(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}
