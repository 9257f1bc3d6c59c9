package sealed

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/runseal/runseal/store"
)

// EnvelopePrefix starts every sealed field's JSON string; what follows is
// the base64url (unpadded) envelope.
const EnvelopePrefix = "sealed:"

// EnvelopeVersion is the envelope's first byte.
const EnvelopeVersion = 1

// ErrEnvelope classes an envelope that does not parse.
var ErrEnvelope = errors.New("malformed envelope")

// Envelope is one sealed field, self-describing so a restore or an auditor
// needs only the bytes and a key ring:
//
//	version (1 byte, 1) || len(wrapped) (2 bytes, big-endian) || wrapped data key
//	|| nonce (24 bytes) || XChaCha20-Poly1305 ciphertext || tag (16 bytes)
type Envelope struct {
	Wrapped    []byte
	Nonce      []byte
	Ciphertext []byte // with the tag appended
}

// Marshal encodes e as the field's JSON string value (without quotes).
func (e Envelope) Marshal() string {
	n := 3 + len(e.Wrapped) + len(e.Nonce) + len(e.Ciphertext)
	// One buffer: the prefix, the base64 text, and the binary envelope
	// after them, encoded into its place (sealing runs on every append).
	enc := base64.RawURLEncoding
	text := len(EnvelopePrefix) + enc.EncodedLen(n)
	buf := make([]byte, text, text+n)
	copy(buf, EnvelopePrefix)
	b := append(buf[text:], EnvelopeVersion)
	b = binary.BigEndian.AppendUint16(b, uint16(len(e.Wrapped)))
	b = append(b, e.Wrapped...)
	b = append(b, e.Nonce...)
	b = append(b, e.Ciphertext...)
	enc.Encode(buf[len(EnvelopePrefix):text], b)
	return string(buf[:text])
}

// IsEnvelope reports whether a field's string value claims to be an
// envelope (it may still fail to parse).
func IsEnvelope(s string) bool { return strings.HasPrefix(s, EnvelopePrefix) }

// maxEnvelope bounds what ParseEnvelope decodes: a record is at most
// store.MaxRecordBytes.
const maxEnvelope = store.MaxRecordBytes

// ParseEnvelope parses a sealed field's string value strictly.
func ParseEnvelope(s string) (Envelope, error) {
	if !IsEnvelope(s) {
		return Envelope{}, fmt.Errorf("%w: no %q prefix", ErrEnvelope, EnvelopePrefix)
	}
	if len(s) > maxEnvelope {
		return Envelope{}, fmt.Errorf("%w: %d bytes", ErrEnvelope, len(s))
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s[len(EnvelopePrefix):])
	if err != nil {
		return Envelope{}, fmt.Errorf("%w: not unpadded base64url", ErrEnvelope)
	}
	if len(b) < 3 || b[0] != EnvelopeVersion {
		return Envelope{}, fmt.Errorf("%w: version %d", ErrEnvelope, firstByte(b))
	}
	n := int(binary.BigEndian.Uint16(b[1:3]))
	rest := b[3:]
	if n == 0 || len(rest) < n+chacha20poly1305.NonceSizeX+chacha20poly1305.Overhead {
		return Envelope{}, fmt.Errorf("%w: %d bytes is too short for a %d-byte wrapped key, nonce and tag", ErrEnvelope, len(b), n)
	}
	return Envelope{
		Wrapped:    rest[:n],
		Nonce:      rest[n : n+chacha20poly1305.NonceSizeX],
		Ciphertext: rest[n+chacha20poly1305.NonceSizeX:],
	}, nil
}

func firstByte(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0])
}

// AssociatedData binds a sealed field to its place: the tenant, run, seq
// and field name, each length-prefixed (4 bytes, big-endian) after the
// domain string "runseal sealed v1". An envelope moved to any other place
// fails to open.
func AssociatedData(tenant string, run store.RunID, seq store.Seq, field string) []byte {
	ad := []byte("runseal sealed v1")
	for _, p := range []string{tenant, run.String(), strconv.FormatUint(uint64(seq), 10), field} {
		ad = binary.BigEndian.AppendUint32(ad, uint32(len(p)))
		ad = append(ad, p...)
	}
	return ad
}
