package checkpoint

// This file regenerates spec/vectors/checkpoint.json:
//
//	go test ./checkpoint -run TestGenerateVectors -update-vectors
//
// The expected bytes are computed without this package's signing code, so
// the vectors check it rather than echo it: plain log signatures come from
// x/mod's note.Sign, cosignatures from crypto/ed25519 over a message built
// here by hand, key IDs from crypto/sha256. Expected errors (line, field) are
// written by hand below. Review the diff of the JSON before committing it.

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
)

var updateVectors = flag.Bool("update-vectors", false, "rewrite spec/vectors/checkpoint.json")

const vectorsPath = "../spec/vectors/checkpoint.json"

// Vector file schema, shared with vectors_test.go.
type vectorFile struct {
	Comment         []string         `json:"comment"`
	EmptyRoot       string           `json:"empty_root"`
	Keys            []vecKey         `json:"keys"`
	KeyStrings      []vecKeyString   `json:"key_strings"`
	Origins         []vecOrigin      `json:"origins"`
	Bodies          []vecBody        `json:"bodies"`
	Signed          []vecSigned      `json:"signed"`
	Cosignatures    []vecCosignature `json:"cosignatures"`
	CosignatureTime []vecCosigTime   `json:"cosignature_times"`
	Open            []vecOpen        `json:"open"`
	Policies        []vecPolicy      `json:"policies"`
	PolicyChecks    []vecPolicyCheck `json:"policy_checks"`
}

type vecKey struct {
	ID   string `json:"id"`
	Type int    `json:"type"`
	Seed string `json:"seed_hex"`
	SKey string `json:"skey"`
	VKey string `json:"vkey"`
}

type vecKeyString struct {
	Name      string `json:"name"`
	VKey      string `json:"vkey,omitempty"`
	SKey      string `json:"skey,omitempty"`
	Use       string `json:"use"` // "log", "witness" or "any"
	Error     string `json:"error,omitempty"`
	KeyID     string `json:"key_id,omitempty"`
	CosigKey  string `json:"cosignature_key_id,omitempty"` // key ID of the same public key as a 0x04 key
	CosigVKey string `json:"cosignature_vkey,omitempty"`
}

type vecOrigin struct {
	LogOrigin string `json:"log_origin"`
	Tenant    string `json:"tenant"`
	Origin    string `json:"origin"`
}

type vecBody struct {
	Name       string   `json:"name"`
	Text       string   `json:"text,omitempty"`
	TextB64    string   `json:"text_base64,omitempty"` // used when text is not valid UTF-8
	Valid      bool     `json:"valid"`
	Origin     string   `json:"origin,omitempty"`
	Size       string   `json:"size,omitempty"`
	Root       string   `json:"root,omitempty"`
	Extensions []string `json:"extensions,omitempty"`
	Coherent   bool     `json:"coherent,omitempty"`
	Line       int      `json:"line,omitempty"`
	Field      string   `json:"field,omitempty"`
	Reason     string   `json:"reason,omitempty"`
}

type vecSigned struct {
	Name    string   `json:"name"`
	Body    string   `json:"body"`
	Signers []string `json:"signers"`
	Note    string   `json:"note"`
}

type vecCosignature struct {
	Name          string `json:"name"`
	Body          string `json:"body"`
	Signer        string `json:"signer"`
	Time          uint64 `json:"time"`
	Message       string `json:"signed_message"`
	SignatureLine string `json:"signature_line"`
	Note          string `json:"note"` // signed by "log-acme" then Signer
}

type vecCosigTime struct {
	Name  string `json:"name"`
	Line  string `json:"signature_line"`
	Time  int64  `json:"time,omitempty"`
	Error string `json:"error,omitempty"`
}

type vecOpen struct {
	Name        string   `json:"name"`
	Note        string   `json:"note,omitempty"`
	NoteB64     string   `json:"note_base64,omitempty"`
	Keys        []string `json:"keys"`
	Result      string   `json:"result"`
	Line        int      `json:"line,omitempty"`
	Field       string   `json:"field,omitempty"`
	Verified    []string `json:"verified,omitempty"`     // "<name>+<key ID>", in order
	CosigTimes  []int64  `json:"cosign_times,omitempty"` // for verified cosignatures, in order
	Rebuilt     string   `json:"rebuilt,omitempty"`
	Explanation string   `json:"explanation"`
}

type vecPolicy struct {
	Name      string `json:"name"`
	Policy    string `json:"policy"`
	Valid     bool   `json:"valid"`
	Line      int    `json:"line,omitempty"`
	Canonical string `json:"canonical,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

type vecPolicyCheck struct {
	Name     string   `json:"name"`
	Policy   string   `json:"policy"`                   // name of a valid entry in policies
	Logs     []string `json:"extra_log_keys,omitempty"` // log keys passed to Verify besides the policy's
	Note     string   `json:"note"`
	Met      bool     `json:"met"`
	Cosigned []string `json:"cosigned"` // witness names in the policy, in policy order
	Invalid  []string `json:"invalid,omitempty"`
	Verify   string   `json:"verify"`
}

// genKey is a deterministic test key.
type genKey struct {
	vecKey
	name string
	priv ed25519.PrivateKey
	hash uint32
}

func genKeyID(name string, typ byte, pub []byte) uint32 {
	h := sha256.Sum256(append(append([]byte(name+"\n"), typ), pub...))
	return binary.BigEndian.Uint32(h[:4])
}

func makeGenKey(id, name string, typ byte) genKey {
	seed := sha256.Sum256([]byte("runseal test key " + id))
	priv := ed25519.NewKeyFromSeed(seed[:])
	pub := priv.Public().(ed25519.PublicKey)
	h := genKeyID(name, typ, pub)
	return genKey{
		vecKey: vecKey{
			ID:   id,
			Type: int(typ),
			Seed: fmt.Sprintf("%x", seed),
			SKey: fmt.Sprintf("PRIVATE+KEY+%s+%08x+%s", name, h, base64.StdEncoding.EncodeToString(append([]byte{typ}, seed[:]...))),
			VKey: fmt.Sprintf("%s+%08x+%s", name, h, base64.StdEncoding.EncodeToString(append([]byte{typ}, pub...))),
		},
		name: name, priv: priv, hash: h,
	}
}

// plainSign signs text with x/mod note and returns the signature lines.
func (k genKey) plainLines(t *testing.T, text string) string {
	s, err := note.NewSigner(k.SKey)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := note.Sign(&note.Note{Text: text}, s)
	if err != nil {
		t.Fatal(err)
	}
	return string(msg[len(text)+1:])
}

// cosigLine builds a cosignature/v1 line by hand.
func (k genKey) cosigLine(text string, ts uint64) string {
	msg := "cosignature/v1\ntime " + strconv.FormatUint(ts, 10) + "\n" + text
	blob := binary.BigEndian.AppendUint32(nil, k.hash)
	blob = binary.BigEndian.AppendUint64(blob, ts)
	blob = append(blob, ed25519.Sign(k.priv, []byte(msg))...)
	return "\u2014 " + k.name + " " + base64.StdEncoding.EncodeToString(blob) + "\n"
}

// retimedLine is a cosignature made at signedAt whose timestamp field says
// claimed instead.
func (k genKey) retimedLine(text string, signedAt, claimed uint64) string {
	msg := "cosignature/v1\ntime " + strconv.FormatUint(signedAt, 10) + "\n" + text
	blob := binary.BigEndian.AppendUint32(nil, k.hash)
	blob = binary.BigEndian.AppendUint64(blob, claimed)
	blob = append(blob, ed25519.Sign(k.priv, []byte(msg))...)
	return "\u2014 " + k.name + " " + base64.StdEncoding.EncodeToString(blob) + "\n"
}

// badLine is a well-formed line for k whose signature does not verify.
func (k genKey) badLine(n int) string {
	blob := binary.BigEndian.AppendUint32(nil, k.hash)
	for i := 0; i < n; i++ {
		blob = append(blob, byte(i*7+1))
	}
	return "\u2014 " + k.name + " " + base64.StdEncoding.EncodeToString(blob) + "\n"
}

func vid(k genKey) string { return fmt.Sprintf("%s+%08x", k.name, k.hash) }

func TestGenerateVectors(t *testing.T) {
	if !*updateVectors {
		t.Skip("run with -update-vectors to rewrite " + vectorsPath)
	}
	vf := buildVectors(t)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(vf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vectorsPath, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

const (
	rootA     = "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I="
	emptyB64  = "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
	zeroB64   = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
	acme      = "log.example/runseal/acme"
	logOrigin = "log.example/runseal"
)

func buildVectors(t *testing.T) *vectorFile {
	logKey := makeGenKey("log", logOrigin, 0x01)
	acmeKey := makeGenKey("log", acme, 0x01) // same key material, tenant name
	acmeKey.ID = "log-acme"
	w1 := makeGenKey("witness1", "witness.example/w1", 0x04)
	w2 := makeGenKey("witness2", "witness.example/w2", 0x04)
	w3 := makeGenKey("witness3", "witness.example/w3", 0x04)
	other := makeGenKey("other", "other.example/log", 0x01)
	keys := map[string]genKey{}
	for _, k := range []genKey{logKey, acmeKey, w1, w2, w3, other} {
		keys[k.ID] = k
	}

	vf := &vectorFile{
		Comment: []string{
			"Test vectors for spec/checkpoint.md. Generated by checkpoint/vectors_gen_test.go",
			"without the package's own signing code; checked by checkpoint/vectors_test.go.",
			"Keys are test keys: seed = SHA-256(\"runseal test key \" || id). Never use them for anything real.",
			"'line' is 1-based in the text checked ('text' for bodies, 'note' for notes, 'policy' for policies).",
			"Results: ok, malformed_checkpoint, malformed_note, unverified, invalid_signature, incoherent,",
			"policy_not_met, malformed_key, unsupported_key, malformed_policy.",
		},
		EmptyRoot: emptyB64,
	}
	for _, k := range []genKey{logKey, acmeKey, w1, w2, w3, other} {
		vf.Keys = append(vf.Keys, k.vecKey)
	}

	// Key strings. The C2SP signed-note example key and its 0x04 twin.
	c2spPub, _ := base64.StdEncoding.DecodeString("AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k")
	vf.KeyStrings = []vecKeyString{
		{Name: "c2sp signed-note example key", VKey: "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k", Use: "log",
			KeyID: "530d903a", CosigKey: fmt.Sprintf("%08x", genKeyID("example.com/foo", 0x04, c2spPub[1:])),
			CosigVKey: fmt.Sprintf("example.com/foo+%08x+%s", genKeyID("example.com/foo", 0x04, c2spPub[1:]), base64.StdEncoding.EncodeToString(append([]byte{4}, c2spPub[1:]...)))},
		{Name: "x/mod note doc example key", VKey: "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", SKey: "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz", Use: "log", KeyID: "c74f20a3"},
		{Name: "witness key used as witness", VKey: w1.VKey, SKey: w1.SKey, Use: "witness", KeyID: fmt.Sprintf("%08x", w1.hash)},
		{Name: "log key used as witness", VKey: logKey.VKey, Use: "witness", Error: "unsupported_key"},
		{Name: "witness key used as log", VKey: w1.VKey, Use: "log", Error: "unsupported_key"},
		{Name: "log signer key used as cosigner", SKey: logKey.SKey, Use: "witness", Error: "unsupported_key"},
		{Name: "wrong key ID", VKey: strings.Replace(w1.VKey, fmt.Sprintf("+%08x+", w1.hash), fmt.Sprintf("+%08x+", w1.hash^1), 1), Use: "any", Error: "malformed_key"},
		{Name: "wrong key ID in signer key", SKey: strings.Replace(w1.SKey, fmt.Sprintf("+%08x+", w1.hash), fmt.Sprintf("+%08x+", w1.hash^1), 1), Use: "any", Error: "malformed_key"},
		{Name: "key ID too short", VKey: "witness.example/w1+1234567+BA==", Use: "any", Error: "malformed_key"},
		{Name: "name with plus", VKey: "a+b+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k", Use: "any", Error: "malformed_key"},
		{Name: "short public key", VKey: fmt.Sprintf("w+%08x+%s", genKeyID("w", 4, []byte{1, 2, 3}), base64.StdEncoding.EncodeToString([]byte{4, 1, 2, 3})), Use: "witness", Error: "malformed_key"},
		{Name: "unknown type", VKey: fmt.Sprintf("w+%08x+%s", genKeyID("w", 9, c2spPub[1:]), base64.StdEncoding.EncodeToString(append([]byte{9}, c2spPub[1:]...))), Use: "any", Error: "unsupported_key"},
		{Name: "no name", VKey: "+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k", Use: "any", Error: "malformed_key"},
		{Name: "not base64", VKey: "example.com/foo+530d903a+!!!!", Use: "any", Error: "malformed_key"},
	}

	vf.Origins = []vecOrigin{
		{logOrigin, "default", logOrigin},
		{logOrigin, "acme", acme},
		{"example.com", "tenant-7", "example.com/tenant-7"},
	}

	long := strings.Repeat("o", 255)
	vf.Bodies = []vecBody{
		{Name: "runseal tenant checkpoint", Text: acme + "\n20852163\n" + rootA + "\n", Valid: true, Origin: acme, Size: "20852163", Root: rootA, Coherent: true},
		{Name: "c2sp tlog-checkpoint example", Text: "example.com/behind-the-sofa\n20852163\n" + rootA + "\n", Valid: true, Origin: "example.com/behind-the-sofa", Size: "20852163", Root: rootA, Coherent: true},
		{Name: "empty tree", Text: logOrigin + "\n0\n" + emptyB64 + "\n", Valid: true, Origin: logOrigin, Size: "0", Root: emptyB64, Coherent: true},
		{Name: "size 0 with another root parses but is incoherent", Text: logOrigin + "\n0\n" + zeroB64 + "\n", Valid: true, Origin: logOrigin, Size: "0", Root: zeroB64, Coherent: false},
		{Name: "size 1 with the empty root is coherent", Text: logOrigin + "\n1\n" + emptyB64 + "\n", Valid: true, Origin: logOrigin, Size: "1", Root: emptyB64, Coherent: true},
		{Name: "largest size", Text: logOrigin + "\n18446744073709551615\n" + rootA + "\n", Valid: true, Origin: logOrigin, Size: "18446744073709551615", Root: rootA, Coherent: true},
		{Name: "extension lines", Text: acme + "\n5\n" + rootA + "\nextension one\n\u2014 looks like a signature\n", Valid: true, Origin: acme, Size: "5", Root: rootA, Extensions: []string{"extension one", "\u2014 looks like a signature"}, Coherent: true},
		{Name: "origin with spaces (Go checksum database)", Text: "go.sum database tree\n42\n" + rootA + "\n", Valid: true, Origin: "go.sum database tree", Size: "42", Root: rootA, Coherent: true},
		{Name: "non-ASCII origin", Text: "l\u00f6g.example/\u00e4\n1\n" + rootA + "\n", Valid: true, Origin: "l\u00f6g.example/\u00e4", Size: "1", Root: rootA, Coherent: true},
		{Name: "origin of 255 bytes", Text: long + "\n1\n" + rootA + "\n", Valid: true, Origin: long, Size: "1", Root: rootA, Coherent: true},

		{Name: "empty text", Text: "", Line: 1, Field: "origin", Reason: "empty body"},
		{Name: "no final newline", Text: acme + "\n1\n" + rootA, Line: 3, Reason: "no final newline"},
		{Name: "empty origin", Text: "\n1\n" + rootA + "\n", Line: 1, Field: "origin", Reason: "empty"},
		{Name: "origin of 256 bytes", Text: long + "o\n1\n" + rootA + "\n", Line: 1, Field: "origin", Reason: "too long"},
		{Name: "tab in origin", Text: "log\texample\n1\n" + rootA + "\n", Line: 1, Field: "origin", Reason: "control character"},
		{Name: "DEL in origin", Text: "log\x7fexample\n1\n" + rootA + "\n", Line: 1, Field: "origin", Reason: "control character"},
		{Name: "CRLF line ends", Text: acme + "\r\n1\r\n" + rootA + "\r\n", Line: 1, Field: "origin", Reason: "control character"},
		{Name: "invalid UTF-8 in origin", TextB64: base64.StdEncoding.EncodeToString([]byte("log\xffexample\n1\n" + rootA + "\n")), Line: 1, Field: "origin", Reason: "invalid UTF-8"},
		{Name: "origin only", Text: acme + "\n", Line: 2, Field: "size", Reason: "missing"},
		{Name: "no root line", Text: acme + "\n1\n", Line: 3, Field: "root", Reason: "missing"},
		{Name: "empty size", Text: acme + "\n\n" + rootA + "\n", Line: 2, Field: "size", Reason: "empty"},
		{Name: "size with leading zero", Text: acme + "\n01\n" + rootA + "\n", Line: 2, Field: "size", Reason: "leading zero"},
		{Name: "size 00", Text: acme + "\n00\n" + emptyB64 + "\n", Line: 2, Field: "size", Reason: "leading zero"},
		{Name: "size with plus sign", Text: acme + "\n+1\n" + rootA + "\n", Line: 2, Field: "size", Reason: "sign"},
		{Name: "negative size", Text: acme + "\n-1\n" + rootA + "\n", Line: 2, Field: "size", Reason: "sign"},
		{Name: "size 2^64", Text: acme + "\n18446744073709551616\n" + rootA + "\n", Line: 2, Field: "size", Reason: "overflow"},
		{Name: "size with space", Text: acme + "\n 1\n" + rootA + "\n", Line: 2, Field: "size", Reason: "not decimal"},
		{Name: "size in hex", Text: acme + "\n0x10\n" + rootA + "\n", Line: 2, Field: "size", Reason: "not decimal"},
		{Name: "size with underscore", Text: acme + "\n1_000\n" + rootA + "\n", Line: 2, Field: "size", Reason: "not decimal"},
		{Name: "unpadded root", Text: acme + "\n1\n" + strings.TrimSuffix(rootA, "=") + "\n", Line: 3, Field: "root", Reason: "not padded base64"},
		{Name: "URL-safe root", Text: acme + "\n1\n" + "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU=" + "\n", Line: 3, Field: "root", Reason: "not standard base64"},
		{Name: "root with non-zero padding bits", Text: acme + "\n1\n" + "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFV=" + "\n", Line: 3, Field: "root", Reason: "not canonical"},
		{Name: "root of 31 bytes", Text: acme + "\n1\n" + base64.StdEncoding.EncodeToString(make([]byte, 31)) + "\n", Line: 3, Field: "root", Reason: "31 bytes"},
		{Name: "root of 33 bytes", Text: acme + "\n1\n" + base64.StdEncoding.EncodeToString(make([]byte, 33)) + "\n", Line: 3, Field: "root", Reason: "33 bytes"},
		{Name: "root in hex", Text: acme + "\n1\n" + strings.Repeat("ab", 32) + "\n", Line: 3, Field: "root", Reason: "not base64 of 32 bytes"},
		{Name: "root with trailing space", Text: acme + "\n1\n" + rootA + " \n", Line: 3, Field: "root", Reason: "not canonical"},
		{Name: "blank line after root", Text: acme + "\n1\n" + rootA + "\n\n", Line: 4, Field: "extension", Reason: "empty line"},
		{Name: "blank line between extensions", Text: acme + "\n1\n" + rootA + "\next\n\nmore\n", Line: 5, Field: "extension", Reason: "empty line"},
		{Name: "control character in extension", Text: acme + "\n1\n" + rootA + "\nbad\x00ext\n", Line: 4, Field: "extension", Reason: "control character"},
	}
	for i := range vf.Bodies {
		vf.Bodies[i].Valid = vf.Bodies[i].Origin != ""
	}

	// Signed notes, by x/mod note.
	body1 := acme + "\n20852163\n" + rootA + "\n"
	bodyExt := acme + "\n5\n" + rootA + "\nextension one\n"
	bodyEmpty := acme + "\n0\n" + emptyB64 + "\n"
	bodyIncoherent := acme + "\n0\n" + zeroB64 + "\n"
	signedNote := func(body string, ks ...genKey) string {
		s := body + "\n"
		for _, k := range ks {
			s += k.plainLines(t, body)
		}
		return s
	}
	vf.Signed = []vecSigned{
		{Name: "tenant checkpoint signed by the tenant log key", Body: body1, Signers: []string{"log-acme"}, Note: signedNote(body1, acmeKey)},
		{Name: "empty tree", Body: bodyEmpty, Signers: []string{"log-acme"}, Note: signedNote(bodyEmpty, acmeKey)},
		{Name: "with an extension line", Body: bodyExt, Signers: []string{"log-acme"}, Note: signedNote(bodyExt, acmeKey)},
		{Name: "two log keys", Body: body1, Signers: []string{"log-acme", "other"}, Note: signedNote(body1, acmeKey, other)},
	}

	const t1, t2, t3 = 1700000000, 1700000060, 1700000120
	msg1 := "cosignature/v1\ntime " + strconv.Itoa(t1) + "\n" + body1
	vf.Cosignatures = []vecCosignature{
		{Name: "witness 1 cosigns the tenant checkpoint", Body: body1, Signer: "witness1", Time: t1, Message: msg1, SignatureLine: w1.cosigLine(body1, t1),
			Note: body1 + "\n" + acmeKey.plainLines(t, body1) + w1.cosigLine(body1, t1)},
		{Name: "extension lines are covered", Body: bodyExt, Signer: "witness2", Time: t2, Message: "cosignature/v1\ntime " + strconv.Itoa(t2) + "\n" + bodyExt, SignatureLine: w2.cosigLine(bodyExt, t2),
			Note: bodyExt + "\n" + acmeKey.plainLines(t, bodyExt) + w2.cosigLine(bodyExt, t2)},
		{Name: "time 0", Body: bodyEmpty, Signer: "witness3", Time: 0, Message: "cosignature/v1\ntime 0\n" + bodyEmpty, SignatureLine: w3.cosigLine(bodyEmpty, 0),
			Note: bodyEmpty + "\n" + acmeKey.plainLines(t, bodyEmpty) + w3.cosigLine(bodyEmpty, 0)},
	}

	vf.CosignatureTime = []vecCosigTime{
		{Name: "c2sp tlog-cosignature example", Line: "\u2014 witness.example.com/w1 jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlrDJsX3b2oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA==", Time: 1679315147},
		{Name: "vector cosignature", Line: strings.TrimSuffix(w1.cosigLine(body1, t1), "\n"), Time: t1},
		{Name: "timestamp 2^63 refused", Line: strings.TrimSuffix(w1.cosigLine(body1, 1<<63), "\n"), Error: "malformed_note"},
		{Name: "plain Ed25519 signature is not a cosignature", Line: strings.TrimSuffix(acmeKey.plainLines(t, body1), "\n"), Error: "malformed_note"},
	}

	logLine := acmeKey.plainLines(t, body1)
	w1Line := w1.cosigLine(body1, t1)
	w2Line := w2.cosigLine(body1, t2)
	w3Line := w3.cosigLine(body1, t3)
	forged := "\u2014 witness.example/evil " + base64.StdEncoding.EncodeToString(append([]byte{1, 2, 3, 4}, make([]byte, 72)...)) + "\n"
	base := body1 + "\n" + logLine
	bodyLines := strings.Count(body1, "\n") // first signature is on line bodyLines+2
	sigLine1 := bodyLines + 2
	many := body1 + "\n" + logLine
	for i := 0; i < 100; i++ {
		many += "\u2014 spam.example/" + strconv.Itoa(i) + " AAAAAAA=\n"
	}
	vf.Open = []vecOpen{
		{Name: "log signature", Note: base, Keys: []string{"log-acme"}, Result: "ok", Verified: []string{vid(acmeKey)}, Rebuilt: base,
			Explanation: "one signature from a known key"},
		{Name: "log and two witnesses", Note: base + w1Line + w2Line, Keys: []string{"log-acme", "witness1", "witness2"}, Result: "ok",
			Verified: []string{vid(acmeKey), vid(w1), vid(w2)}, CosigTimes: []int64{t1, t2}, Rebuilt: base + w1Line + w2Line,
			Explanation: "cosignatures verify and carry their times"},
		{Name: "witness keys unknown", Note: base + w1Line + w2Line, Keys: []string{"log-acme"}, Result: "ok",
			Verified: []string{vid(acmeKey)}, Rebuilt: base,
			Explanation: "signatures from unknown keys are ignored and not re-emitted"},
		{Name: "forged line from unknown key", Note: base + forged, Keys: []string{"log-acme", "witness1"}, Result: "ok",
			Verified: []string{vid(acmeKey)}, Rebuilt: base,
			Explanation: "the forged line is dropped from the rebuilt note"},
		{Name: "only witness keys known", Note: base + w1Line, Keys: []string{"witness1"}, Result: "ok",
			Verified: []string{vid(w1)}, CosigTimes: []int64{t1}, Rebuilt: body1 + "\n" + w1Line,
			Explanation: "Open does not know which key is the log's; Policy.Verify does"},
		{Name: "no known key", Note: base + w1Line, Keys: []string{"other"}, Result: "unverified",
			Explanation: "no signature from a known key"},
		{Name: "no keys at all", Note: base, Keys: []string{}, Result: "unverified", Explanation: "no signature from a known key"},
		{Name: "invalid witness signature", Note: base + w1.badLine(72), Keys: []string{"log-acme", "witness1"}, Result: "invalid_signature",
			Explanation: "a known key's signature that fails rejects the note"},
		{Name: "invalid witness signature, witness unknown", Note: base + w1.badLine(72), Keys: []string{"log-acme"}, Result: "ok",
			Verified: []string{vid(acmeKey)}, Rebuilt: base, Explanation: "an unknown key's line is not checked"},
		{Name: "log signature by another key with the same name", Note: body1 + "\n" + strings.Replace(other.plainLines(t, body1), other.name, acme, 1), Keys: []string{"log-acme"}, Result: "unverified",
			Explanation: "name matches but key ID does not: unknown key, ignored"},
		{Name: "exact repeat of the log line", Note: base + logLine, Keys: []string{"log-acme"}, Result: "ok",
			Verified: []string{vid(acmeKey)}, Rebuilt: base, Explanation: "repeats collapse"},
		{Name: "second, different line for the log key", Note: base + acmeKey.badLine(64), Keys: []string{"log-acme"}, Result: "invalid_signature",
			Explanation: "every line from a known key is verified, not only the first (x/mod note.Open skips it)"},
		{Name: "witness cosigns twice", Note: base + w1Line + w1.cosigLine(body1, t3), Keys: []string{"log-acme", "witness1"}, Result: "ok",
			Verified: []string{vid(acmeKey), vid(w1)}, CosigTimes: []int64{t1}, Rebuilt: base + w1Line,
			Explanation: "both verify; the witness is kept once, first line wins"},
		{Name: "cosignature timestamp 2^63", Note: base + w1.cosigLine(body1, 1<<63), Keys: []string{"log-acme", "witness1"}, Result: "invalid_signature",
			Explanation: "timestamps above 2^63-1 are refused even with a valid Ed25519 signature"},
		{Name: "cosignature over another time", Note: base + w1.retimedLine(body1, t1, t1+1), Keys: []string{"log-acme", "witness1"}, Result: "invalid_signature",
			Explanation: "the timestamp is signed"},
		{Name: "size 0 with the empty root", Note: bodyEmpty + "\n" + acmeKey.plainLines(t, bodyEmpty), Keys: []string{"log-acme"}, Result: "ok",
			Verified: []string{vid(acmeKey)}, Rebuilt: bodyEmpty + "\n" + acmeKey.plainLines(t, bodyEmpty), Explanation: "coherent empty tree"},
		{Name: "size 0 with another root", Note: bodyIncoherent + "\n" + acmeKey.plainLines(t, bodyIncoherent), Keys: []string{"log-acme"}, Result: "incoherent",
			Explanation: "signed, well-formed, impossible"},
		{Name: "size 0 with another root, unsigned", Note: bodyIncoherent + "\n" + acmeKey.plainLines(t, bodyIncoherent), Keys: []string{"witness1"}, Result: "unverified",
			Explanation: "coherence is checked only after a signature verified"},
		{Name: "body with a leading zero, signed", Note: acme + "\n01\n" + rootA + "\n\n" + acmeKey.plainLines(t, acme+"\n01\n"+rootA+"\n"), Keys: []string{"log-acme"}, Result: "malformed_checkpoint", Line: 2, Field: "size",
			Explanation: "x/mod note.Open accepts it; the body is parsed strictly"},
		{Name: "hyphen instead of em dash", Note: body1 + "\n" + "-" + strings.TrimPrefix(logLine, "\u2014"), Keys: []string{"log-acme"}, Result: "malformed_note", Line: sigLine1, Field: "signature",
			Explanation: "signature lines start with U+2014"},
		{Name: "en dash instead of em dash", Note: body1 + "\n" + "\u2013" + strings.TrimPrefix(logLine, "\u2014"), Keys: []string{"log-acme"}, Result: "malformed_note", Line: sigLine1, Field: "signature",
			Explanation: "signature lines start with U+2014"},
		{Name: "no space after the dash", Note: body1 + "\n" + "\u2014" + strings.TrimPrefix(logLine, "\u2014 "), Keys: []string{"log-acme"}, Result: "malformed_note", Line: sigLine1, Field: "signature",
			Explanation: "em dash then one space"},
		{Name: "malformed line after a good one", Note: base + "\u2014 witness.example/w1 !!!\n", Keys: []string{"log-acme"}, Result: "malformed_note", Line: sigLine1 + 1, Field: "signature",
			Explanation: "any malformed line rejects the note, known key or not"},
		{Name: "signature too short", Note: base + "\u2014 witness.example/w1 AAAAAA==\n", Keys: []string{"log-acme"}, Result: "malformed_note", Line: sigLine1 + 1, Field: "signature",
			Explanation: "a signature is a key ID and at least one byte"},
		{Name: "unpadded signature base64", Note: base + strings.TrimRight(w1Line, "=\n") + "\n", Keys: []string{"log-acme"}, Result: "malformed_note", Line: sigLine1 + 1, Field: "signature",
			Explanation: "padded standard base64"},
		{Name: "key name with plus", Note: base + "\u2014 a+b " + strings.SplitN(w1Line, " ", 3)[2], Keys: []string{"log-acme"}, Result: "malformed_note", Line: sigLine1 + 1, Field: "signature",
			Explanation: "key names contain no '+'"},
		{Name: "no blank line", Note: body1 + logLine, Keys: []string{"log-acme"}, Result: "malformed_note",
			Explanation: "text and signatures are separated by a blank line"},
		{Name: "no signatures", Note: body1 + "\n", Keys: []string{"log-acme"}, Result: "malformed_note",
			Explanation: "at least one signature line"},
		{Name: "no final newline", Note: strings.TrimSuffix(base, "\n"), Keys: []string{"log-acme"}, Result: "malformed_note", Line: sigLine1, Field: "signature",
			Explanation: "every line ends in a newline"},
		{Name: "blank line in the body", Note: acme + "\n1\n\n" + rootA + "\n\n" + logLine, Keys: []string{"log-acme"}, Result: "malformed_checkpoint", Line: 3, Field: "root",
			Explanation: "the last blank line splits; the text before it must be a checkpoint"},
		{Name: "trailing blank line", Note: base + "\n", Keys: []string{"log-acme"}, Result: "malformed_note",
			Explanation: "nothing after the last blank line"},
		{Name: "carriage return", Note: strings.ReplaceAll(base, "\n", "\r\n"), Keys: []string{"log-acme"}, Result: "malformed_note", Line: 1,
			Explanation: "no control characters but newline"},
		{Name: "invalid UTF-8", NoteB64: base64.StdEncoding.EncodeToString([]byte(base + "\u2014 x \xff\n")), Keys: []string{"log-acme"}, Result: "malformed_note", Line: sigLine1 + 1,
			Explanation: "notes are UTF-8"},
		{Name: "101 signature lines", Note: many, Keys: []string{"log-acme"}, Result: "malformed_note", Line: sigLine1 + 100, Field: "signature",
			Explanation: "at most 100 signatures"},
		{Name: "witness 3 and extension lines", Note: bodyExt + "\n" + acmeKey.plainLines(t, bodyExt) + w3.cosigLine(bodyExt, t3), Keys: []string{"log-acme", "witness3"}, Result: "ok",
			Verified: []string{vid(acmeKey), vid(w3)}, CosigTimes: []int64{t3}, Rebuilt: bodyExt + "\n" + acmeKey.plainLines(t, bodyExt) + w3.cosigLine(bodyExt, t3),
			Explanation: "extension lines are signed and kept"},
	}

	policyMain := "# runseal test policy\n" +
		"log " + acmeKey.VKey + " https://log.example/runseal/acme\n" +
		"\n" +
		"witness w1 " + w1.VKey + " https://witness.example/w1\n" +
		"\twitness   w2\t" + w2.VKey + "   \n" +
		"witness w3 " + w3.VKey + "\n" +
		"group two-of-three 2 w1 w2 w3\n" +
		"quorum two-of-three\n"
	policyNested := "witness w1 " + w1.VKey + "\n" +
		"witness w2 " + w2.VKey + "\n" +
		"witness w3 " + w3.VKey + "\n" +
		"group a any w1 w2\n" +
		"group b all w3\n" +
		"group both all a b\n" +
		"quorum both\n"
	policyNone := "log " + acmeKey.VKey + "\nquorum none\n"
	policySingle := "witness w1 " + w1.VKey + "\nquorum w1\n"
	mw := func(ks ...genKey) string {
		s := ""
		for i, k := range ks {
			s += fmt.Sprintf("witness w%d %s\n", i+1, k.VKey)
		}
		return s
	}
	vf.Policies = []vecPolicy{
		{Name: "main", Policy: policyMain, Valid: true, Canonical: "log " + acmeKey.VKey + " https://log.example/runseal/acme\n" +
			"witness w1 " + w1.VKey + " https://witness.example/w1\n" + "witness w2 " + w2.VKey + "\n" + "witness w3 " + w3.VKey + "\n" +
			"group two-of-three 2 w1 w2 w3\nquorum two-of-three\n"},
		{Name: "nested", Policy: policyNested, Valid: true, Canonical: mw(w1, w2, w3) + "group a 1 w1 w2\ngroup b 1 w3\ngroup both 2 a b\nquorum both\n"},
		{Name: "none", Policy: policyNone, Valid: true, Canonical: policyNone},
		{Name: "single", Policy: policySingle, Valid: true, Canonical: policySingle},
		{Name: "no final newline", Policy: strings.TrimSuffix(policySingle, "\n"), Valid: true, Canonical: policySingle},
		{Name: "no quorum", Policy: mw(w1), Reason: "exactly one quorum line"},
		{Name: "two quorum lines", Policy: mw(w1) + "quorum w1\nquorum w1\n", Line: 3, Reason: "exactly one quorum line"},
		{Name: "unknown keyword", Policy: mw(w1) + "quorom w1\n", Line: 2, Reason: "unknown keyword"},
		{Name: "quorum before definition", Policy: "quorum w1\n" + mw(w1), Line: 1, Reason: "names are defined before use"},
		{Name: "undefined member", Policy: mw(w1) + "group g any w1 w9\nquorum g\n", Line: 2, Reason: "names are defined before use"},
		{Name: "member twice", Policy: mw(w1, w2) + "group g 2 w1 w1\nquorum g\n", Line: 3, Reason: "a member at most once per group"},
		{Name: "k above n", Policy: mw(w1, w2) + "group g 3 w1 w2\nquorum g\n", Line: 3, Reason: "1 <= k <= n"},
		{Name: "k zero", Policy: mw(w1, w2) + "group g 0 w1 w2\nquorum g\n", Line: 3, Reason: "1 <= k <= n"},
		{Name: "k with leading zero", Policy: mw(w1, w2) + "group g 01 w1 w2\nquorum g\n", Line: 3, Reason: "decimal"},
		{Name: "empty group", Policy: "group g any\nquorum none\n", Line: 1, Reason: "at least one member"},
		{Name: "name defined twice", Policy: mw(w1) + "witness w1 " + w2.VKey + "\nquorum w1\n", Line: 2, Reason: "one namespace"},
		{Name: "group named like a witness", Policy: mw(w1) + "group w1 any w1\nquorum w1\n", Line: 2, Reason: "one namespace"},
		{Name: "witness named none", Policy: "witness none " + w1.VKey + "\nquorum none\n", Line: 1, Reason: "none is reserved"},
		{Name: "none as a member", Policy: mw(w1) + "group g any w1 none\nquorum g\n", Line: 2, Reason: "none is reserved"},
		{Name: "duplicate witness key", Policy: mw(w1) + "witness again " + w1.VKey + "\nquorum w1\n", Line: 2, Reason: "duplicate keys"},
		{Name: "witness key renamed", Policy: mw(w1) + "witness again " + strings.Replace(w1.VKey, "witness.example/w1+"+fmt.Sprintf("%08x", w1.hash), fmt.Sprintf("witness.example/renamed+%08x", genKeyID("witness.example/renamed", 4, w1.priv.Public().(ed25519.PublicKey))), 1) + "\nquorum w1\n", Line: 2, Reason: "duplicate keys: same public key under another name"},
		{Name: "log key reused as witness key", Policy: "log " + acmeKey.VKey + "\nwitness w1 " + fmt.Sprintf("%s+%08x+%s", acme, genKeyID(acme, 4, acmeKey.priv.Public().(ed25519.PublicKey)), base64.StdEncoding.EncodeToString(append([]byte{4}, acmeKey.priv.Public().(ed25519.PublicKey)...))) + "\nquorum w1\n", Line: 2, Reason: "a log cannot witness itself (runseal rule)"},
		{Name: "duplicate log", Policy: "log " + acmeKey.VKey + "\nlog " + acmeKey.VKey + "\nquorum none\n", Line: 2, Reason: "duplicate keys"},
		{Name: "witness with a log key", Policy: "witness w1 " + acmeKey.VKey + "\nquorum w1\n", Line: 1, Reason: "witness keys are type 0x04"},
		{Name: "log with a witness key", Policy: "log " + w1.VKey + "\nquorum none\n", Line: 1, Reason: "log keys are type 0x01"},
		{Name: "witness without key", Policy: "witness w1\nquorum none\n", Line: 1, Reason: "syntax"},
		{Name: "extra field", Policy: "witness w1 " + w1.VKey + " https://w1 extra\nquorum none\n", Line: 1, Reason: "syntax"},
		{Name: "control character", Policy: "witness w1 " + w1.VKey + "\r\nquorum w1\n", Line: 1, Reason: "only tab and newline"},
	}
	for i := range vf.Policies {
		p := &vf.Policies[i]
		if !p.Valid && p.Line == 0 && p.Name != "no quorum" {
			t.Fatalf("policy vector %q needs a line", p.Name)
		}
	}

	vf.PolicyChecks = []vecPolicyCheck{
		{Name: "one of three", Policy: "main", Note: base + w1Line, Met: false, Cosigned: []string{"w1"}, Verify: "policy_not_met"},
		{Name: "two of three", Policy: "main", Note: base + w1Line + w3Line, Met: true, Cosigned: []string{"w1", "w3"}, Verify: "ok"},
		{Name: "three of three", Policy: "main", Note: base + w3Line + w2Line + w1Line, Met: true, Cosigned: []string{"w1", "w2", "w3"}, Verify: "ok"},
		{Name: "one witness twice", Policy: "main", Note: base + w1Line + w1.cosigLine(body1, t3), Met: false, Cosigned: []string{"w1"}, Verify: "policy_not_met"},
		{Name: "invalid cosignature does not count", Policy: "main", Note: base + w1Line + w2.badLine(72), Met: false, Cosigned: []string{"w1"}, Invalid: []string{"w2"}, Verify: "invalid_signature"},
		{Name: "quorum met beside an invalid line", Policy: "main", Note: base + w1Line + w2Line + w3.badLine(72), Met: true, Cosigned: []string{"w1", "w2"}, Invalid: []string{"w3"}, Verify: "invalid_signature"},
		{Name: "witnesses without the log", Policy: "main", Note: body1 + "\n" + w1Line + w2Line, Met: true, Cosigned: []string{"w1", "w2"}, Verify: "unverified"},
		{Name: "forged witness name", Policy: "main", Note: base + w1Line + forged, Met: false, Cosigned: []string{"w1"}, Verify: "policy_not_met"},
		{Name: "nested: a and b", Logs: []string{"log-acme"}, Policy: "nested", Note: base + w2Line + w3Line, Met: true, Cosigned: []string{"w2", "w3"}, Verify: "ok"},
		{Name: "nested: a only", Logs: []string{"log-acme"}, Policy: "nested", Note: base + w1Line + w2Line, Met: false, Cosigned: []string{"w1", "w2"}, Verify: "policy_not_met"},
		{Name: "quorum none", Policy: "none", Note: base, Met: true, Verify: "ok"},
		{Name: "single witness", Logs: []string{"log-acme"}, Policy: "single", Note: base + w1Line, Met: true, Cosigned: []string{"w1"}, Verify: "ok"},
	}
	return vf
}
