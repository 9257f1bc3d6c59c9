package disclosure

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/store"
)

// Issue 11 item 2: a run carried only because of a case is dropped with
// its records, and the case block's and the trailer's counts are fixed.
// The file is consistent; the signed statement is what refuses it.
func TestVerify_CaseRunDroppedCountsFixed(t *testing.T) {
	w := newWorld(t)
	pkg := w.pkg(t, Selection{Runs: []store.RunID{w.C, w.A}, Cases: []store.CaseID{w.X}})
	mustSound(t, verifyBytes(t, pkg, w.k.options()))
	var drop change
	for _, c := range vectorChanges(t, w, pkg) {
		if c.Name == "a run carried for a case dropped, counts fixed" {
			drop = c
		}
	}
	if !bytes.Contains(lines(pkg)[7], []byte(w.B.String())) {
		t.Fatal("line 8 is not run B's block")
	}
	rep := verifyBytes(t, drop.apply(t, pkg), w.k.options())
	if rep.Verdict != NotSound || len(rep.Findings) != 2 || rep.Findings[0].Check != CheckStatement {
		// counts and blocks digest both differ from what was signed
		t.Fatalf("want not_sound by the statement only: %s", summary(rep))
	}
	// The same file re-signed by someone without the journal's disclosure
	// key is not sound either: unverifiable, a key the auditor was not given.
	forged := drop.apply(t, pkg)
	other := newKeys(t, testOrigin, 7)
	ls := lines(forged)
	tr, err := parseTrailer(bytes.TrimSuffix(ls[len(ls)-1], []byte("\n")), KindPackageEnd)
	if err != nil {
		t.Fatal(err)
	}
	st, err := ParseStatement([]byte(tr.Statement[:bytes.Index([]byte(tr.Statement), []byte("\n\n"))+1]))
	if err != nil {
		t.Fatal(err)
	}
	st.Runs, st.Sealed, st.Records = 2, 1, 8
	st.Blocks = recomputeBlocks(t, forged)
	signed, err := SignStatement(st, other.discSigner)
	if err != nil {
		t.Fatal(err)
	}
	tr.Statement = string(signed)
	ls[len(ls)-1] = appendTrailer(nil, KindPackageEnd, tr)
	rep = verifyBytes(t, join(ls), w.k.options())
	if rep.Verdict != Unverifiable || len(rep.Findings) != 0 {
		t.Fatalf("a statement re-signed by another key: %s", summary(rep))
	}
}

// recomputeBlocks is the blocks digest of a package as read.
func recomputeBlocks(t *testing.T, pkg []byte) store.Digest {
	t.Helper()
	d := newBlockDigest()
	ls := lines(pkg)
	for i := 1; i < len(ls)-1; i++ {
		l := ls[i]
		if isRunBlock(bytes.TrimSuffix(l, []byte("\n")), KindPackageRun) {
			var blk runBlock
			if err := parseRunBlock(bytes.TrimSuffix(l, []byte("\n")), KindPackageRun, true, &blk); err != nil {
				t.Fatal(err)
			}
			d.line(l, true)
			prev := store.ZeroDigest
			for j := range int(blk.Records) {
				_, raw, err := parseRecordLine(bytes.TrimSuffix(ls[i+1+j], []byte("\n")))
				if err != nil {
					t.Fatal(err)
				}
				prev = store.ChainHash(prev, raw)
			}
			d.head(prev)
			i += int(blk.Records)
			continue
		}
		d.line(l, true)
	}
	return d.sum()
}

// Key separation: the writer refuses to sign a statement with the log's
// checkpoint key, and with no key at all.
func TestWritePackage_RefusesLogKeyAsDisclosureKey(t *testing.T) {
	w := newWorld(t)
	sel := Selection{Runs: []store.RunID{w.A}}
	for name, key := range map[string]note.Signer{"log key": w.k.logSigner, "no key": nil} {
		_, err := WritePackage(context.Background(), w.j, &bytes.Buffer{}, sel, w.signed(t), Signing{Recipient: testRecipient, Key: key})
		if !errors.Is(err, ErrSigning) {
			t.Errorf("%s: %v, want ErrSigning", name, err)
		}
	}
}

// A statement is never a checkpoint: its second line is not a size.
func TestStatementIsNotACheckpoint(t *testing.T) {
	w := newWorld(t)
	pkg := w.pkg(t, Selection{Runs: []store.RunID{w.A}})
	ls := lines(pkg)
	tr, err := parseTrailer(bytes.TrimSuffix(ls[len(ls)-1], []byte("\n")), KindPackageEnd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.Open([]byte(tr.Statement), note.VerifierList(w.k.discV)); !errors.Is(err, checkpoint.ErrMalformedCheckpoint) {
		t.Fatalf("a statement opened as a checkpoint: %v", err)
	}
}

// Keys given twice are one key; two keys under one name and ID are not.
func TestMergeLogKeys(t *testing.T) {
	k := newKeys(t, testOrigin, 1)
	p, err := checkpoint.ParsePolicy([]byte("log " + k.logVKey + "\nquorum none\n"))
	if err != nil {
		t.Fatal(err)
	}
	if logs, err := MergeLogKeys([]string{k.logVKey, k.logVKey}, p); err != nil || len(logs) != 0 {
		t.Fatalf("the policy's own log key: %d extra, %v", len(logs), err)
	}
	other := newKeys(t, testOrigin, 2)
	if logs, err := MergeLogKeys([]string{other.logVKey}, p); err != nil || len(logs) != 1 {
		t.Fatalf("a second log key: %d, %v", len(logs), err)
	}
	if _, err := MergeLogKeys([]string{k.witVKeys[0]}, p); !errors.Is(err, ErrKeyConflict) {
		t.Fatalf("a witness key as a log key: %v", err)
	}
	if !SameKeyMaterial(k.logVKey, k.logVKey) || SameKeyMaterial(k.logVKey, k.discVKey) {
		t.Fatal("SameKeyMaterial")
	}
}

// spec/disclosure.md 2.7 item 1: a recipient holds no character of
// category Cc and no bidi control. U+0085 and U+202E were accepted.
func TestParseStatement_RecipientControlCharactersAreRefused(t *testing.T) {
	st := Statement{Checkpoint: store.Checkpoint{Origin: testOrigin, Size: 1}, Recipient: "x"}
	for _, c := range []struct {
		recipient string
		ok        bool
	}{
		{"auditor@regulator.example", true},
		{"Prüferin Ω 監査", true},
		{"a\u200db", true}, // a zero-width joiner is a format character, not a control
		{"a\u0007b", false},
		{"a\u007fb", false},
		{"a\u0085b", false},
		{"a\u009fb", false},
		{"a\u061cb", false},
		{"a\u200eb", false},
		{"a\u200fb", false},
		{"a\u202ab", false},
		{"a\u202eb", false},
		{"a\u2066b", false},
		{"a\u2069b", false},
	} {
		st.Recipient = c.recipient
		_, err := ParseStatement(st.Marshal())
		if (err == nil) != c.ok {
			t.Errorf("recipient %q: ParseStatement error %v, want ok %v", c.recipient, err, c.ok)
		}
		if _, err := SignStatement(st, newKeys(t, testOrigin, 1).discSigner); (err == nil) != c.ok {
			t.Errorf("recipient %q: SignStatement error %v, want ok %v", c.recipient, err, c.ok)
		}
	}
}

// The statement's text ends at the note's last blank line (spec/checkpoint.md
// 2.1 item 2): a blank line among its signature lines makes the text no
// statement, a finding, and never hides the line after it, whoever's it is.
func TestVerify_BlankLineAmongStatementSignaturesIsNotSound(t *testing.T) {
	w := newWorld(t)
	pkg := w.pkg(t, Selection{Runs: []store.RunID{w.A}})
	ls := lines(pkg)
	tr, err := parseTrailer(bytes.TrimSuffix(ls[len(ls)-1], []byte("\n")), KindPackageEnd)
	if err != nil {
		t.Fatal(err)
	}
	tr.Statement += "\n\u2014 someone.example/disclosure AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"
	ls[len(ls)-1] = appendTrailer(nil, KindPackageEnd, tr)
	rep := verifyBytes(t, join(ls), w.k.options())
	if rep.Verdict != NotSound || rep.Findings[0].Check != CheckStatement {
		t.Fatalf("a blank line among the statement's signatures: %s", summary(rep))
	}
}
