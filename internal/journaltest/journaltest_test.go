package journaltest

import (
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/runseal/runseal/checkpoint"
)

// A log's note opens with its verifier and carries the tree's root; the
// consistency proofs check with tlog; a fork has another root.
func TestLog_NotesAndProofsCheck(t *testing.T) {
	l := NewLog(t, "example.com/log")
	for _, c := range []struct{ old, size uint64 }{{1, 5}, {3, 8}, {8, 8}, {4, 13}} {
		l.Tree.Grow(int(c.size - min(c.size, l.Tree.Size())))
		s, err := checkpoint.Open(l.Note(t, c.size, nil), note.VerifierList(l.Verifier))
		if err != nil {
			t.Fatal(err)
		}
		if cp := s.Checkpoint(); cp.Origin != l.Origin || cp.Size != c.size || cp.Root != l.Tree.Root(c.size) {
			t.Fatalf("note at %d: %+v", c.size, cp)
		}
		var proof tlog.TreeProof
		for _, h := range l.Tree.Proof(c.old, c.size) {
			proof = append(proof, h)
		}
		if err := tlog.CheckTree(proof, int64(c.size), l.Tree.Root(c.size), int64(c.old), l.Tree.Root(c.old)); err != nil {
			t.Fatalf("proof %d to %d: %v", c.old, c.size, err)
		}
	}
	f := l.Tree.Fork("other")
	f.Grow(1)
	if f.Size() != l.Tree.Size()+1 || f.Root(f.Size()) == l.Tree.Root(l.Tree.Size()) || f.Root(l.Tree.Size()) != l.Tree.Root(l.Tree.Size()) {
		t.Fatal("a fork does not share the trunk's prefix and grow its own leaves")
	}
}

// Policy's quorum is every witness given: a note cosigned by all of them
// meets it, one lacking any cosignature does not.
func TestPolicy_QuorumIsEveryWitness(t *testing.T) {
	l := NewLog(t, "example.com/log")
	l.Tree.Grow(3)
	text := l.Note(t, 3, nil)
	s, err := checkpoint.Open(text, note.VerifierList(l.Verifier))
	if err != nil {
		t.Fatal(err)
	}
	a, b := NewWitness(t, "a"), NewWitness(t, "b")
	b.URL = "https://b.example/"
	for _, tc := range []struct {
		name      string
		ws        []*Witness
		cosigners []*Witness
		ok        bool
	}{
		{"no witness", nil, nil, true},
		{"one, cosigned", []*Witness{a}, []*Witness{a}, true},
		{"one, not cosigned", []*Witness{a}, nil, false},
		{"two, both cosigned", []*Witness{a, b}, []*Witness{a, b}, true},
		{"two, one cosigned", []*Witness{a, b}, []*Witness{b}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Policy(t, l, tc.ws...)
			if got := p.Witnesses(); len(got) != len(tc.ws) {
				t.Fatalf("%d witnesses in the policy", len(got))
			}
			for i, w := range p.Witnesses() {
				if w.Name != tc.ws[i].Name || w.URL != tc.ws[i].URL {
					t.Fatalf("witness %d: %s at %q", i, w.Name, w.URL)
				}
			}
			msg := s.Note()
			for _, w := range tc.cosigners {
				sig, err := note.Sign(&note.Note{Text: string(s.Text())}, w.Cosigner)
				if err != nil {
					t.Fatal(err)
				}
				msg = append(msg, sig[len(s.Text())+1:]...)
			}
			_, err := p.Verify(msg)
			if (err == nil) != tc.ok {
				t.Fatalf("Verify = %v, want ok %v", err, tc.ok)
			}
		})
	}
}
