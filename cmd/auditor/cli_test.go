package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/disclosure"
	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"verify", "--help"}, {"consistency", "--help"}, {"inclusion", "--help"}, {"monitor", "--help"}, {"bench", "--help"}} {
		code, out, _ := cli(t, args...)
		if code != 0 || !strings.Contains(out, "Exit codes") && !strings.Contains(out, "Targets") {
			t.Errorf("%v: code %d, output %q", args, code, out)
		}
		if args[0] != "--help" && !strings.Contains(out, "Examples:") {
			t.Errorf("%v has no examples", args)
		}
	}
	if code, _, _ := cli(t); code != exitUsage {
		t.Errorf("no command: %d", code)
	}
	if code, _, _ := cli(t, "frobnicate"); code != exitUsage {
		t.Errorf("unknown command: %d", code)
	}
}

func TestVerifyExitCodes(t *testing.T) {
	e := newEnv(t)
	a, b := e.addRun(false), e.addRun(true)
	e.addRun(false)
	good := e.pkg("good.jsonl", a, b)
	raw, _ := os.ReadFile(good)
	ls := bytes.SplitAfter(raw, []byte("\n"))
	ls = ls[:len(ls)-1]
	tampered := e.write("tampered.jsonl", string(bytes.Replace(raw, []byte(`"text":"more"`), []byte(`"text":"mote"`), 1)))
	cut := e.write("cut.jsonl", string(bytes.Join(ls[:len(ls)-1], nil)))
	newer := e.write("newer.jsonl", string(bytes.Replace(raw, []byte(`"version":1`), []byte(`"version":9`), 1)))
	policyNone := e.write("none.policy", "quorum none\n")
	_, otherKey, err := checkpoint.GenerateLogKey(rand.Reader, origin)
	if err != nil {
		t.Fatal(err)
	}
	logKey, _ := os.ReadFile(filepath.Join(e.dir, "log.vkey"))
	w1, _ := os.ReadFile(filepath.Join(e.dir, "w1.vkey"))
	w2, _ := os.ReadFile(filepath.Join(e.dir, "w2.vkey"))
	// What an operator hands over: a policy whose log line is the log key.
	policyFull := e.write("full.policy", fmt.Sprintf("log %s\nwitness w1 %s\nwitness w2 %s\ngroup both 2 w1 w2\nquorum both\n", logKey, w1, w2))
	disc := "@" + filepath.Join(e.dir, "disclosure.vkey")
	logAt := "@" + filepath.Join(e.dir, "log.vkey")
	// Another key under the log's name and key ID cannot be the same key.
	clash := strings.Replace(string(logKey), string(logKey)[len(string(logKey))-8:], "AAAAAAAA", 1)
	for name, tc := range map[string]struct {
		args []string
		code int
	}{
		"sound":                   {e.args("verify", good), exitSound},
		"sound, json":             {e.args("verify", good, "--json"), exitSound},
		"quorum 1 of 2":           {e.args("verify", good, "--quorum", "1"), exitSound},
		"quorum none, on purpose": {[]string{"verify", good, "--log-key", "@" + filepath.Join(e.dir, "log.vkey"), "--policy", policyNone, "--disclosure-key", disc}, exitSound},
		// Issue 11 item 6 / issue 18 item 7: keys given twice are one key.
		"log key in flag and policy":      {[]string{"verify", good, "--log-key", logAt, "--policy", policyFull, "--disclosure-key", disc}, exitSound},
		"log key only in policy":          {[]string{"verify", good, "--policy", policyFull, "--disclosure-key", disc}, exitSound},
		"a different key, same name+hash": {[]string{"verify", good, "--log-key", clash, "--policy", policyFull, "--disclosure-key", disc}, exitUsage},
		// Issue 11 item 2: the statement needs the disclosure key, which is
		// never the log key.
		"no disclosure key":         {[]string{"verify", good, "--policy", policyFull}, exitUnverifiable},
		"log key as disclosure key": {[]string{"verify", good, "--policy", policyFull, "--disclosure-key", logAt}, exitUsage},
		"witness as disclosure key": {[]string{"verify", good, "--policy", policyFull, "--disclosure-key", "@" + filepath.Join(e.dir, "w1.vkey")}, exitUsage},
		"tampered":                  {e.args("verify", tampered), exitNotSound},
		"cut":                       {e.args("verify", cut), exitUnverifiable},
		"newer version":             {e.args("verify", newer), exitUnverifiable},
		"no witness policy":         {[]string{"verify", good, "--log-key", "@" + filepath.Join(e.dir, "log.vkey")}, exitUnverifiable},
		"another log key":           {[]string{"verify", good, "--log-key", otherKey, "--policy", policyNone}, exitUnverifiable},
		"malformed log key":         {[]string{"verify", good, "--log-key", "example.com/log+00000000+AS2t66Y8jqA6iglM+/cf9SK9to/kWF5ZOKQuzBizIkt0", "--policy", policyNone}, exitUsage},
		"missing file":              {e.args("verify", filepath.Join(e.dir, "nope")), exitUnverifiable},
		"no package":                {e.args("verify"), exitUsage},
		"no log key":                {[]string{"verify", good, "--policy", policyNone}, exitUsage},
		"quorum without witnesses":  {[]string{"verify", good, "--log-key", "@" + filepath.Join(e.dir, "log.vkey"), "--quorum", "1"}, exitUsage},
		"policy and witnesses":      {e.args("verify", good, "--policy", policyNone), exitUsage},
		"quorum too high":           {e.args("verify", good, "--quorum", "3"), exitUsage},
		"witness key as log key":    {[]string{"verify", good, "--log-key", "@" + filepath.Join(e.dir, "w1.vkey"), "--policy", policyNone}, exitUsage},
	} {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := cli(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out, errOut)
			}
		})
	}
	// The JSON report is the library's report, with the exit code.
	_, out, _ := cli(t, e.args("verify", tampered, "--json")...)
	var rep struct {
		ExitCode int                  `json:"exit_code"`
		Verdict  string               `json:"verdict"`
		Findings []disclosure.Finding `json:"findings"`
		SHA256   string               `json:"sha256"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.ExitCode != exitNotSound || rep.Verdict != "not_sound" || len(rep.Findings) == 0 || rep.Findings[0].Check != disclosure.CheckRecordHash || rep.SHA256 == "" {
		t.Fatalf("json report %+v", rep)
	}
	// The human report says what was proven and what was not checked.
	_, out, _ = cli(t, e.args("verify", good)...)
	for _, want := range []string{"SOUND", "log signature  verified", "quorum met", "Proven:", "Not checked", "unsealed", "sha256"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// A package read from stdin.
	var sout, serr bytes.Buffer
	if code := run(context.Background(), e.args("verify", "-"), bytes.NewReader(raw), &sout, &serr); code != exitSound {
		t.Fatalf("stdin: %d %s", code, serr.String())
	}
}

func TestConsistencyCommand(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.addRun(false)
	e.addRun(false)
	old := e.write("old.note", string(e.note(2)))
	oldCP, _ := e.j.Checkpoint(ctx)
	e.addRun(false)
	e.addRun(false)
	e.addRun(false)
	newer := e.write("new.note", string(e.note(2)))
	newCP, _ := e.j.Checkpoint(ctx)
	p, err := e.j.ConsistencyProof(ctx, oldCP.Size, newCP.Size)
	if err != nil {
		t.Fatal(err)
	}
	hs := make([]log.Hash, len(p))
	for i, d := range p {
		hs[i] = log.Hash(d)
	}
	proof := e.write("proof.txt", string(disclosure.MarshalProofLines(hs)))
	hs[0][3] ^= 1
	bad := e.write("bad.txt", string(disclosure.MarshalProofLines(hs)))
	empty := e.write("empty.txt", "")
	garbage := e.write("garbage.txt", "not base64\n")
	weak := e.write("weak.note", string(e.note(1)))
	b64s := []string{}
	for _, d := range p {
		b64s = append(b64s, base64.StdEncoding.EncodeToString(d[:]))
	}
	js, _ := json.Marshal(map[string]any{"old_size": oldCP.Size, "new_size": newCP.Size, "proof": b64s})
	jsProof := e.write("proof.json", string(js))
	js, _ = json.Marshal(map[string]any{"old_size": oldCP.Size + 1, "new_size": newCP.Size, "proof": b64s})
	jsOther := e.write("other.json", string(js))
	for name, tc := range map[string]struct {
		args []string
		code int
	}{
		"consistent": {e.args("consistency", "--old", old, "--new", newer, proof), exitSound},
		// Issue 11 item 6: the log key given with --log-key and in the
		// policy's log line is one key.
		"key twice":            {[]string{"consistency", "--old", old, "--new", newer, proof, "--log-key", "@" + filepath.Join(e.dir, "log.vkey"), "--policy", e.fullPolicy()}, exitSound},
		"consistent, json":     {e.args("consistency", "--old", old, "--new", newer, jsProof), exitSound},
		"json for other sizes": {e.args("consistency", "--old", old, "--new", newer, jsOther), exitUnverifiable},
		"same checkpoint":      {e.args("consistency", "--old", newer, "--new", newer, empty), exitSound},
		"tampered proof":       {e.args("consistency", "--old", old, "--new", newer, bad), exitNotSound},
		"reversed":             {e.args("consistency", "--old", newer, "--new", old, proof), exitNotSound},
		"malformed proof":      {e.args("consistency", "--old", old, "--new", newer, garbage), exitNotSound},
		"quorum not met":       {e.args("consistency", "--old", old, "--new", weak, proof), exitUnverifiable},
		"missing --old":        {e.args("consistency", "--new", newer, proof), exitUsage},
		"json":                 {e.args("consistency", "--old", old, "--new", newer, proof, "--json"), exitSound},
	} {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := cli(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tc.code, out, errOut)
			}
		})
	}
}

func TestInclusionCommand(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	runs := []store.RunID{e.addRun(false), e.addRun(false), e.addRun(false)}
	n := e.note(2)
	cp, _ := e.j.Checkpoint(ctx)
	inc, err := e.j.InclusionProofAt(ctx, runs[1], cp.Size)
	if err != nil || inc == nil {
		t.Fatal(err)
	}
	hs := make([]log.Hash, len(inc.Proof))
	for i, d := range inc.Proof {
		hs[i] = log.Hash(d)
	}
	tp := &disclosure.TLogProof{Index: inc.Index, Proof: hs, Note: n}
	good := e.write("good.tlog-proof", string(tp.Marshal()))
	leaf := inc.Leaf.String()
	other := store.Sum([]byte("x")).String()
	b64 := func(d store.Digest) string { return base64.StdEncoding.EncodeToString(d[:]) }
	var ps []string
	for _, d := range inc.Proof {
		ps = append(ps, b64(d))
	}
	// The JSON journal serve answers, and the JSON journal proof --json
	// prints (which carries the signed checkpoint).
	served, _ := json.Marshal(map[string]any{"run": runs[1], "index": inc.Index, "size": inc.Size, "leaf": b64(inc.Leaf), "proof": ps})
	printed, _ := json.Marshal(map[string]any{"run": runs[1], "index": inc.Index, "size": inc.Size, "leaf": b64(inc.Leaf), "proof": ps,
		"checkpoint": map[string]any{"origin": origin, "size": cp.Size, "note": string(n)}})
	servedPath := e.write("served.json", string(served))
	printedPath := e.write("printed.json", string(printed))
	notePath := e.write("cp.note", string(n))
	e.addRun(false)
	laterNote := e.write("later.note", string(e.note(2)))
	tp.Index++
	wrongIndex := e.write("wrong.tlog-proof", string(tp.Marshal()))
	for name, tc := range map[string]struct {
		args []string
		code int
	}{
		"included":                        {e.args("inclusion", good, "--leaf", leaf), exitSound},
		"key twice":                       {[]string{"inclusion", good, "--leaf", leaf, "--log-key", "@" + filepath.Join(e.dir, "log.vkey"), "--policy", e.fullPolicy()}, exitSound},
		"served json with its checkpoint": {e.args("inclusion", servedPath, "--checkpoint", notePath, "--leaf", b64(inc.Leaf)), exitSound},
		"printed json":                    {e.args("inclusion", printedPath, "--leaf", leaf), exitSound},
		"served json, no checkpoint":      {e.args("inclusion", servedPath, "--leaf", leaf), exitUsage},
		"served json, later checkpoint":   {e.args("inclusion", servedPath, "--checkpoint", laterNote, "--leaf", leaf), exitUnverifiable},
		"printed json, other leaf":        {e.args("inclusion", printedPath, "--leaf", other), exitNotSound},
		"other leaf":                      {e.args("inclusion", good, "--leaf", other), exitNotSound},
		"wrong index":                     {e.args("inclusion", wrongIndex, "--leaf", leaf), exitNotSound},
		"bad leaf":                        {e.args("inclusion", good, "--leaf", "xyz"), exitUsage},
		"no leaf":                         {e.args("inclusion", good), exitUsage},
		"not a proof":                     {e.args("inclusion", filepath.Join(e.dir, "log.vkey"), "--leaf", leaf), exitNotSound},
	} {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := cli(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tc.code, out, errOut)
			}
		})
	}
}

func TestBench(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and verifies a package in child processes")
	}
	t.Setenv("AUDITOR_TEST_MAIN", "1")
	var out, errb bytes.Buffer
	a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, exe: os.Args[0]}
	root := a.newRoot()
	root.SetArgs([]string{"bench", "--size", "3000000", "--dir", t.TempDir()})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("bench: %v\n%s", err, errb.String())
	}
	var rep benchReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Verify.Verdict != "sound" || rep.Package.Records == 0 || rep.Verify.MBps <= 0 || rep.SHA256.MBps <= 0 || rep.Verify.PeakRSSBytes <= 0 {
		t.Fatalf("report %+v", rep)
	}
	// The start-up is measured on a package of its own; on a busy machine
	// it can exceed a small package's whole verification, and then no
	// figure beyond it is given rather than one of another run.
	if v := rep.Verify; v.StartupCPUSeconds <= 0 || (v.MBperCPUsBeyondStartup != 0 && v.MBperCPUsBeyondStartup < v.MBperCPUs) {
		t.Fatalf("start-up %+v", v)
	}
}
