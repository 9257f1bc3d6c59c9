// Package jsontext holds the one normalization the lifecycle applies to
// the user JSON it keeps verbatim (distributions, attributes, intent data,
// effect payloads), shared by the contract's validation and both storages,
// so that a value compares equal however a backend stored it.
package jsontext

import (
	"bytes"
	"encoding/json"
)

// Compact returns raw with insignificant whitespace removed, nil for an
// empty value, and raw itself (copied) when it does not parse: validation
// refuses that case before anything is stored.
func Compact(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return append(json.RawMessage(nil), raw...)
	}
	return b.Bytes()
}
