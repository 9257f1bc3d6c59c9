package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/appendinput"
	"github.com/runseal/runseal/store"
)

func TestUsageAndHelp(t *testing.T) {
	db := newJournal(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no command", nil, exitUsage, "a command is required"},
		{"unknown command", []string{"frobnicate"}, exitUsage, "unknown command"},
		{"unknown flag", []string{"read", "--bogus"}, exitUsage, "unknown flag"},
		{"root help lists exit codes", []string{"--help"}, exitOK, "Exit codes:"},
		{"root help documents the default path", []string{"--help"}, exitOK, "$RUNSEAL_DB"},
		{"subcommand help has examples", []string{"append", "--help"}, exitOK, "Examples:"},
		{"lease help", []string{"lease", "acquire", "--help"}, exitOK, "--owner"},
		{"lease without subcommand", []string{"lease"}, exitUsage, "acquire, renew or release"},
		{"lease unknown subcommand", []string{"lease", "steal"}, exitUsage, "unknown command"},
		{"bad log level", []string{"--log-level", "loud", "runs", "--recent"}, exitUsage, "--log-level"},
		{"bad tenant", []string{"--tenant", "Bad Tenant", "runs", "--recent"}, exitUsage, "--tenant"},
		{"read needs a run", []string{"read"}, exitUsage, "accepts 1 arg"},
		{"read malformed run", []string{"read", "nope"}, exitUsage, `RUN "nope" is not a run id`},
		{"read from 0", []string{"read", store.NewRunID().String(), "--from", "0"}, exitUsage, "seqs start at 1"},
		{"append without epoch", []string{"append"}, exitUsage, `"epoch" not set`},
		{"append epoch 0", []string{"append", "--epoch", "0"}, exitUsage, "epochs start at 1"},
		{"append two files", []string{"append", "--epoch", "1", "a", "b"}, exitUsage, "accepts at most 1 arg"},
		{"runs needs a selector", []string{"runs"}, exitUsage, "at least one of the flags"},
		{"runs selectors exclusive", []string{"runs", "--recent", "--waiting"}, exitUsage, "none of the others"},
		{"runs bad limit", []string{"runs", "--recent", "--limit", "0"}, exitUsage, "--limit 0"},
		{"runs limit too big", []string{"runs", "--recent", "--limit", "10001"}, exitUsage, "--limit 10001"},
		{"runs count without outcome", []string{"runs", "--recent", "--count"}, exitUsage, "--count goes with --outcome"},
		{"runs source without recent", []string{"runs", "--waiting", "--source", "x"}, exitUsage, "--source goes with --recent"},
		{"runs bad outcome", []string{"runs", "--outcome", "Not OK"}, exitUsage, "--outcome"},
		{"runs bad case", []string{"runs", "--case", "nope"}, exitUsage, "--case"},
		{"verify neither", []string{"verify"}, exitUsage, "either one RUN or --all"},
		{"verify both", []string{"verify", "--all", store.NewRunID().String()}, exitUsage, "either one RUN or --all"},
		{"lease acquire without owner", []string{"lease", "acquire", store.NewRunID().String()}, exitUsage, `"owner" not set`},
		{"lease ttl under 1s", []string{"lease", "acquire", store.NewRunID().String(), "--owner", "o", "--ttl", "500ms"}, exitUsage, "--ttl"},
		{"lease renew without epoch", []string{"lease", "renew", store.NewRunID().String(), "--owner", "o"}, exitUsage, `"epoch" not set`},
		{"lease release epoch 0", []string{"lease", "release", store.NewRunID().String(), "--epoch", "0"}, exitUsage, "--epoch 0"},
		{"seal non-sealing outcome", []string{"seal", store.NewRunID().String(), "--epoch", "1", "--outcome", "failed"}, exitUsage, "must be one of"},
		{"seal without outcome", []string{"seal", store.NewRunID().String(), "--epoch", "1"}, exitUsage, `"outcome" not set`},
		{"cancel without reason", []string{"cancel", store.NewRunID().String()}, exitUsage, `"reason" not set`},
		{"cancel control character actor", []string{"cancel", store.NewRunID().String(), "--reason", "r", "--actor", "a\x01"}, exitUsage, "--actor"},
		{"bench bad duration", []string{"bench", "--duration", "0s"}, exitUsage, "--duration"},
		{"bench bad concurrency", []string{"bench", "--concurrency", "0"}, exitUsage, "--concurrency 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expect(t, cli(t, db, "", tc.args...), tc.code, tc.want)
		})
	}
}

func TestInit(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "new.db")
	r := cli(t, db, "", "init", "--origin", "example.com/log")
	expect(t, r, exitOK, "created journal at "+db, "example.com/log")
	expect(t, cli(t, db, "", "init"), exitFailure, "already exists at "+db, "nothing was changed")
	expect(t, cli(t, filepath.Join(dir, "missing", "j.db"), "", "init"), exitFailure, "create journal")
	expect(t, cli(t, filepath.Join(dir, "o.db"), "", "init", "--origin", "has space"), exitUsage, "--origin")
	if _, err := os.Stat(filepath.Join(dir, "o.db")); !os.IsNotExist(err) {
		t.Errorf("a refused init left a file behind: %v", err)
	}

	var doc map[string]string
	r = cli(t, filepath.Join(dir, "j.db"), "", "init", "--json")
	expect(t, r, exitOK)
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc["path"] != filepath.Join(dir, "j.db") || doc["origin"] == "" || doc["tenant"] != "default" {
		t.Errorf("init --json = %q (%v)", r.stdout, err)
	}
}

// TestDBPath checks the path order: --db, then $RUNSEAL_DB, then ./runseal.db.
// It changes the working directory and the environment, so it is not parallel.
func TestDBPath(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv(envDB, "")
	expect(t, cli(t, "", "", "runs", "--recent"), exitFailure, "no journal at runseal.db", "journal init")
	if _, err := os.Stat(filepath.Join(dir, "runseal.db")); !os.IsNotExist(err) {
		t.Fatalf("a read command created the journal file: %v", err)
	}
	expect(t, cli(t, "", "", "init"), exitOK, filepath.Join(dir, "runseal.db"))

	env := filepath.Join(dir, "env.db")
	t.Setenv(envDB, env)
	expect(t, cli(t, "", "", "init"), exitOK, env)
	flag := filepath.Join(dir, "flag.db")
	expect(t, cli(t, flag, "", "init"), exitOK, flag)
	for _, p := range []string{"runseal.db", "env.db", "flag.db"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func TestAppendAndRead(t *testing.T) {
	db := newJournal(t)
	run, cs := store.NewRunID(), store.NewCaseID()
	key := strings.Repeat("ab", 32)
	in := line(run, "RunAdmitted", `"source":"api","admission_key":"k-1"`) +
		"\n" + // blank lines are skipped but counted
		line(run, "EffectStarted", fmt.Sprintf(`"case":"%s","step":2,"effect_key":"%s","tool":"mail"`, cs, key)) +
		line(run, "Compensate", `"phase":"compensating","note":"<&> \u2028 é"`)
	out := mustCLI(t, db, in, "append", "--epoch", "1", "--json", "-")
	var acks []api.Ack
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var a api.Ack
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatalf("ack %q: %v", l, err)
		}
		acks = append(acks, a)
	}
	if len(acks) != 3 || acks[0].Line != 1 || acks[1].Line != 3 || acks[2].Seq != 3 || acks[2].Run != run {
		t.Fatalf("acks = %+v", acks)
	}

	// read --json embeds each body byte for byte: the hash recomputes.
	out = mustCLI(t, db, "", "read", "--json", run.String())
	sc := bufio.NewScanner(strings.NewReader(out))
	n := 0
	for sc.Scan() {
		l := sc.Text()
		var rec struct {
			Seq      uint64 `json:"seq"`
			PrevHash string `json:"prev_hash"`
			Hash     string `json:"hash"`
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		raw := l[strings.Index(l, `"raw":`)+len(`"raw":`) : len(l)-1]
		prev, _ := hex.DecodeString(rec.PrevHash)
		sum := sha256.Sum256(append(prev, raw...))
		if hex.EncodeToString(sum[:]) != rec.Hash || rec.Hash != acks[n].Hash.String() {
			t.Errorf("seq %d: raw %s does not hash to %s", rec.Seq, raw, rec.Hash)
		}
		n++
	}
	if n != 3 {
		t.Fatalf("read %d records, want 3", n)
	}
	if !strings.Contains(out, `"note":"<&> `+"\u2028"+` é"`) {
		t.Errorf("body was re-escaped: %s", out)
	}

	// Text output, --from and --limit.
	out = mustCLI(t, db, "", "read", run.String(), "--from", "2", "--limit", "1")
	if !strings.HasPrefix(out, "2\tEffectStarted\t"+acks[1].Hash.String()+"\t{") || strings.Count(out, "\n") != 1 {
		t.Errorf("read --from 2 --limit 1 = %q", out)
	}
	// Plain-text append output is "RUN SEQ HASH".
	out = mustCLI(t, db, line(run, "Note", ""), "append", "--epoch", "1")
	if want := fmt.Sprintf("%s\t4\t", run); !strings.HasPrefix(out, want) {
		t.Errorf("append = %q, want prefix %q", out, want)
	}
	// The same input from a file.
	f := filepath.Join(t.TempDir(), "in.jsonl")
	os.WriteFile(f, []byte(line(run, "Note", `"n":5`)), 0o600)
	if out := mustCLI(t, db, "", "append", "--epoch", "1", f); !strings.Contains(out, "\t5\t") {
		t.Errorf("append FILE = %q", out)
	}
	expect(t, cli(t, db, "", "append", "--epoch", "1", filepath.Join(t.TempDir(), "none.jsonl")), exitFailure, "open input")
}

// TestAppendRefusals checks every refusal exits 1 with a message naming what
// was wrong, and writes nothing.
func TestAppendRefusals(t *testing.T) {
	run := store.NewRunID()
	ok := line(run, "Note", `"i":1`)
	big := line(run, "Note", `"blob":"`+strings.Repeat("x", store.MaxRecordBytes)+`"`)
	for _, tc := range []struct {
		name string
		in   string
		want []string
	}{
		{"malformed JSON", ok + ok + `{"run":` + "\n", []string{"line 3", "malformed JSON", "nothing was written"}},
		{"trailing data", ok + `{"run":"x"} {}` + "\n", []string{"line 2", "trailing data"}},
		{"duplicate key", `{"run":"` + run.String() + `","kind":"A","kind":"B"}` + "\n", []string{"line 1", "duplicate"}},
		{"not an object", "[1,2]\n", []string{"line 1", "must be a JSON object"}},
		{"missing run", `{"kind":"Note"}` + "\n", []string{"line 1", `field "run": missing`}},
		{"bad run", `{"run":"01abc","kind":"Note"}` + "\n", []string{"line 1", `field "run"`, "01abc"}},
		{"missing kind", `{"run":"` + run.String() + `"}` + "\n", []string{"line 1", `field "kind": missing`}},
		{"bad kind", line(run, "has space", ""), []string{"line 1", "invalid kind"}},
		{"kind not a string", `{"run":"` + run.String() + `","kind":1}` + "\n", []string{"line 1", `field "kind": must be a string`}},
		{"store field seq", line(run, "Note", `"seq":3`), []string{"line 1", `field "seq": assigned by the store`}},
		{"store field epoch", line(run, "Note", `"epoch":3`), []string{"line 1", `field "epoch"`}},
		{"negative step", line(run, "Note", `"step":-1`), []string{"line 1", `field "step"`}},
		{"huge step", line(run, "Note", `"step":4294967296`), []string{"line 1", `field "step": out of range`}},
		{"bad phase", line(run, "Note", `"phase":"sideways"`), []string{"line 1", `field "phase"`}},
		{"bad case", line(run, "Note", `"case":"nope"`), []string{"line 1", `field "case"`}},
		{"bad effect key", line(run, "EffectStarted", `"effect_key":"ABC"`), []string{"line 1", `field "effect_key"`}},
		{"effect without key", line(run, "EffectStarted", ""), []string{"line 1", "needs an effect key"}},
		{"bad outcome", line(run, "RunConcluded", `"outcome":"Bad Outcome"`), []string{"line 1", "fields.outcome"}},
		{"suspension without until", line(run, "RunSuspended", `"awaiting":"time"`), []string{"line 1", "fields.until"}},
		{"duplicate effect in batch", ok + line(run, "EffectStarted", `"effect_key":"`+strings.Repeat("0", 64)+`"`) +
			line(run, "EffectStarted", `"effect_key":"`+strings.Repeat("0", 64)+`"`), []string{"line 3", "already started at line 2"}},
		{"oversized record", ok + big, []string{"line 2", "over the 1048576-byte limit"}},
		{"oversized line", ok + `{"x":"` + strings.Repeat("y", appendinput.MaxLineBytes) + "\"}\n", []string{"line 2", "record too large"}},
		{"invalid UTF-8", ok + line(run, "Note", "\"t\":\"\xff\""), []string{"line 2", "UTF-8"}},
		{"empty input", "\n \n", []string{"no records in the input"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := newJournal(t)
			expect(t, cli(t, db, tc.in, "append", "--epoch", "1"), exitFailure, tc.want...)
			if h := head(t, db, run); h.Seq != 0 {
				t.Errorf("a refused input wrote %d records", h.Seq)
			}
		})
	}
}

func TestAppendStateRefusals(t *testing.T) {
	ctx := context.Background()
	db := newJournal(t)
	run := store.NewRunID()
	out := mustCLI(t, db, "", "lease", "acquire", run.String(), "--owner", "w1", "--json")
	var l store.Lease
	if err := json.Unmarshal([]byte(out), &l); err != nil || l.Epoch != 1 || l.Owner != "w1" {
		t.Fatalf("lease acquire --json = %q (%v)", out, err)
	}
	mustCLI(t, db, line(run, "Note", ""), "append", "--epoch", "1")

	// Fenced: a stale or future epoch writes nothing.
	for _, e := range []string{"2", "7"} {
		expect(t, cli(t, db, line(run, "Note", "")+line(run, "Note", ""), "append", "--epoch", e), exitFailure,
			"fenced", "epoch "+e+" presented", "was not written (none of it)")
	}
	if h := head(t, db, run); h.Seq != 1 {
		t.Fatalf("fenced appends wrote: head %d", h.Seq)
	}

	// Several runs: the batch before the refused one stays, and says so.
	other := store.NewRunID()
	in := line(other, "Note", "") + line(other, "Note", "") + line(run, "Note", "") + line(other, "Note", "")
	r := cli(t, db, in, "append", "--epoch", "5")
	expect(t, r, exitFailure, "batch 2 of 3", "line 3)", "fenced", "1 later batch(es) were not attempted", "1 earlier batch(es) were committed", "run "+other.String()+", lines 1-2")
	if !strings.Contains(r.stdout, other.String()+"\t2\t") {
		t.Errorf("the committed batch was not acknowledged: %q", r.stdout)
	}
	if h := head(t, db, other); h.Seq != 2 {
		t.Errorf("run %s head %d, want 2 (batch 1 only)", other, h.Seq)
	}

	// A duplicate effect against stored records.
	key := strings.Repeat("cd", 32)
	mustCLI(t, db, line(run, "EffectStarted", `"effect_key":"`+key+`"`), "append", "--epoch", "1")
	expect(t, cli(t, db, line(run, "EffectStarted", `"effect_key":"`+key+`"`), "append", "--epoch", "1"), exitFailure, "already started")

	// A sealed run accepts nothing.
	mustCLI(t, db, line(run, "RunConcluded", `"outcome":"succeeded"`), "append", "--epoch", "1")
	mustCLI(t, db, "", "seal", run.String(), "--epoch", "1", "--outcome", "succeeded")
	expect(t, cli(t, db, line(run, "Note", ""), "append", "--epoch", "1"), exitFailure, "sealed as \"succeeded\"")

	// A duplicate admission key.
	r1, r2 := store.NewRunID(), store.NewRunID()
	mustCLI(t, db, line(r1, "RunAdmitted", `"admission_key":"same"`), "append", "--epoch", "1")
	expect(t, cli(t, db, line(r2, "RunAdmitted", `"admission_key":"same"`), "append", "--epoch", "1"), exitFailure, "already held by run "+r1.String())
	_ = ctx
}

func TestReadRefusals(t *testing.T) {
	db := newJournal(t)
	unknown := store.NewRunID()
	expect(t, cli(t, db, "", "read", unknown.String()), exitFailure, "run "+unknown.String()+" not found")
	expect(t, cli(t, filepath.Join(t.TempDir(), "nope.db"), "", "read", unknown.String()), exitFailure, "no journal at")
	expect(t, cli(t, t.TempDir(), "", "read", unknown.String()), exitFailure, "is a directory")
	junk := filepath.Join(t.TempDir(), "junk.db")
	os.WriteFile(junk, []byte(strings.Repeat("not a database ", 512)), 0o600)
	expect(t, cli(t, junk, "", "read", unknown.String()), exitFailure, "open journal")
}

// TestReadPaging reads across page boundaries, where each page is its own
// transaction and the CLI checks the links between them.
func TestReadPaging(t *testing.T) {
	db := newJournal(t)
	run := store.NewRunID()
	var in strings.Builder
	n := 2*pageSize + 7
	for i := range n {
		in.WriteString(line(run, "Note", fmt.Sprintf(`"i":%d`, i)))
	}
	mustCLI(t, db, in.String(), "append", "--epoch", "1")
	out := mustCLI(t, db, "", "read", run.String())
	if got := strings.Count(out, "\n"); got != n {
		t.Fatalf("read %d records, want %d", got, n)
	}
	out = mustCLI(t, db, "", "read", run.String(), "--from", fmt.Sprint(pageSize-1), "--limit", fmt.Sprint(pageSize+5))
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != pageSize+5 || !strings.HasPrefix(lines[0], fmt.Sprint(pageSize-1)+"\t") || !strings.HasPrefix(lines[len(lines)-1], fmt.Sprint(2*pageSize+3)+"\t") {
		t.Errorf("paged read: %d lines, first %q", len(lines), lines[0])
	}
	if out := mustCLI(t, db, "", "read", run.String(), "--from", fmt.Sprint(n+1)); out != "" {
		t.Errorf("read past the head = %q", out)
	}
}

// TestTamperDetected changes the journal file behind the store's back and
// checks that read, verify and verify --all refuse it, naming run and seq.
func TestTamperDetected(t *testing.T) {
	for _, tc := range []struct {
		name string
		sql  string
		seq  int
	}{
		{"edited body", `UPDATE records SET raw = CAST(replace(CAST(raw AS TEXT), '"i":3', '"i":4') AS BLOB) WHERE seq = 4`, 4},
		{"edited hash", `UPDATE records SET hash = zeroblob(32) WHERE seq = 2`, 2},
		{"deleted record", `DELETE FROM records WHERE seq = 3`, 3},
		{"relinked record", `UPDATE records SET prev_hash = zeroblob(32) WHERE seq = 5`, 5},
		{"truncated tail", `DELETE FROM records WHERE seq = 6`, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := newJournal(t)
			run, good := store.NewRunID(), store.NewRunID()
			var in strings.Builder
			for i := range 6 {
				in.WriteString(line(run, "Note", fmt.Sprintf(`"i":%d`, i)))
			}
			in.WriteString(line(good, "Note", ""))
			mustCLI(t, db, in.String(), "append", "--epoch", "1")
			mustCLI(t, db, "", "verify", "--all")
			if _, err := rawSQL(t, db).Exec(tc.sql); err != nil {
				t.Fatal(err)
			}
			seq := fmt.Sprintf("seq %d", tc.seq)
			expect(t, cli(t, db, "", "verify", run.String()), exitFailure, "verification FAILED", run.String(), seq)
			r := cli(t, db, "", "verify", "--all", "--json")
			expect(t, r, exitFailure, "verification FAILED for 1 of 2 runs", seq)
			if !strings.Contains(r.stdout, `"run":"`+good.String()+`","ok":true`) || !strings.Contains(r.stdout, `"summary":{"failed":1,"runs":2,`) {
				t.Errorf("verify --all --json = %s", r.stdout)
			}
			if tc.name != "truncated tail" { // read has no head to compare a tail to
				expect(t, cli(t, db, "", "read", run.String()), exitFailure, "corrupt journal", run.String())
			}
			mustCLI(t, db, "", "verify", good.String())
		})
	}
}

func TestVerify(t *testing.T) {
	db := newJournal(t)
	run := store.NewRunID()
	acks := mustCLI(t, db, line(run, "Note", "")+line(run, "Note", ""), "append", "--epoch", "1")
	hash := strings.Fields(strings.Split(acks, "\n")[1])[2]
	expect(t, cli(t, db, "", "verify", run.String()), exitOK, "ok\t"+run.String()+"\tseq 2\thead "+hash)
	var res verifyResult
	if err := json.Unmarshal([]byte(mustCLI(t, db, "", "verify", "--json", run.String())), &res); err != nil || !res.OK || res.Seq != 2 || res.Head.String() != hash {
		t.Errorf("verify --json = %+v (%v)", res, err)
	}
	unknown := store.NewRunID()
	r := cli(t, db, "", "verify", "--json", unknown.String())
	expect(t, r, exitFailure, "verification FAILED", "not found")
	if !strings.Contains(r.stdout, `"ok":false`) {
		t.Errorf("verify --json of an unknown run = %q", r.stdout)
	}
	empty := newJournal(t)
	expect(t, cli(t, empty, "", "verify", "--all"), exitOK, "verified 0 runs")
}

func TestRuns(t *testing.T) {
	db := newJournal(t)
	past := func() time.Time { return time.Now().Add(-time.Hour) }
	a, b, c, d := store.NewRunID(), store.NewRunID(), store.NewRunID(), store.NewRunID()
	cs := store.NewCaseID()
	until := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	in := line(a, "RunAdmitted", `"source":"cron"`) + line(a, "RunConcluded", `"outcome":"quarantined"`) +
		line(b, "RunAdmitted", `"source":"api"`) + line(b, "Step", `"case":"`+cs.String()+`"`) +
		line(c, "RunSuspended", `"awaiting":"time","until":"`+until+`"`) +
		line(d, "Step", `"case":"`+cs.String()+`"`)
	mustCLI(t, db, in, "append", "--epoch", "1")
	// A lease that expired an hour ago: its holder died.
	s := openStore(t, db, past)
	if _, err := s.Acquire(context.Background(), d, "dead", time.Second); err != nil {
		t.Fatal(err)
	}
	s.Close()

	for _, tc := range []struct {
		args    []string
		want    []string
		wantNot []string
	}{
		{[]string{"--outcome", "quarantined"}, []string{a.String()}, []string{b.String()}},
		{[]string{"--outcome", "quarantined", "--count"}, []string{"1\n"}, nil},
		{[]string{"--outcome", "quarantined", "--count", "--json"}, []string{`"count":1`}, nil},
		{[]string{"--outcome", "succeeded", "--json"}, []string{"[]"}, nil},
		{[]string{"--recent"}, []string{a.String(), b.String(), c.String(), d.String()}, nil},
		{[]string{"--recent", "--source", "api", "--json"}, []string{`"run":"` + b.String()}, []string{a.String()}},
		{[]string{"--waiting"}, []string{c.String() + "\ttime\tuntil " + until}, []string{a.String()}},
		{[]string{"--waiting", "--json"}, []string{`"awaiting":"time"`}, nil},
		{[]string{"--abandoned", "--json"}, []string{`[{"run":"` + d.String() + `"}]`}, nil},
		{[]string{"--case", cs.String()}, []string{b.String() + "\t2\tStep", d.String() + "\t1\tStep"}, []string{a.String()}},
		{[]string{"--case", cs.String(), "--json"}, []string{`[{"run":"` + b.String() + `","seq":2`}, nil},
		{[]string{"--recent", "--limit", "2"}, []string{"2 shown, the --limit"}, nil},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := cli(t, db, "", append([]string{"runs"}, tc.args...)...)
			expect(t, r, exitOK, tc.want...)
			for _, w := range tc.wantNot {
				if strings.Contains(r.stdout, w) {
					t.Errorf("output has %q: %s", w, r.stdout)
				}
			}
			if strings.Contains(strings.Join(tc.args, " "), "--json") && !json.Valid([]byte(r.stdout)) {
				t.Errorf("--json output is not one JSON document: %s", r.stdout)
			}
		})
	}
}

func TestLeaseSealCancel(t *testing.T) {
	db := newJournal(t)
	run := store.NewRunID()
	expect(t, cli(t, db, "", "lease", "acquire", run.String(), "--owner", "w1", "--ttl", "1m"), exitOK, "acquired run "+run.String(), "epoch 1")
	expect(t, cli(t, db, "", "lease", "acquire", run.String(), "--owner", "w1"), exitFailure, "lease held by \"w1\" at epoch 1")
	expect(t, cli(t, db, "", "lease", "renew", run.String(), "--owner", "w1", "--epoch", "1", "--ttl", "2m"), exitOK, "renewed", "epoch 1")
	expect(t, cli(t, db, "", "lease", "renew", run.String(), "--owner", "w2", "--epoch", "1"), exitFailure, "lease not held by \"w2\"")
	expect(t, cli(t, db, "", "lease", "renew", run.String(), "--owner", "w1", "--epoch", "2"), exitFailure, "not held")

	// Sealing needs the run, its conclusion and the fence.
	expect(t, cli(t, db, "", "seal", run.String(), "--epoch", "1", "--outcome", "succeeded"), exitFailure, "not found")
	acks := mustCLI(t, db, line(run, "RunConcluded", `"outcome":"cancelled"`), "append", "--epoch", "1")
	head := strings.Fields(acks)[2]
	expect(t, cli(t, db, "", "seal", run.String(), "--epoch", "1", "--outcome", "succeeded"), exitFailure, `latest conclusion is "cancelled"`)
	expect(t, cli(t, db, "", "seal", run.String(), "--epoch", "2", "--outcome", "cancelled"), exitFailure, "fenced")
	expect(t, cli(t, db, "", "seal", run.String(), "--epoch", "1", "--outcome", "cancelled"), exitOK, "leaf "+head)
	r := cli(t, db, "", "seal", run.String(), "--epoch", "1", "--outcome", "cancelled", "--json")
	expect(t, r, exitOK, `"leaf":"`+head+`"`)

	expect(t, cli(t, db, "", "lease", "release", run.String(), "--epoch", "1"), exitOK, "released")
	expect(t, cli(t, db, "", "lease", "release", run.String(), "--epoch", "1", "--json"), exitOK, `"released":true`)
	expect(t, cli(t, db, "", "lease", "acquire", run.String(), "--owner", "w2", "--json"), exitOK, `"epoch":2`)

	// Cancellation: unknown run, first request kept.
	unknown := store.NewRunID()
	expect(t, cli(t, db, "", "cancel", unknown.String(), "--reason", "stop"), exitFailure, "not found")
	expect(t, cli(t, db, "", "cancel", run.String(), "--reason", "first", "--actor", "alice"), exitOK, "cancellation requested", "alice (asserted)", "first")
	r = cli(t, db, "", "cancel", run.String(), "--reason", "second", "--actor", "bob", "--json")
	expect(t, r, exitOK, `"created":false`, `"reason":"first"`)
}
