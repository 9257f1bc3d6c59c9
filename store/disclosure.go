package store

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Disclosure records one act of disclosure: who gave which runs and cases to
// whom, against which checkpoint, and the SHA-256 of the exact bytes
// delivered, so that "what did we give, to whom, when" has an answer that
// the package itself can be checked against.
//
// It is an operator row kept beside the journal, not in it: disclosing a run
// does not change its history, so the row is unchained, and it is never
// carried in an export (a restored journal starts with an empty register).
type Disclosure struct {
	ID         string     `json:"id"` // "dsc_<ULID>"
	At         time.Time  `json:"at"`
	By         Operator   `json:"by"`
	Recipient  string     `json:"recipient"`
	Runs       []RunID    `json:"runs"`  // runs selected by id, ascending
	Cases      []CaseID   `json:"cases"` // cases selected, ascending
	Checkpoint Checkpoint `json:"checkpoint"`
	Package    Digest     `json:"package"` // SHA-256 of the delivered bytes
	Bytes      int64      `json:"bytes"`   // length of the delivered bytes
	// Carried is how many runs the package carries: the runs selected by id
	// and every run a selected case touched. The package itself lists them,
	// and Package binds that list.
	Carried uint64 `json:"runs_carried"`
	Sealed  uint64 `json:"sealed"`  // carried runs with a leaf below the checkpoint
	Records uint64 `json:"records"` // record lines in the package
	// SignedBy is the disclosure key ("<name>+<key ID>") that signed the
	// package's statement (spec/disclosure.md 2.7): never the log key.
	// Empty for acts recorded before packages carried a statement.
	SignedBy string `json:"signed_by,omitempty"`
}

// DisclosureRegister is where a journal's operator records each act of
// disclosure. It is an operator table beside the journal, per tenant:
// unchained, because disclosing changes no run's history, and never
// exported. Every backend implements it.
type DisclosureRegister interface {
	// RecordDisclosure stores one act durably before returning; a second
	// act with the same id is refused.
	RecordDisclosure(ctx context.Context, d Disclosure) error
	// Disclosures lists acts oldest first, strictly after the id after
	// ("" from the start), at most limit (1 to MaxLimit) of them.
	Disclosures(ctx context.Context, after string, limit int) ([]Disclosure, error)
}

// Validate refuses a disclosure record a register should not store: a
// malformed id, a blank actor or recipient, a selection that names nothing.
func (d Disclosure) Validate() error {
	if !strings.HasPrefix(d.ID, "dsc_") {
		return &InvalidArgumentError{Field: "id", Detail: fmt.Sprintf("%q does not start with dsc_", d.ID)}
	}
	if _, err := parseULID(d.ID[len("dsc_"):]); err != nil {
		return &InvalidArgumentError{Field: "id", Detail: fmt.Sprintf("%q is not dsc_ and a ULID", d.ID)}
	}
	if err := d.By.Validate(); err != nil {
		return err
	}
	if err := ValidateRecipient(d.Recipient); err != nil {
		return err
	}
	if len(d.Runs) == 0 && len(d.Cases) == 0 {
		return &InvalidArgumentError{Field: "selection", Detail: "names no run and no case"}
	}
	if d.At.IsZero() {
		return &InvalidArgumentError{Field: "at", Detail: "is missing"}
	}
	if d.Bytes <= 0 {
		return &InvalidArgumentError{Field: "bytes", Detail: "a delivered package is never empty"}
	}
	return nil
}

// ValidateRecipient refuses a blank or oversized recipient, or one with a
// control character: it is shown to operators and auditors as written, so
// it holds no character of Unicode general category Cc (U+0000 to U+001F,
// U+007F to U+009F, U+0085 among them) and none with the Bidi_Control
// property (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069),
// which would make it read otherwise than it is (spec/disclosure.md 2.7).
func ValidateRecipient(r string) error {
	if r == "" || len(r) > 256 || !utf8.ValidString(r) {
		return &InvalidArgumentError{Field: "recipient", Detail: "must be 1 to 256 bytes of UTF-8"}
	}
	for _, c := range r {
		if unicode.Is(unicode.Cc, c) || unicode.Is(unicode.Bidi_Control, c) {
			return &InvalidArgumentError{Field: "recipient", Detail: fmt.Sprintf("contains the control character %U", c)}
		}
	}
	return nil
}
