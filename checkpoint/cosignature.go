package checkpoint

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// cosignatureLen is the length of a cosignature/v1 signature after the key
// ID: an 8-byte timestamp and a 64-byte Ed25519 signature.
const cosignatureLen = 8 + ed25519.SignatureSize

// appendCosignedMessage appends the message a cosignature/v1 signature
// covers: "cosignature/v1\ntime <t>\n" followed by the checkpoint body. The
// header gives domain separation from plain note signatures by the same key.
func appendCosignedMessage(b []byte, t uint64, body []byte) []byte {
	b = append(b, "cosignature/v1\ntime "...)
	b = strconv.AppendUint(b, t, 10)
	b = append(b, '\n')
	return append(b, body...)
}

// A Cosigner makes C2SP tlog-cosignature cosignature/v1 signatures: the
// timestamped Ed25519 signatures a witness adds to a checkpoint it has
// checked. It implements note.Signer, so note.Sign and Sign can use it.
//
// A Cosigner signs only bodies that Parse accepts and that are coherent:
// a witness must never lend its key to anything but a checkpoint.
type Cosigner struct {
	name string
	hash uint32
	key  ed25519.PrivateKey
	at   *time.Time // fixed signing time; nil means the current time
}

// GenerateCosignerKey returns a new witness key pair: a signer key
// "PRIVATE+KEY+<name>+<key ID>+<base64(0x04 || seed)>" for NewCosigner and a
// verifier key "<name>+<key ID>+<base64(0x04 || public key)>" for
// NewCosignatureVerifier and witness policies. The key ID is
// SHA-256(name || 0x0A || 0x04 || public key)[:4].
//
// Use a fresh key for each cosigner name: the signed message does not
// include the name, so one key under two names would let one identity's
// cosignatures count as the other's.
func GenerateCosignerKey(rand io.Reader, name string) (skey, vkey string, err error) {
	if !isValidName(name) {
		return "", "", fmt.Errorf("%w: %q is not a valid key name (empty, or contains spaces or '+')", ErrMalformedKey, name)
	}
	pub, priv, err := ed25519.GenerateKey(rand)
	if err != nil {
		return "", "", err
	}
	h := KeyID(name, TypeCosignatureV1, pub)
	skey = fmt.Sprintf("PRIVATE+KEY+%s+%08x+%s", name, h, base64.StdEncoding.EncodeToString(append([]byte{TypeCosignatureV1}, priv.Seed()...)))
	vkey = fmt.Sprintf("%s+%08x+%s", name, h, base64.StdEncoding.EncodeToString(append([]byte{TypeCosignatureV1}, pub...)))
	return skey, vkey, nil
}

// CosignerVerifierKey returns the verifier key (type 0x04) of the cosigner
// named name with Ed25519 public key pub.
func CosignerVerifierKey(name string, pub ed25519.PublicKey) (string, error) {
	if !isValidName(name) {
		return "", fmt.Errorf("%w: %q is not a valid key name (empty, or contains spaces or '+')", ErrMalformedKey, name)
	}
	if len(pub) != ed25519.PublicKeySize {
		return "", fmt.Errorf("%w: Ed25519 public key is %d bytes, want %d", ErrMalformedKey, len(pub), ed25519.PublicKeySize)
	}
	return fmt.Sprintf("%s+%08x+%s", name, KeyID(name, TypeCosignatureV1, pub),
		base64.StdEncoding.EncodeToString(append([]byte{TypeCosignatureV1}, pub...))), nil
}

// NewCosigner returns the cosigner for a type 0x04 signer key, as made by
// GenerateCosignerKey. A plain Ed25519 (0x01) key is refused, so that a key
// is a log key or a witness key, never both by accident.
func NewCosigner(skey string) (*Cosigner, error) {
	name, hash, typ, seed, err := parseSignerKey(skey)
	if err != nil {
		return nil, err
	}
	if typ != TypeCosignatureV1 {
		return nil, fmt.Errorf("%w: cosigner key type 0x%02x, want 0x04 (cosignature/v1)", ErrUnsupportedKey, typ)
	}
	priv, err := ed25519Seed(name, hash, typ, seed)
	if err != nil {
		return nil, err
	}
	return &Cosigner{name: name, hash: hash, key: priv}, nil
}

// Name returns the cosigner's key name.
func (c *Cosigner) Name() string { return c.name }

// KeyHash returns the cosigner's key ID.
func (c *Cosigner) KeyHash() uint32 { return c.hash }

// At returns a copy of c that signs with timestamp t instead of the current
// time, for reproducible test vectors and for re-signing at a known time.
// Sub-second precision is dropped.
func (c *Cosigner) At(t time.Time) *Cosigner {
	c2 := *c
	c2.at = &t
	return &c2
}

// Sign returns the cosignature of the checkpoint body msg: the 8-byte
// big-endian Unix time followed by the Ed25519 signature of
// "cosignature/v1\ntime <t>\n" || msg. It refuses a body Parse rejects, an
// incoherent checkpoint, and a time before 1970.
func (c *Cosigner) Sign(msg []byte) ([]byte, error) {
	cp, err := Parse(msg)
	if err != nil {
		return nil, fmt.Errorf("cosigner %s: %w", c.name, err)
	}
	if err := cp.Coherent(); err != nil {
		return nil, fmt.Errorf("cosigner %s: %w", c.name, err)
	}
	t := time.Now()
	if c.at != nil {
		t = *c.at
	}
	ts := t.Unix()
	if ts < 0 {
		return nil, fmt.Errorf("cosigner %s: time %v is before 1970", c.name, t)
	}
	sig := make([]byte, 8, cosignatureLen)
	binary.BigEndian.PutUint64(sig, uint64(ts))
	return append(sig, ed25519.Sign(c.key, appendCosignedMessage(nil, uint64(ts), msg))...), nil
}

// Verifier returns the verifier for c's signatures.
func (c *Cosigner) Verifier() *CosignatureVerifier {
	return &CosignatureVerifier{name: c.name, hash: c.hash, pub: c.key.Public().(ed25519.PublicKey)}
}

// A CosignatureVerifier verifies cosignature/v1 signatures by one witness
// key. It implements note.Verifier, so it works with note.Open as well as
// with Open and Policy, which also report the cosignature's timestamp.
type CosignatureVerifier struct {
	name string
	hash uint32
	pub  ed25519.PublicKey
}

// NewCosignatureVerifier returns the verifier for a witness verifier key
// "<name>+<key ID>+<base64(0x04 || 32-byte Ed25519 public key)>". The key ID
// must match; a key of another type, including plain Ed25519 (0x01), is
// refused with ErrUnsupportedKey rather than converted, because converting
// would change the key ID the policy author wrote down.
func NewCosignatureVerifier(vkey string) (*CosignatureVerifier, error) {
	name, hash, typ, key, err := parseVerifierKey(vkey)
	if err != nil {
		return nil, err
	}
	if typ != TypeCosignatureV1 {
		return nil, fmt.Errorf("%w: witness key type 0x%02x, want 0x04 (cosignature/v1)", ErrUnsupportedKey, typ)
	}
	if len(key) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: Ed25519 public key is %d bytes, want %d", ErrMalformedKey, len(key), ed25519.PublicKeySize)
	}
	return &CosignatureVerifier{name: name, hash: hash, pub: ed25519.PublicKey(key)}, nil
}

// Name returns the witness's key name.
func (v *CosignatureVerifier) Name() string { return v.name }

// KeyHash returns the witness's key ID.
func (v *CosignatureVerifier) KeyHash() uint32 { return v.hash }

// PublicKey returns the witness's Ed25519 public key.
func (v *CosignatureVerifier) PublicKey() ed25519.PublicKey {
	return append(ed25519.PublicKey(nil), v.pub...)
}

// String returns the verifier key string.
func (v *CosignatureVerifier) String() string {
	return fmt.Sprintf("%s+%08x+%s", v.name, v.hash, base64.StdEncoding.EncodeToString(append([]byte{TypeCosignatureV1}, v.pub...)))
}

// Verify reports whether sig (without the key ID) is a valid cosignature/v1
// signature of the checkpoint body msg. It is false for a body Parse
// rejects, for a timestamp above 2^63-1, and for any length but 72 bytes.
func (v *CosignatureVerifier) Verify(msg, sig []byte) bool {
	t, ok := cosignatureTimestamp(sig)
	if !ok {
		return false
	}
	if _, err := Parse(msg); err != nil {
		return false
	}
	return ed25519.Verify(v.pub, appendCosignedMessage(nil, t, msg), sig[8:])
}

// cosignatureTimestamp returns the timestamp of a cosignature/v1 signature
// (without key ID) if it has the right length and an allowed timestamp.
func cosignatureTimestamp(sig []byte) (uint64, bool) {
	if len(sig) != cosignatureLen {
		return 0, false
	}
	t := binary.BigEndian.Uint64(sig)
	return t, t <= math.MaxInt64
}

// CosignatureTime returns the timestamp in a cosignature/v1 note signature.
// It checks the shape of the signature, not its validity: call it only on
// signatures that verified, such as those from Signed.Signatures, or use
// Signed.Cosignatures, which carries the times already.
func CosignatureTime(sig note.Signature) (time.Time, error) {
	raw, err := base64.StdEncoding.Strict().DecodeString(sig.Base64)
	if err != nil || len(raw) < 4 {
		return time.Time{}, fmt.Errorf("%w: signature is not base64 of a key ID and a signature", ErrMalformedNote)
	}
	if binary.BigEndian.Uint32(raw) != sig.Hash {
		return time.Time{}, fmt.Errorf("%w: key ID in signature does not match %08x", ErrMalformedNote, sig.Hash)
	}
	t, ok := cosignatureTimestamp(raw[4:])
	if !ok {
		return time.Time{}, fmt.Errorf("%w: not a cosignature/v1 signature (72 bytes after the key ID, timestamp at most 2^63-1)", ErrMalformedNote)
	}
	return time.Unix(int64(t), 0).UTC(), nil
}
