package witness

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strconv"
)

// Limits of the add-checkpoint request format.
const (
	// MaxProofHashes is the most consistency proof lines a request may
	// carry. C2SP tlog-witness fixes it: a proof between trees of at most
	// 2^63 leaves never needs more.
	MaxProofHashes = 63

	// MaxRequestSize caps an add-checkpoint request body, in bytes. A
	// request is 63 proof lines (under 3 KiB) and a signed note; 128 KiB
	// leaves room for a note carrying over 30 post-quantum cosignatures
	// from other witnesses, which the smaller caps of other witnesses
	// (10 and 16 KiB) would refuse.
	MaxRequestSize = 128 << 10
)

// An AddCheckpointRequest is the body of a C2SP tlog-witness add-checkpoint
// request: the size the client believes the witness holds, a consistency
// proof from that size, and the signed checkpoint note.
type AddCheckpointRequest struct {
	Old   uint64     // the size of the latest checkpoint the witness cosigned, as the client believes; 0 if none
	Proof [][32]byte // RFC 6962 consistency proof from Old to the checkpoint's size
	Note  []byte     // the signed checkpoint note, as sent
}

// Marshal returns the request body: "old <n>\n", one line of base64 per
// proof hash, a blank line and the note. It does not validate r; a request
// with more than MaxProofHashes hashes marshals to a body that
// ParseAddCheckpointRequest rejects.
func (r *AddCheckpointRequest) Marshal() []byte {
	b := make([]byte, 0, 24+len(r.Proof)*45+1+len(r.Note))
	b = append(b, "old "...)
	b = strconv.AppendUint(b, r.Old, 10)
	b = append(b, '\n')
	for _, h := range r.Proof {
		b = base64.StdEncoding.AppendEncode(b, h[:])
		b = append(b, '\n')
	}
	b = append(b, '\n')
	return append(b, r.Note...)
}

// ParseAddCheckpointRequest parses an add-checkpoint request body strictly:
// exactly the bodies Marshal produces from a request with at most
// MaxProofHashes hashes and a non-empty note are accepted, so one request has
// one spelling. The rules:
//
//   - the body is at most MaxRequestSize bytes;
//   - line 1 is "old " and a decimal number without sign or leading zeros
//     that fits in a uint64;
//   - then 0 to MaxProofHashes lines, each the padded standard base64 of
//     exactly 32 bytes in its one canonical spelling;
//   - then an empty line;
//   - then the note, which must not be empty. The note is not parsed here:
//     the checkpoint package checks it when it verifies the signatures.
//
// Lines end in "\n" only. Errors are *RequestSyntaxError values wrapping
// ErrMalformedRequest. ParseAddCheckpointRequest never panics; the returned
// request does not alias body.
func ParseAddCheckpointRequest(body []byte) (*AddCheckpointRequest, error) {
	if len(body) > MaxRequestSize {
		return nil, errBodyTooLarge
	}
	line, rest, ok := bytes.Cut(body, []byte{'\n'})
	if !ok {
		return nil, &RequestSyntaxError{Line: 1, Reason: `no "old" line ending in a newline`}
	}
	num, ok := bytes.CutPrefix(line, []byte("old "))
	if !ok {
		return nil, &RequestSyntaxError{Line: 1, Reason: `does not start with "old "`}
	}
	old, ok := parseDecimal(num)
	if !ok {
		return nil, &RequestSyntaxError{Line: 1, Reason: "old size is not a decimal number without sign or leading zeros below 2^64"}
	}
	r := &AddCheckpointRequest{Old: old}
	for n := 2; ; n++ {
		line, rest, ok = bytes.Cut(rest, []byte{'\n'})
		if !ok {
			return nil, &RequestSyntaxError{Line: n, Reason: "missing the blank line before the checkpoint"}
		}
		if len(line) == 0 {
			break
		}
		if len(r.Proof) == MaxProofHashes {
			return nil, &RequestSyntaxError{Line: n, Reason: fmt.Sprintf("more than %d proof lines", MaxProofHashes)}
		}
		h, ok := parseHash(line)
		if !ok {
			return nil, &RequestSyntaxError{Line: n, Reason: "proof line is not the canonical padded base64 of 32 bytes"}
		}
		r.Proof = append(r.Proof, h)
	}
	if len(rest) == 0 {
		return nil, &RequestSyntaxError{Line: len(r.Proof) + 3, Reason: "no checkpoint after the blank line"}
	}
	r.Note = bytes.Clone(rest)
	return r, nil
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

// parseHash decodes the one canonical padded standard-base64 spelling of a
// 32-byte hash.
func parseHash(b []byte) ([32]byte, bool) {
	var h [32]byte
	if len(b) != base64.StdEncoding.EncodedLen(len(h)) {
		return h, false
	}
	// 44 characters decode to at most 33 bytes when the padding is
	// missing; Decode needs room for that rather than panicking.
	var buf [33]byte
	n, err := base64.StdEncoding.Strict().Decode(buf[:], b)
	if err != nil || n != len(h) {
		return h, false
	}
	copy(h[:], buf[:n])
	return h, true
}
