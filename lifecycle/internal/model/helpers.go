package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/internal/jsontext"
)

// Invalid returns a KindInvalid error without an operation; WithOp adds it.
func Invalid(format string, args ...any) error {
	return &lifecycle.Error{Kind: lifecycle.KindInvalid, Detail: fmt.Sprintf(format, args...)}
}

// CheckName refuses a name the contract does not allow (empty, over
// lifecycle.MaxNameBytes, not UTF-8), as the contract's own validation does.
func CheckName(what, s string) error {
	switch {
	case s == "":
		return Invalid("%s is empty", what)
	case len(s) > lifecycle.MaxNameBytes:
		return Invalid("%s is %d bytes, over %d", what, len(s), lifecycle.MaxNameBytes)
	case !utf8.ValidString(s):
		return Invalid("%s is not valid UTF-8", what)
	}
	return nil
}

// CompactJSON is the lifecycle's one normalization of user JSON.
func CompactJSON(raw json.RawMessage) json.RawMessage { return jsontext.Compact(raw) }

// WithOp returns err with Op set when it is a *lifecycle.Error without one;
// request validation produces errors before it knows which operation asked.
func WithOp(op string, err error) error {
	var e *lifecycle.Error
	if errors.As(err, &e) && e.Op == "" {
		c := *e
		c.Op = op
		return &c
	}
	return err
}
