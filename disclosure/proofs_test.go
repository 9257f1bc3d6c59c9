package disclosure

import (
	"bytes"
	"crypto/sha256"
	"testing"

	formats "github.com/transparency-dev/formats/proof"

	"github.com/runseal/runseal/log"
)

func testProof() *TLogProof {
	return &TLogProof{
		Index: 5,
		Proof: []log.Hash{sha256.Sum256([]byte("a")), sha256.Sum256([]byte("b"))},
		Note:  []byte("example.com/log\n7\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n\n\u2014 example.com/log AAAAAA==\n"),
	}
}

// Our tlog-proofs read the same through transparency-dev/formats, both ways.
func TestTLogProofInterop(t *testing.T) {
	for _, p := range []*TLogProof{testProof(), {Extra: []byte("x"), Index: 0, Note: []byte("n\n")}} {
		b := p.Marshal()
		var fp formats.TLogProof
		if err := fp.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
		if fp.Index != p.Index || len(fp.Hashes) != len(p.Proof) || !bytes.Equal(fp.Checkpoint, p.Note) || !bytes.Equal(fp.ExtraData, p.Extra) {
			t.Fatalf("formats read %+v from %q", fp, b)
		}
		for i := range fp.Hashes {
			if fp.Hashes[i] != p.Proof[i] {
				t.Fatal("hash differs")
			}
		}
		if !bytes.Equal(fp.Marshal(), b) {
			t.Fatalf("formats writes %q, we write %q", fp.Marshal(), b)
		}
		q, err := ParseTLogProof(fp.Marshal())
		if err != nil || !bytes.Equal(q.Marshal(), b) {
			t.Fatalf("ParseTLogProof: %v", err)
		}
	}
}

func TestParseProofLinesRefuses(t *testing.T) {
	good := MarshalProofLines(testProof().Proof)
	if hs, err := ParseProofLines(good); err != nil || len(hs) != 2 {
		t.Fatal(err)
	}
	if hs, err := ParseProofLines(nil); err != nil || len(hs) != 0 {
		t.Fatal("empty proof")
	}
	for _, bad := range []string{string(good[:len(good)-1]), "\n", " " + string(good), string(good) + "\n",
		"47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFV=\n", "47DEQpj8HBSa-_TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n"} {
		if _, err := ParseProofLines([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func FuzzParseTLogProof(f *testing.F) {
	f.Add(testProof().Marshal())
	f.Add((&TLogProof{Extra: []byte{}, Index: 1 << 63, Note: []byte("x")}).Marshal())
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseTLogProof(b)
		if err != nil {
			return
		}
		if !bytes.Equal(p.Marshal(), b) {
			t.Fatalf("%q re-marshals as %q", b, p.Marshal())
		}
		if hs, err := ParseProofLines(MarshalProofLines(p.Proof)); err != nil || len(hs) != len(p.Proof) {
			t.Fatalf("proof lines do not round-trip: %v", err)
		}
	})
}
