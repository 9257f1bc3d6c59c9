package disclosure

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sqlite"
)

// keys is a log key and two witness keys with a 2-of-2 policy, made from a
// seed so that vectors are reproducible.
type keys struct {
	origin    string
	logSigner note.Signer
	logVKey   string
	logV      note.Verifier
	cosigners []*checkpoint.Cosigner
	witVKeys  []string
	policy    *checkpoint.Policy
	// the disclosure key, made from the same seed after the witnesses'
	discSigner note.Signer
	discVKey   string
	discV      note.Verifier
	// the private keys, published with the vectors so that another
	// implementation can re-sign them
	logSKey, discSKey string
	witSKeys          []string
	at                time.Time // cosignature time
}

func newKeys(t testing.TB, origin string, seed byte) *keys {
	t.Helper()
	rng := rand.NewChaCha8([32]byte{seed})
	sk, vk, err := checkpoint.GenerateLogKey(rng, origin)
	if err != nil {
		t.Fatal(err)
	}
	k := &keys{origin: origin, logVKey: vk, logSKey: sk, at: time.Unix(1767225600, 0)}
	if k.logSigner, err = checkpoint.NewSigner(sk); err != nil {
		t.Fatal(err)
	}
	if k.logV, err = checkpoint.NewVerifier(vk); err != nil {
		t.Fatal(err)
	}
	var vs []*checkpoint.CosignatureVerifier
	for i := range 2 {
		csk, cvk, err := checkpoint.GenerateCosignerKey(rng, fmt.Sprintf("witness%d.example", i+1))
		if err != nil {
			t.Fatal(err)
		}
		c, err := checkpoint.NewCosigner(csk)
		if err != nil {
			t.Fatal(err)
		}
		k.cosigners = append(k.cosigners, c)
		k.witVKeys = append(k.witVKeys, cvk)
		k.witSKeys = append(k.witSKeys, csk)
		vs = append(vs, c.Verifier())
	}
	if k.policy, err = checkpoint.NewThresholdPolicy(2, vs...); err != nil {
		t.Fatal(err)
	}
	dsk, _, err := checkpoint.GenerateLogKey(rng, origin+DisclosureKeySuffix)
	if err != nil {
		t.Fatal(err)
	}
	k.discSKey = dsk
	if k.discSigner, k.discVKey, err = checkpoint.SignerForOrigin(dsk, origin+DisclosureKeySuffix); err != nil {
		t.Fatal(err)
	}
	if k.discV, err = checkpoint.NewVerifier(k.discVKey); err != nil {
		t.Fatal(err)
	}
	return k
}

// testRecipient is the recipient every test package is signed for.
const testRecipient = "auditor@regulator.example"

// signing is the statement's recipient and the disclosure key.
func (k *keys) signing() Signing { return Signing{Recipient: testRecipient, Key: k.discSigner} }

// sign signs cp with the log key and both witnesses and returns it verified.
func (k *keys) sign(t testing.TB, cp store.Checkpoint) *checkpoint.Signed {
	t.Helper()
	signers := []note.Signer{k.logSigner}
	for _, c := range k.cosigners {
		signers = append(signers, c.At(k.at))
	}
	msg, err := checkpoint.Sign(checkpoint.Checkpoint{Origin: cp.Origin, Size: cp.Size, Root: cp.Root}, signers...)
	if err != nil {
		t.Fatal(err)
	}
	s, err := k.policy.Verify(msg, k.logV)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (k *keys) options() Options {
	return Options{Logs: []note.Verifier{k.logV}, Policy: k.policy, Disclosure: []note.Verifier{k.discV}}
}

const testOrigin = "example.com/runseal"

func openJournal(t testing.TB, origin string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "j.db"), sqlite.Options{Origin: origin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// fixedID makes a reproducible id with n in its low bytes.
func fixedID(n byte) [16]byte {
	var u [16]byte
	copy(u[:], []byte{0x01, 0x93, 0x00, 0x00, 0x00, 0x00})
	u[15] = n
	return u
}

func runID(n byte) store.RunID   { return store.RunID(fixedID(n)) }
func caseID(n byte) store.CaseID { u := fixedID(n); u[14] = 0xCA; return store.CaseID(u) }

func appendAll(t testing.TB, j store.Journal, epoch store.Epoch, batch ...store.Append) {
	t.Helper()
	if _, err := j.Append(context.Background(), epoch, batch); err != nil {
		t.Fatalf("append: %v", err)
	}
}

func noteRec(run store.RunID, c store.CaseID, text string) store.Append {
	return store.Append{Run: run, Case: c, Kind: "Note", Fields: []byte(fmt.Sprintf(`{"text":%q}`, text))}
}

func conclude(run store.RunID, outcome string) store.Append {
	return store.Append{Run: run, Kind: store.KindRunConcluded, Fields: []byte(fmt.Sprintf(`{"outcome":%q}`, outcome))}
}

func seal(t testing.TB, j store.Journal, run store.RunID, epoch store.Epoch, outcome string) {
	t.Helper()
	if _, err := j.Seal(context.Background(), run, epoch, outcome); err != nil {
		t.Fatalf("seal %s: %v", run, err)
	}
}

// world is a small journal for packages: four runs and two cases.
//
//	A: sealed "succeeded", epochs 1 then 2, one record stamped with case X
//	B: sealed "quarantined", stamped with case X
//	C: unsealed, last conclusion "failed" (stays open)
//	D: sealed "cancelled", stamped with case Y, not selected
//	E: unsealed, suspended, no conclusion
type world struct {
	j             *sqlite.Store
	k             *keys
	A, B, C, D, E store.RunID
	X, Y          store.CaseID
}

func newWorld(t testing.TB) *world {
	t.Helper()
	w := &world{j: openJournal(t, testOrigin), k: newKeys(t, testOrigin, 1),
		A: runID(0xA), B: runID(0xB), C: runID(0xC), D: runID(0xD), E: runID(0xE), X: caseID(1), Y: caseID(2)}
	var none store.CaseID
	admitted := func(run store.RunID, key string) store.Append {
		return store.Append{Run: run, Kind: store.KindRunAdmitted, Fields: []byte(fmt.Sprintf(`{"admission_key":%q,"source":"shop"}`, key))}
	}
	key := store.Sum([]byte("charge-1"))
	appendAll(t, w.j, 1, admitted(w.A, "order-A"), noteRec(w.A, none, "first \"quoted\" note"),
		store.Append{Run: w.A, Kind: store.KindEffectStarted, EffectKey: &key, Fields: []byte(`{"attempt":1}`)})
	appendAll(t, w.j, 2, noteRec(w.A, w.X, "café ☕ \u2028"), conclude(w.A, "succeeded"))
	appendAll(t, w.j, 1, admitted(w.B, "order-B"), noteRec(w.B, w.X, "b"), conclude(w.B, "quarantined"))
	appendAll(t, w.j, 3, admitted(w.C, "order-C"), noteRec(w.C, none, "c"), conclude(w.C, "failed"))
	appendAll(t, w.j, 1, admitted(w.D, "order-D"), noteRec(w.D, w.Y, "d"), conclude(w.D, "cancelled"))
	appendAll(t, w.j, 1, admitted(w.E, "order-E"),
		store.Append{Run: w.E, Kind: store.KindRunSuspended, Fields: []byte(`{"awaiting":"event","event":"approval"}`)})
	seal(t, w.j, w.B, 1, "quarantined")
	seal(t, w.j, w.D, 1, "cancelled")
	seal(t, w.j, w.A, 2, "succeeded")
	return w
}

func (w *world) signed(t testing.TB) *checkpoint.Signed {
	t.Helper()
	cp, err := w.j.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return w.k.sign(t, cp)
}

// pkg writes a package of sel against the journal's current checkpoint.
func (w *world) pkg(t testing.TB, sel Selection) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := WritePackage(context.Background(), w.j, &buf, sel, w.signed(t), w.k.signing()); err != nil {
		t.Fatalf("WritePackage: %v", err)
	}
	return buf.Bytes()
}

func verifyBytes(t testing.TB, b []byte, opts Options) *Report {
	t.Helper()
	rep, err := Verify(context.Background(), bytes.NewReader(b), opts)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	return rep
}

func mustSound(t testing.TB, rep *Report) {
	t.Helper()
	if rep.Verdict != Sound {
		t.Fatalf("verdict %s, findings %+v, unverifiable %q", rep.Verdict, rep.Findings, rep.Unverifiable)
	}
}

func lines(b []byte) [][]byte {
	ls := bytes.SplitAfter(b, []byte("\n"))
	if len(ls) > 0 && len(ls[len(ls)-1]) == 0 {
		ls = ls[:len(ls)-1]
	}
	return ls
}

func join(ls [][]byte) []byte { return bytes.Join(ls, nil) }

func summary(rep *Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:", rep.Verdict)
	for _, f := range rep.Findings {
		fmt.Fprintf(&b, " [%s line %d: %s]", f.Check, f.Line, f.Detail)
	}
	for _, u := range rep.Unverifiable {
		fmt.Fprintf(&b, " [unverifiable: %s]", u)
	}
	return b.String()
}
