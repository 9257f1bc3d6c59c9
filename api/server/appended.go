package server

import (
	"net/http"
	"strconv"

	"github.com/oklog/ulid/v2"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/store"
)

// appendJSON appends a's JSON, byte for byte what encoding/json writes
// for it (members in declaration order, a trailing newline), without
// reflection: the answer to every append is this object, and encoding it
// through encoding/json was a fifth of the append handler's CPU under 512
// clients (bench --http's server profile). Every member is a number, a
// ULID (Crockford base32) or lowercase hex, so nothing needs escaping.
func appendJSON(b []byte, a api.Appended) []byte {
	b = append(b, `{"records":[`...)
	for i, k := range a.Records {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"line":`...)
		b = strconv.AppendInt(b, int64(k.Line), 10)
		b = append(b, `,"run":"`...)
		b = appendRunID(b, k.Run)
		b = append(b, `","seq":`...)
		b = strconv.AppendUint(b, uint64(k.Seq), 10)
		b = append(b, `,"hash":"`...)
		b = appendHex(b, k.Hash)
		b = append(b, `"}`...)
	}
	if a.Records == nil {
		// encoding/json writes a nil slice as null.
		b = append(b[:len(b)-1], "null"...)
		return append(b, "}\n"...)
	}
	return append(b, "]}\n"...)
}

func appendRunID(b []byte, r store.RunID) []byte {
	var t [ulid.EncodedSize]byte
	_ = ulid.ULID(r).MarshalTextTo(t[:]) // cannot fail: t is the right size
	return append(b, t[:]...)
}

func appendHex(b []byte, d store.Digest) []byte {
	const digits = "0123456789abcdef"
	for _, c := range d {
		b = append(b, digits[c>>4], digits[c&0xf])
	}
	return b
}

// writeAppended answers an append with a's JSON in one write.
func writeAppended(w http.ResponseWriter, a api.Appended) {
	b := appendJSON(make([]byte, 0, 32+len(a.Records)*160), a)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}
