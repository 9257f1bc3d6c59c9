package checkpoint

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/note"
)

// Signature type bytes from C2SP signed-note. They prefix the public key in
// vkeys and in the key ID hash, which keeps a key used for two purposes from
// having one key ID.
const (
	// TypeEd25519 is a plain Ed25519 note signature, used by logs to sign
	// checkpoints.
	TypeEd25519 byte = 0x01
	// TypeCosignatureV1 is a timestamped Ed25519 cosignature/v1 signature
	// (C2SP tlog-cosignature), used by witnesses.
	TypeCosignatureV1 byte = 0x04
)

// maxKeyFileLen bounds key and key list files; a vkey is under 300 bytes.
const maxKeyFileLen = 1 << 20

// KeyID returns the signed-note key ID of a public key: the first four bytes,
// big-endian, of SHA-256(name || 0x0A || typ || pub).
func KeyID(name string, typ byte, pub []byte) uint32 {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{'\n', typ})
	h.Write(pub)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// isValidName reports whether name can be a note key name: non-empty UTF-8
// without Unicode spaces or '+', the rule x/mod/sumdb/note applies.
func isValidName(name string) bool {
	return name != "" && utf8.ValidString(name) &&
		strings.IndexFunc(name, unicode.IsSpace) < 0 && !strings.Contains(name, "+")
}

// parseHash8 parses the 8 hexadecimal digits of a key ID.
func parseHash8(s string) (uint32, bool) {
	if len(s) != 8 {
		return 0, false
	}
	var h uint32
	for i := 0; i < len(s); i++ {
		c := s[i]
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		h = h<<4 | uint32(d)
	}
	return h, true
}

// parseVerifierKey decodes "<name>+<hex key ID>+<base64(type || key)>" and
// checks the key ID.
func parseVerifierKey(vkey string) (name string, hash uint32, typ byte, key []byte, err error) {
	name, rest, ok1 := strings.Cut(vkey, "+")
	hash16, key64, ok2 := strings.Cut(rest, "+")
	hash, ok3 := parseHash8(hash16)
	raw, err := base64.StdEncoding.Strict().DecodeString(key64)
	if !ok1 || !ok2 || !ok3 || err != nil || !isValidName(name) || len(raw) < 2 {
		return "", 0, 0, nil, fmt.Errorf("%w: verifier key is not <name>+<8 hex digits>+<base64 key>", ErrMalformedKey)
	}
	if KeyID(name, raw[0], raw[1:]) != hash {
		return "", 0, 0, nil, fmt.Errorf("%w: key ID %08x does not match name %q and public key", ErrMalformedKey, hash, name)
	}
	return name, hash, raw[0], raw[1:], nil
}

// parseSignerKey decodes "PRIVATE+KEY+<name>+<hex key ID>+<base64(type ||
// key)>". The key ID covers the public key, so the caller checks it after
// deriving that.
func parseSignerKey(skey string) (name string, hash uint32, typ byte, key []byte, err error) {
	rest, ok0 := strings.CutPrefix(skey, "PRIVATE+KEY+")
	name, rest, ok1 := strings.Cut(rest, "+")
	hash16, key64, ok2 := strings.Cut(rest, "+")
	hash, ok3 := parseHash8(hash16)
	raw, err := base64.StdEncoding.Strict().DecodeString(key64)
	if !ok0 || !ok1 || !ok2 || !ok3 || err != nil || !isValidName(name) || len(raw) < 2 {
		return "", 0, 0, nil, fmt.Errorf("%w: signer key is not PRIVATE+KEY+<name>+<8 hex digits>+<base64 key>", ErrMalformedKey)
	}
	return name, hash, raw[0], raw[1:], nil
}

// ed25519Seed checks that a signer key body is an Ed25519 seed whose public
// key has the given key ID, and returns the private key.
func ed25519Seed(name string, hash uint32, typ byte, seed []byte) (ed25519.PrivateKey, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%w: Ed25519 seed is %d bytes, want %d", ErrMalformedKey, len(seed), ed25519.SeedSize)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	if KeyID(name, typ, priv.Public().(ed25519.PublicKey)) != hash {
		return nil, fmt.Errorf("%w: key ID %08x does not match name %q and public key", ErrMalformedKey, hash, name)
	}
	return priv, nil
}

// GenerateLogKey returns a new Ed25519 (type 0x01) signer key and verifier
// key for a log, in the x/mod/sumdb/note formats. The key name should be the
// checkpoint origin the key will sign for: C2SP tlog-checkpoint recommends
// it and Policy.Verify requires it.
func GenerateLogKey(rand io.Reader, origin string) (skey, vkey string, err error) {
	if !isValidName(origin) {
		return "", "", fmt.Errorf("%w: %q is not a valid key name (empty, or contains spaces or '+')", ErrMalformedKey, origin)
	}
	return note.GenerateKey(rand, origin)
}

// SignerForOrigin returns a log signer that uses the Ed25519 key in skey
// under the key name origin, and the matching verifier key. A runseal log
// has one key but one tree, hence one origin, per tenant (see Origin); the
// key name should equal the origin, so each tenant gets its own name and
// key ID over the same key. Reusing the key is sound because a plain note
// signature covers the origin line.
func SignerForOrigin(skey, origin string) (signer note.Signer, vkey string, err error) {
	name, hash, typ, seed, err := parseSignerKey(skey)
	if err != nil {
		return nil, "", err
	}
	if typ != TypeEd25519 {
		return nil, "", fmt.Errorf("%w: log key type 0x%02x, want 0x01 (Ed25519)", ErrUnsupportedKey, typ)
	}
	priv, err := ed25519Seed(name, hash, typ, seed)
	if err != nil {
		return nil, "", err
	}
	if !isValidName(origin) {
		return nil, "", fmt.Errorf("%w: %q is not a valid key name (empty, or contains spaces or '+')", ErrMalformedKey, origin)
	}
	pub := priv.Public().(ed25519.PublicKey)
	newKey := append([]byte{TypeEd25519}, seed...)
	s, err := note.NewSigner(fmt.Sprintf("PRIVATE+KEY+%s+%08x+%s", origin, KeyID(origin, TypeEd25519, pub), base64.StdEncoding.EncodeToString(newKey)))
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrMalformedKey, err)
	}
	vkey, err = note.NewEd25519VerifierKey(origin, pub)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrMalformedKey, err)
	}
	return s, vkey, nil
}

// NewSigner returns the signer for a signer key string: a log key (type 0x01,
// as made by GenerateLogKey or note.GenerateKey) or a witness cosigner key
// (type 0x04, as made by GenerateCosignerKey, returned as a *Cosigner).
// Unlike note.NewSigner, errors wrap ErrMalformedKey or ErrUnsupportedKey.
func NewSigner(skey string) (note.Signer, error) {
	_, _, typ, _, err := parseSignerKey(skey)
	if err != nil {
		return nil, err
	}
	switch typ {
	case TypeEd25519:
		s, err := note.NewSigner(skey)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformedKey, err)
		}
		return s, nil
	case TypeCosignatureV1:
		return NewCosigner(skey)
	}
	return nil, fmt.Errorf("%w: signer key type 0x%02x", ErrUnsupportedKey, typ)
}

// NewVerifier returns the verifier for a verifier key string (vkey): a log
// key (type 0x01, verified by x/mod/sumdb/note) or a witness key (type
// 0x04, returned as a *CosignatureVerifier). Errors wrap ErrMalformedKey or
// ErrUnsupportedKey.
func NewVerifier(vkey string) (note.Verifier, error) {
	_, _, typ, _, err := parseVerifierKey(vkey)
	if err != nil {
		return nil, err
	}
	switch typ {
	case TypeEd25519:
		v, err := note.NewVerifier(vkey)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformedKey, err)
		}
		return v, nil
	case TypeCosignatureV1:
		return NewCosignatureVerifier(vkey)
	}
	return nil, fmt.Errorf("%w: verifier key type 0x%02x", ErrUnsupportedKey, typ)
}

// LoadSigner reads a signer key string from the file at path (surrounding
// white space ignored) and returns NewSigner's result.
func LoadSigner(path string) (note.Signer, error) {
	b, err := readSmallFile(path)
	if err != nil {
		return nil, err
	}
	s, err := NewSigner(string(bytes.TrimSpace(b)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// LoadVerifiers reads verifier key strings from the file at path, one per
// line; blank lines and lines starting with '#' are ignored. Each key goes
// through NewVerifier. An error names the line.
func LoadVerifiers(path string) ([]note.Verifier, error) {
	b, err := readSmallFile(path)
	if err != nil {
		return nil, err
	}
	var vs []note.Verifier
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, maxKeyFileLen)
	for line := 1; sc.Scan(); line++ {
		t := strings.TrimSpace(sc.Text())
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		v, err := NewVerifier(t)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		vs = append(vs, v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return vs, nil
}

// readSmallFile reads a configuration file, refusing one too large to be a
// key or policy file rather than reading it whole.
func readSmallFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFileLen+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > maxKeyFileLen {
		return nil, fmt.Errorf("%s: longer than %d bytes", path, maxKeyFileLen)
	}
	return b, nil
}
