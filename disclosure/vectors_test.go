package disclosure

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/disclosure/internal/tamper"
	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

var updateVectors = flag.Bool("update-vectors", false, "rewrite spec/vectors/disclosure*")

const (
	vecPackage = "../spec/vectors/disclosure-package.jsonl"
	vecExport  = "../spec/vectors/disclosure-export.jsonl"
	vecJSON    = "../spec/vectors/disclosure.json"
)

// vectorFile is spec/vectors/disclosure.json: the keys to verify the
// package vector with (and the private keys and times that made it, so
// that another implementation can rebuild it), what a verifier must report
// for it, and changes to it with the verdict each must get.
type vectorFile struct {
	Comment       string   `json:"comment"`
	LogKey        string   `json:"log_key"`
	WitnessKeys   []string `json:"witness_keys"`
	Policy        string   `json:"policy"`
	DisclosureKey string   `json:"disclosure_key"`
	Signing       signing  `json:"signing"`
	Package       expected `json:"package"`
	Export        expected `json:"export"`
	Tampered      []change `json:"tampered"`
	Restored      string   `json:"restored_root"`
	RestoredSize  uint64   `json:"restored_size"`
	Leaves        []leaf   `json:"leaves"`
	RecordRules   []rule   `json:"record_rules"`
}

// leaf is a sealed run's leaf in the export vector's log: the leaf hash is
// SHA-256(0x00 || terminal hash), RFC 6962's leaf hash of the 32 bytes.
type leaf struct {
	Index    uint64 `json:"index"`
	Run      string `json:"run"`
	Terminal string `json:"terminal_hash"`
	LeafHash string `json:"leaf_hash"`
}

// rule is a record body a verifier must accept or refuse (check
// record_body), for the rules of spec/records.md a store's decoder alone
// does not state.
type rule struct {
	Raw    string `json:"raw"`
	Valid  bool   `json:"valid"`
	Reason string `json:"reason"`
}

// recordRules are the bodies of the record_rules vectors.
func recordRules() []rule {
	const run = "01JC000000000000000000000A"
	body := func(kind, fields string, epoch, v string) string {
		// members sorted: fields are given in their sorted place by the caller
		return `{` + fields + `"epoch":` + epoch + `,"kind":"` + kind + `","run":"` + run + `","seq":1,"v":` + v + `}`
	}
	susp := func(fields string) string {
		return `{` + fields + `"epoch":1,"kind":"RunSuspended","run":"` + run + `","seq":1,` + `"v":1}`
	}
	untilAt := func(ts string) string {
		return `{"awaiting":"time","epoch":1,"kind":"RunSuspended","run":"` + run + `","seq":1,"until":"` + ts + `","v":1}`
	}
	cancel := func(actor, reason string) string {
		return `{"actor":{"actor":"` + actor + `","basis":"asserted"},"epoch":1,"kind":"RunCancelled"` + reason + `,"run":"` + run + `","seq":1,"v":1}`
	}
	return []rule{
		{body("Note", "", "1", "1"), true, "the smallest valid body"},
		{body("Note", "", "4611686018427387904", "1"), true, "epoch 2^62, the highest"},
		{body("Note", "", "0", "1"), false, "epoch 0"},
		{body("Note", "", "4611686018427387905", "1"), false, "epoch 2^62+1"},
		{body("Note", "", "1", "0"), false, "v 0"},
		{body("Note", "", "1", "2"), false, "v 2"},
		{`{"epoch":1,"kind":"Note","run":"01JC000000000000000000000A","seq":1,"step":0,"v":1}`, true, "step 0 is a step, not an empty member"},
		{`{"admission_key":"","epoch":1,"kind":"RunAdmitted","run":"01JC000000000000000000000A","seq":1,"v":1}`, true, "an empty admission_key is a kind's field, allowed: the run is unkeyed"},
		{`{"epoch":1,"kind":"Note","run":"81JC000000000000000000000A","seq":1,"v":1}`, false, "a ULID whose first character is above 7 (over 128 bits)"},
		{`{"awaiting":"event","epoch":1,"event":"","kind":"RunSuspended","run":"` + run + `","seq":1,"v":1}`, false, "awaiting event with an empty event"},
		{`{"awaiting":"event","epoch":1,"event":"approval","kind":"RunSuspended","run":"` + run + `","seq":1,"v":1}`, true, "awaiting event"},
		{susp(`"awaiting":"time",`), false, "awaiting time without until"},
		{`{"awaiting":"event","epoch":1,"event":"approval","kind":"RunSuspended","run":"` + run + `","seq":1,"until":"","v":1}`, false, "awaiting event with an empty until: a present until is a timestamp whatever awaiting says"},
		{`{"awaiting":"time","epoch":1,"event":"","kind":"RunSuspended","run":"` + run + `","seq":1,"until":"2030-01-02T03:04:05Z","v":1}`, true, "awaiting time with an empty event: event is held only to its length under time"},
		{untilAt("2030-01-02T03:04:05Z"), true, "until in the profile"},
		{untilAt("2030-01-02T03:04:05.123456789+23:59"), true, "nine fraction digits and offset +23:59"},
		{untilAt("2030-01-02T03:04:05+24:00"), false, "offset +24:00"},
		{untilAt("2030-01-02T03:04:05+00:60"), false, "offset minute 60"},
		{untilAt("2030-01-02T23:59:60Z"), false, "a leap second"},
		{untilAt("2030-01-02t03:04:05Z"), false, "lower-case t"},
		{untilAt("2030-01-02T03:04:05z"), false, "lower-case z"},
		{untilAt("2030-01-02T03:04:05.1234567891Z"), false, "ten fraction digits"},
		{cancel("alice", ""), true, "a cancellation"},
		{`{"actor":{"actor":"alice","basis":"asserted","via":"console"},"epoch":1,"kind":"RunCancelled","run":"` + run + `","seq":1,"v":1}`, true, "an actor object with another member: allowed and not read"},
		{`{"actor":{"actor":"alice"},"epoch":1,"kind":"RunCancelled","run":"` + run + `","seq":1,"v":1}`, false, "an actor object without basis"},
		{`{"epoch":1,"kind":"Note","run":"` + run + `","seq":0,"v":1}`, false, "seq 0"},
		{cancel("", ""), false, "an empty actor"},
		{cancel(strings.Repeat("a", 256), ""), true, "an actor of 256 bytes"},
		{cancel(strings.Repeat("a", 257), ""), false, "an actor of 257 bytes"},
		{cancel(`a\u0007b`, ""), false, "an actor with a control character"},
		{cancel("alice", `,"reason":"`+strings.Repeat("r", 4096)+`"`), true, "a reason of 4,096 bytes"},
		{cancel("alice", `,"reason":"`+strings.Repeat("r", 4097)+`"`), false, "a reason of 4,097 bytes"},
	}
}

// signing is what made the package vector's signatures: Ed25519 signatures
// are deterministic, so these private keys, the cosignature time and the
// recipient reproduce the note and the statement byte for byte.
type signing struct {
	LogSKey        string   `json:"log_private_key"`
	WitnessSKeys   []string `json:"witness_private_keys"`
	DisclosureSKey string   `json:"disclosure_private_key"`
	CosignedAt     int64    `json:"cosigned_at"`
	Recipient      string   `json:"recipient"`
}

type expected struct {
	File    string `json:"file"`
	SHA256  string `json:"sha256"`
	Verdict string `json:"verdict,omitempty"`
	Runs    uint64 `json:"runs"`
	Sealed  uint64 `json:"sealed"`
	Records uint64 `json:"records"`
	Cases   uint64 `json:"cases,omitempty"`
}

// change is a tampering of the package vector: its edits, applied to the
// vector's lines as numbered in the original file (1-based), then the
// verdict and the first finding's check a verifier must report.
type change struct {
	Name    string `json:"name"`
	Edits   []edit `json:"edits"`
	Verdict string `json:"verdict"`
	Check   string `json:"check,omitempty"` // the first finding's check, for not_sound
	// Checks, when given, are the checks of all the findings, each named
	// once, in the order of its first finding (spec/disclosure.md 4.2).
	Checks []string `json:"checks,omitempty"`
}

// edit is one change to a line of the package vector (tamper.Edit).
type edit = tamper.Edit

func (c change) apply(t testing.TB, pkg []byte) []byte {
	t.Helper()
	out, err := tamper.Apply(pkg, c.Edits)
	if err != nil {
		t.Fatalf("%s: %v", c.Name, err)
	}
	return out
}

func one(line int, from, to string) []edit { return []edit{{Line: line, From: from, To: to}} }

// rehashed edits record line n (1-based) of pkg, replacing from by to in
// its raw bytes, and gives it the hash of the edited bytes, so that only
// the checks after the chain can tell. It returns the edit and the new hash.
func rehashed(t testing.TB, pkg []byte, n int, from, to string) (edit, store.Digest) {
	ls := lines(pkg)
	prev, _, err := parseRecordLine(bytes.TrimSuffix(ls[n-2], []byte("\n")))
	if err != nil {
		t.Fatal(err)
	}
	old, raw, err := parseRecordLine(bytes.TrimSuffix(ls[n-1], []byte("\n")))
	if err != nil {
		t.Fatal(err)
	}
	raw = bytes.Replace(bytes.Clone(raw), []byte(from), []byte(to), 1)
	h := store.ChainHash(prev, raw)
	return edit{Line: n, From: strings.TrimSuffix(string(ls[n-1]), "\n"), To: strings.TrimSuffix(string(appendRecordLine(nil, h, raw)), "\n")}, old
}

// vectorChanges are the tampered packages of spec/disclosure.md section 8:
// at least one per check a finding can name, each with the check that must
// come first, and the changes that leave a package unverifiable. The
// package vector's lines are: 1 header; 2-7 run A (sealed, index 2); 8-11
// run B (sealed, index 0, carried only for case X); 12-15 run C (unsealed);
// 16 the case block of X; 17 the trailer.
func vectorChanges(t testing.TB, w *world, pkg []byte) []change {
	ls := lines(pkg)
	line := func(n int) string { return strings.TrimSuffix(string(ls[n-1]), "\n") }
	concl, oldA := rehashed(t, pkg, 7, `"outcome":"succeeded"`, `"outcome":"failed"`)
	newA, _, _ := parseRecordLine([]byte(concl.To))
	stripped, _ := rehashed(t, pkg, 15, `"outcome":"failed"`, `"outcome":"succeeded"`)
	sigName := "\u2014 " + testOrigin + DisclosureKeySuffix + " "
	return []change{
		{Name: "the header's canon is not 1", Edits: one(1, `"canon":1`, `"canon":2`), Verdict: "not_sound", Check: CheckHeader},
		{Name: "a sealed run marked unsealed", Edits: one(8, `{"index":0,`, `{`), Verdict: "not_sound", Check: CheckFraming},
		{Name: "the checkpoint size in the header changed", Edits: one(1, `"size":3`, `"size":4`), Verdict: "not_sound", Check: CheckCheckpoint},
		{Name: "a record's v is 2", Edits: one(3, `"v":1`, `"v":2`), Verdict: "not_sound", Check: CheckRecordBody},
		{Name: "a record's text changed", Edits: one(3, `"shop"`, `"shoq"`), Verdict: "not_sound", Check: CheckRecordHash},
		{Name: "a record deleted", Edits: []edit{{Line: 4, Delete: true}}, Verdict: "not_sound", Check: CheckChain},
		{Name: "a record names another run", Edits: one(3, `"run":"`+w.A.String()+`"`, `"run":"`+w.B.String()+`"`), Verdict: "not_sound", Check: CheckRunLabel},
		{Name: "the seal changed", Edits: one(2, `"seal":"0`, `"seal":"1`), Verdict: "not_sound", Check: CheckSeal},
		{Name: "a sealed run's conclusion made failed, chain and seal re-hashed", Edits: []edit{concl,
			{Line: 2, From: oldA.String(), To: store.Digest(newA).String()}}, Verdict: "not_sound", Check: CheckSealedConclusion},
		{Name: "a proof hash changed", Edits: one(2, `"proof":["b`, `"proof":["c`), Verdict: "not_sound", Check: CheckInclusion},
		{Name: "the log index changed", Edits: one(2, `"index":2`, `"index":1`), Verdict: "not_sound", Check: CheckInclusion},
		{Name: "an unsealed run's conclusion made succeeded, re-hashed", Edits: []edit{stripped}, Verdict: "not_sound", Check: CheckLeafStripped},
		{Name: "a run block claims no records", Edits: one(12, `"records":3`, `"records":0`), Verdict: "not_sound", Check: CheckEmptyRun},
		{Name: "a run carried twice", Edits: []edit{{Line: 16, Insert: string(join(ls[11:15]))}}, Verdict: "not_sound", Check: CheckDuplicateRun,
			// The duplicate is read as any block, never selected by id
			// (4.1 item 6), so it is carried unselected; it is counted.
			Checks: []string{CheckDuplicateRun, CheckSelection, CheckTrailer, CheckStatement}},
		{Name: "a sealed run block claims no records", Edits: []edit{{Line: 8, From: `"records":3`, To: `"records":0`}, {Line: 9, Delete: true}, {Line: 10, Delete: true}, {Line: 11, Delete: true}},
			Verdict: "not_sound", Check: CheckEmptyRun, Checks: []string{CheckEmptyRun, CheckInclusion, CheckSelection, CheckCaseCount, CheckTrailer, CheckStatement}},
		{Name: "a log index at the checkpoint's size", Edits: one(2, `"index":2`, `"index":3`), Verdict: "not_sound", Check: CheckInclusion},
		{Name: "a log index of 2^64", Edits: one(2, `"index":2`, `"index":18446744073709551616`), Verdict: "not_sound", Check: CheckFraming},
		{Name: "a run block's record count is negative", Edits: one(12, `"records":3`, `"records":-1`), Verdict: "not_sound", Check: CheckFraming},
		{Name: "the checkpoint size in the header is 2^64", Edits: one(1, `"size":3`, `"size":18446744073709551616`), Verdict: "not_sound", Check: CheckHeader},
		{Name: "a record line with no raw bytes", Edits: one(13, `"raw":`+rawOf(t, line(13)), `"raw":`), Verdict: "not_sound", Check: CheckFraming},
		{Name: "a record line whose raw is an empty string", Edits: one(13, `"raw":`+rawOf(t, line(13)), `"raw":""`), Verdict: "not_sound", Check: CheckRecordBody},
		{Name: "a record's seq is 0", Edits: one(13, `"seq":1`, `"seq":0`), Verdict: "not_sound", Check: CheckRecordBody},
		{Name: "a second run claims a log index", Edits: one(8, `"index":0`, `"index":2`), Verdict: "not_sound", Check: CheckInclusion},
		{Name: "two runs swapped", Edits: []edit{
			{Line: 8, From: line(8), To: line(12)}, {Line: 9, From: line(9), To: line(13)}, {Line: 10, From: line(10), To: line(14)}, {Line: 11, From: line(11), To: line(15)},
			{Line: 12, From: line(12), To: line(8)}, {Line: 13, From: line(13), To: line(9)}, {Line: 14, From: line(14), To: line(10)}, {Line: 15, From: line(15), To: line(11)},
		}, Verdict: "not_sound", Check: CheckOrder},
		{Name: "a carried run removed from the selection", Edits: one(1, `,"`+w.C.String()+`"]`, `]`), Verdict: "not_sound", Check: CheckSelection},
		{Name: "the case block's count changed", Edits: one(16, `"runs":2`, `"runs":1`), Verdict: "not_sound", Check: CheckCaseCount},
		{Name: "the trailer's record count changed", Edits: one(17, `"records":11`, `"records":10`), Verdict: "not_sound", Check: CheckTrailer},
		{Name: "a line after the trailer", Edits: []edit{{Line: 18, Insert: "{}\n"}}, Verdict: "not_sound", Check: CheckAfterTrailer},
		// Issue 11 item 2: run B is carried only because of case X. Dropping
		// its block and records and fixing every count leaves a consistent
		// file; only the signed statement tells.
		{Name: "a run carried for a case dropped, counts fixed", Edits: []edit{
			{Line: 8, Delete: true}, {Line: 9, Delete: true}, {Line: 10, Delete: true}, {Line: 11, Delete: true},
			{Line: 16, From: `"runs":2`, To: `"runs":1`},
			{Line: 17, From: `"records":11,"runs":3,"sealed":2`, To: `"records":8,"runs":2,"sealed":1`},
		}, Verdict: "not_sound", Check: CheckStatement},
		{Name: "the header's checkpoint origin is empty", Edits: one(1, `"origin":"`+testOrigin+`"`, `"origin":""`), Verdict: "not_sound", Check: CheckCheckpoint},
		{Name: "a run block's run id is empty", Edits: one(12, `"run":"`+w.C.String()+`"`, `"run":""`), Verdict: "not_sound", Check: CheckFraming},
		{Name: "the statement is an empty string", Edits: one(17, statementRE.FindString(line(17)), `,"statement":""`), Verdict: "not_sound", Check: CheckFraming},
		{Name: "the statement removed", Edits: one(17, statementRE.FindString(line(17)), ``), Verdict: "not_sound", Check: CheckStatement},
		// Issue 29 item 1: every line of a known key is verified, not only
		// its first (spec/checkpoint.md 2.2).
		{Name: "a second statement signature by the disclosure key fails", Edits: []edit{secondBadSignature(t, 17, line(17), sigName)}, Verdict: "not_sound", Check: CheckStatement},
		// A statement signed by the journal's own key for a recipient with a
		// control character the text defines (a bidi override) is refused as
		// malformed: the signature alone does not make it one.
		{Name: "the statement signed for a recipient with U+202E", Edits: []edit{resignedRecipient(t, w, 17, line(17), "auditor\u202e@regulator.example")}, Verdict: "not_sound", Check: CheckStatement},
		{Name: "the statement signed for a recipient with U+0085", Edits: []edit{resignedRecipient(t, w, 17, line(17), "auditor\u0085@regulator.example")}, Verdict: "not_sound", Check: CheckStatement},
		{Name: "the statement's recipient changed", Edits: one(17, `recipient `+testRecipient, `recipient someone@else.example`), Verdict: "not_sound", Check: CheckStatement},
		{Name: "the trailer dropped", Edits: []edit{{Line: 17, Delete: true}}, Verdict: "unverifiable"},
		{Name: "the final line feed dropped", Edits: one(17, "}\n", "}"), Verdict: "unverifiable"},
		{Name: "a newer version", Edits: one(1, `"version":1`, `"version":2`), Verdict: "unverifiable"},
		// Issue 29 item 4: -1 is an integer, a version other than 1; a
		// version that is not an integer is the header's fault.
		{Name: "a negative version", Edits: one(1, `"version":1`, `"version":-1`), Verdict: "unverifiable"},
		{Name: "a version of 2^64", Edits: one(1, `"version":1`, `"version":18446744073709551616`), Verdict: "unverifiable"},
		{Name: "a version that is not an integer", Edits: one(1, `"version":1`, `"version":1.5`), Verdict: "not_sound", Check: CheckHeader},
		{Name: "a version that is a string", Edits: one(1, `"version":1`, `"version":"1"`), Verdict: "not_sound", Check: CheckHeader},
		{Name: "the statement's signature names another key", Edits: one(17, sigName, "\u2014 someone.example/disclosure "), Verdict: "unverifiable"},
	}
}

// resignedRecipient is the edit that replaces the statement in trailer line
// n (text l) with the same statement for recipient, signed with the
// journal's disclosure key: note.Sign directly, as SignStatement refuses
// such a recipient.
func resignedRecipient(t testing.TB, w *world, n int, l, recipient string) edit {
	t.Helper()
	tr, err := parseTrailer([]byte(l), KindPackageEnd)
	if err != nil {
		t.Fatal(err)
	}
	st, err := ParseStatement([]byte(tr.Statement[:strings.Index(tr.Statement, "\n\n")+1]))
	if err != nil {
		t.Fatal(err)
	}
	st.Recipient = recipient
	signed, err := note.Sign(&note.Note{Text: string(st.Marshal())}, w.k.discSigner)
	if err != nil {
		t.Fatal(err)
	}
	tr.Statement = string(signed)
	return edit{Line: n, From: l, To: string(appendTrailer(nil, KindPackageEnd, tr))}
}

// rawOf is the raw bytes of record line l.
func rawOf(t testing.TB, l string) string {
	t.Helper()
	_, raw, err := parseRecordLine([]byte(l))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// secondBadSignature is the edit that adds, after the statement's signature
// line by sigName in trailer line n (text l), a second line by the same key
// whose signature has its last byte changed: a line of a known key that
// fails, after one that verifies.
func secondBadSignature(t testing.TB, n int, l, sigName string) edit {
	t.Helper()
	i := strings.Index(l, sigName)
	if i < 0 {
		t.Fatalf("line %d has no signature by %q", n, sigName)
	}
	rest := l[i+len(sigName):]
	b64 := rest[:strings.Index(rest, `\n`)]
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-1] ^= 1
	bad := base64.StdEncoding.EncodeToString(raw)
	return edit{Line: n, From: sigName + b64 + `\n"}`, To: sigName + b64 + `\n` + sigName + bad + `\n"}`}
}

var statementRE = regexp.MustCompile(`,"statement":"[^"]*"`)

func vectorKeys(t testing.TB, vf *vectorFile) Options {
	t.Helper()
	p, err := checkpoint.ParsePolicy([]byte(vf.Policy))
	if err != nil {
		t.Fatal(err)
	}
	// log_key is also the policy's log line: given twice, it is one key.
	logs, err := MergeLogKeys([]string{vf.LogKey}, p)
	if err != nil {
		t.Fatal(err)
	}
	dv, err := checkpoint.NewVerifier(vf.DisclosureKey)
	if err != nil {
		t.Fatal(err)
	}
	return Options{Logs: logs, Policy: p, Disclosure: []note.Verifier{dv}}
}

func loadVectors(t testing.TB) (*vectorFile, []byte, []byte) {
	t.Helper()
	b, err := os.ReadFile(vecJSON)
	if err != nil {
		t.Fatal(err)
	}
	var vf vectorFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&vf); err != nil {
		t.Fatal(err)
	}
	pkg, err := os.ReadFile(vecPackage)
	if err != nil {
		t.Fatal(err)
	}
	exp, err := os.ReadFile(vecExport)
	if err != nil {
		t.Fatal(err)
	}
	return &vf, pkg, exp
}

// The vectors are made by this code from a fixed journal, fixed keys and a
// fixed time, so they are reproduced byte for byte; -update-vectors rewrites
// them after a deliberate format change.
func TestVectorsReproduce(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	pkg := w.pkg(t, Selection{Runs: []store.RunID{w.C, w.A}, Cases: []store.CaseID{w.X}})
	exp := export(t, w.j)
	prep := verifyBytes(t, pkg, w.k.options())
	mustSound(t, prep)
	cp, _ := w.j.Checkpoint(ctx)
	policy := fmt.Sprintf("log %s\nwitness witness1.example %s\nwitness witness2.example %s\ngroup both 2 witness1.example witness2.example\nquorum both\n",
		w.k.logVKey, w.k.witVKeys[0], w.k.witVKeys[1])
	vf := vectorFile{
		Comment: "Disclosure package and export vectors; see spec/disclosure.md section 8. disclosure-package.jsonl must verify sound " +
			"with log_key, policy and disclosure_key; each tampered change must get its verdict and first check; disclosure-export.jsonl must restore " +
			"to a log of restored_size leaves with root restored_root. Regenerate with: go test ./disclosure -run TestVectorsReproduce -update-vectors",
		LogKey: w.k.logVKey, WitnessKeys: w.k.witVKeys, Policy: policy, DisclosureKey: w.k.discVKey,
		Signing: signing{LogSKey: w.k.logSKey, WitnessSKeys: w.k.witSKeys, DisclosureSKey: w.k.discSKey, CosignedAt: w.k.at.Unix(), Recipient: testRecipient},
		Package: expected{File: "disclosure-package.jsonl", SHA256: prep.SHA256, Verdict: string(Sound),
			Runs: prep.Counts.Runs, Sealed: prep.Counts.Sealed, Records: prep.Counts.Records, Cases: prep.Counts.Cases},
		Export:   expected{File: "disclosure-export.jsonl", SHA256: store.Sum(exp).String(), Runs: 5, Sealed: 3, Records: 16},
		Tampered: vectorChanges(t, w, pkg), Restored: cp.Root.String(), RestoredSize: cp.Size,
		RecordRules: recordRules(),
	}
	for i := range cp.Size {
		for _, r := range []store.RunID{w.A, w.B, w.C, w.D, w.E} {
			ps, err := w.j.LogPositions(ctx, []store.RunID{r})
			if err != nil {
				t.Fatal(err)
			}
			if ps[0] != nil && ps[0].Index == i {
				vf.Leaves = append(vf.Leaves, leaf{Index: i, Run: r.String(), Terminal: ps[0].Leaf.String(),
					LeafHash: store.Digest(log.LeafHash(log.Hash(ps[0].Leaf))).String()})
			}
		}
	}
	js, err := json.MarshalIndent(vf, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	js = append(js, '\n')
	if *updateVectors {
		for p, b := range map[string][]byte{vecPackage: pkg, vecExport: exp, vecJSON: js} {
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	for p, b := range map[string][]byte{vecPackage: pkg, vecExport: exp, vecJSON: js} {
		have, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(have, b) {
			t.Errorf("%s differs from what this code writes; if the format changed on purpose, rerun with -update-vectors", p)
		}
	}
}

// The vectors verify, restore and fail as they say, read from the files
// alone, as another implementation would read them.
func TestVectors(t *testing.T) {
	vf, pkg, exp := loadVectors(t)
	opts := vectorKeys(t, vf)
	rep := verifyBytes(t, pkg, opts)
	mustSound(t, rep)
	if rep.SHA256 != vf.Package.SHA256 || rep.Counts.Runs != vf.Package.Runs || rep.Counts.Sealed != vf.Package.Sealed ||
		rep.Counts.Records != vf.Package.Records || rep.Counts.Cases != vf.Package.Cases {
		t.Fatalf("report %+v, vector %+v", rep, vf.Package)
	}
	named := map[string]bool{}
	for _, c := range vf.Tampered {
		named[c.Check] = true
	}
	for _, c := range Checks {
		if !named[c] {
			t.Errorf("no tampered vector names the check %s first", c)
		}
	}
	for _, c := range vf.Tampered {
		rep := verifyBytes(t, c.apply(t, bytes.Clone(pkg)), opts)
		if string(rep.Verdict) != c.Verdict {
			t.Errorf("%s: verdict %s, want %s: %s", c.Name, rep.Verdict, c.Verdict, summary(rep))
			continue
		}
		if c.Check != "" && (len(rep.Findings) == 0 || rep.Findings[0].Check != c.Check) {
			t.Errorf("%s: first finding %s, want check %s", c.Name, summary(rep), c.Check)
		}
		if c.Checks != nil {
			var got []string
			for _, f := range rep.Findings {
				if !slices.Contains(got, f.Check) {
					got = append(got, f.Check)
				}
			}
			if !slices.Equal(got, c.Checks) {
				t.Errorf("%s: checks %v, want %v: %s", c.Name, got, c.Checks, summary(rep))
			}
		}
	}
	target := openJournal(t, "example.com/restored")
	rr, err := Restore(context.Background(), target, bytes.NewReader(exp))
	if err != nil {
		t.Fatal(err)
	}
	if rr.Rebuilt.Root.String() != vf.Restored || rr.Rebuilt.Size != vf.RestoredSize || rr.Runs != vf.Export.Runs || rr.Records != vf.Export.Records {
		t.Fatalf("restore %+v, vector %+v", rr, vf)
	}
	if !strings.HasPrefix(string(pkg), `{"canon":1,`) {
		t.Fatal("vector does not start with its header")
	}
	resignVectors(t, vf, pkg)
	// The leaves, hashed here by hand as RFC 6962 says, make the export's
	// root: SHA-256(0x00 || terminal hash) for a leaf, SHA-256(0x01 || l ||
	// r) for a node; three leaves make ((0,1),2).
	if len(vf.Leaves) != 3 {
		t.Fatalf("%d leaves", len(vf.Leaves))
	}
	var lh [3][]byte
	for i, l := range vf.Leaves {
		term, _ := hex.DecodeString(l.Terminal)
		sum := sha256.Sum256(append([]byte{0}, term...))
		if hex.EncodeToString(sum[:]) != l.LeafHash {
			t.Fatalf("leaf %d: SHA-256(0x00 || terminal) is %x, the vector says %s", i, sum, l.LeafHash)
		}
		lh[i] = sum[:]
	}
	n01 := sha256.Sum256(append(append([]byte{1}, lh[0]...), lh[1]...))
	root := sha256.Sum256(append(append([]byte{1}, n01[:]...), lh[2]...))
	if hex.EncodeToString(root[:]) != vf.Restored {
		t.Fatalf("root from the leaves %x, restored_root %s", root, vf.Restored)
	}
	for _, r := range vf.RecordRules {
		_, _, err := decodeRecordBody([]byte(r.Raw))
		if (err == nil) != r.Valid {
			t.Errorf("record rule %q: decode error %v, want valid %v", r.Reason, err, r.Valid)
		}
	}
}

// The published private keys, time and recipient re-make the package
// vector's signed note and statement byte for byte, as another
// implementation would (Ed25519 signatures are deterministic).
func resignVectors(t *testing.T, vf *vectorFile, pkg []byte) {
	ls := lines(pkg)
	h, err := parseHeader(bytes.TrimSuffix(ls[0], []byte("\n")))
	if err != nil {
		t.Fatal(err)
	}
	logS, err := checkpoint.NewSigner(vf.Signing.LogSKey)
	if err != nil {
		t.Fatal(err)
	}
	signers := []note.Signer{logS}
	for _, k := range vf.Signing.WitnessSKeys {
		c, err := checkpoint.NewCosigner(k)
		if err != nil {
			t.Fatal(err)
		}
		signers = append(signers, c.At(time.Unix(vf.Signing.CosignedAt, 0)))
	}
	n, err := checkpoint.Sign(checkpoint.Checkpoint{Origin: h.Checkpoint.Origin, Size: h.Checkpoint.Size, Root: h.Checkpoint.Root}, signers...)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(n, h.Note) {
		t.Fatalf("the published keys sign the checkpoint as\n%s\nthe vector carries\n%s", n, h.Note)
	}
	tr, err := parseTrailer(bytes.TrimSuffix(ls[len(ls)-1], []byte("\n")), KindPackageEnd)
	if err != nil {
		t.Fatal(err)
	}
	st, err := ParseStatement([]byte(tr.Statement[:strings.Index(tr.Statement, "\n\n")+1]))
	if err != nil {
		t.Fatal(err)
	}
	if st.Recipient != vf.Signing.Recipient {
		t.Fatalf("statement recipient %q, vector %q", st.Recipient, vf.Signing.Recipient)
	}
	ds, err := checkpoint.NewSigner(vf.Signing.DisclosureSKey)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := SignStatement(st, ds)
	if err != nil {
		t.Fatal(err)
	}
	if string(signed) != tr.Statement {
		t.Fatalf("the published disclosure key signs the statement as\n%s\nthe vector carries\n%s", signed, tr.Statement)
	}
}
