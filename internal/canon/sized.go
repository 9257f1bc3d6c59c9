package canon

import "bytes"

// MarshalSized is Marshal into a buffer sized up front for the value as
// written without escapes: one allocation where Marshal's buffer doubles
// its way up (a sealed record of 600 bytes took five allocations and four
// copies, on every append). The bytes are exactly Marshal's; a value with
// escapes grows the buffer as Marshal does.
func (v Value) MarshalSized() []byte {
	b := bytes.NewBuffer(make([]byte, 0, v.sizeHint()))
	v.write(b)
	return b.Bytes()
}

// sizeHint is the length of v's canonical form if no string needs an
// escape (it then is exact), found without reading the strings' bytes.
func (v Value) sizeHint() int {
	switch v.Kind {
	case Null, Bool:
		return 5
	case Number:
		return len(v.Str)
	case String:
		return len(v.Str) + 2
	case Array:
		n := 1 // "[", and "," or "]" after each item
		for _, it := range v.Items {
			n += it.sizeHint() + 1
		}
		return max(n, 2)
	case Object:
		n := 1 // "{", and per member its quoted key, ":", and "," or "}"
		for _, m := range v.Members {
			n += len(m.Key) + 4 + m.Value.sizeHint()
		}
		return max(n, 2)
	}
	return 0
}
