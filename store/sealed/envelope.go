package sealed

import (
	"crypto/cipher"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/oklog/ulid/v2"
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
	return encodeEnvelope(e.Wrapped, e.Nonce, len(e.Ciphertext), func(b []byte) []byte { return append(b, e.Ciphertext...) })
}

// sealEnvelope seals plaintext under aead with nonce and associated data
// ad, and returns the envelope's string value: Envelope{wrapped, nonce,
// aead.Seal(nil, nonce, plaintext, ad)}.Marshal(), with the ciphertext
// sealed straight into its place in the envelope's buffer (sealing runs
// for every sealed field of every append).
func sealEnvelope(aead cipher.AEAD, wrapped, nonce, plaintext, ad []byte) string {
	return encodeEnvelope(wrapped, nonce, len(plaintext)+aead.Overhead(), func(b []byte) []byte { return aead.Seal(b, nonce, plaintext, ad) })
}

// encodeEnvelope writes an envelope in one buffer: the prefix, room for
// the base64 text, and the binary envelope after them (ciphertext appends
// the ciphertext of the given length), which is then encoded into its
// room.
func encodeEnvelope(wrapped, nonce []byte, ctLen int, ciphertext func([]byte) []byte) string {
	n := 3 + len(wrapped) + len(nonce) + ctLen
	enc := base64.RawURLEncoding
	text := len(EnvelopePrefix) + enc.EncodedLen(n)
	buf := make([]byte, text, text+n)
	copy(buf, EnvelopePrefix)
	b := append(buf[text:], EnvelopeVersion)
	b = binary.BigEndian.AppendUint16(b, uint16(len(wrapped)))
	b = append(b, wrapped...)
	b = append(b, nonce...)
	b = ciphertext(b)
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
	const domain = "runseal sealed v1"
	var num [20]byte
	seqText := strconv.AppendUint(num[:0], uint64(seq), 10)
	var id [ulid.EncodedSize]byte
	_ = ulid.ULID(run).MarshalTextTo(id[:]) // cannot fail: the buffer is the encoded size
	ad := make([]byte, 0, len(domain)+4*4+len(tenant)+len(id)+len(seqText)+len(field))
	ad = append(ad, domain...)
	for _, p := range [][]byte{[]byte(tenant), id[:], seqText, []byte(field)} {
		ad = binary.BigEndian.AppendUint32(ad, uint32(len(p)))
		ad = append(ad, p...)
	}
	return ad
}
