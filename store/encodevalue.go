package store

import "github.com/runseal/runseal/internal/canon"

// EncodeBodyValue is EncodeBody for a writer that holds the kind's fields
// as a parsed value (b.Fields is not read): the body is built from it and
// encoded once, with no second parse of the fields. store/sealed builds
// its sealed fields this way.
func EncodeBodyValue(b Body, fields canon.Value) ([]byte, error) {
	// Fields that marshal canonical (the members of a parsed object keep
	// its order) take the splice, as a fresh append does; the value path
	// decides and words the rest.
	if fields.Kind == canon.Object {
		if raw, _, ok := spliceBody(b, fields.MarshalSized()); ok {
			if len(raw) > MaxRecordBytes {
				return nil, &RecordTooLargeError{Bytes: len(raw), Limit: MaxRecordBytes}
			}
			return raw, nil
		}
	}
	obj, err := bodyValueOf(b, fields)
	if err != nil {
		return nil, err
	}
	raw := obj.MarshalSized() // one allocation: a sealed record is some 600 bytes
	if len(raw) > MaxRecordBytes {
		return nil, &RecordTooLargeError{Bytes: len(raw), Limit: MaxRecordBytes}
	}
	return raw, nil
}
