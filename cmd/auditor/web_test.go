package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/runseal/runseal/audit"
	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/disclosure"
	"github.com/runseal/runseal/internal/browsertest"
	"github.com/runseal/runseal/verifypage"
)

// pageInput is what a test gives the verify page: file paths for its file
// inputs (the keys as files, as an auditor receives them).
type pageInput struct {
	pkg        string
	logKey     string
	witnesses  []string
	policy     string
	disclosure string
	quorum     int
}

// pageResult is what the page shows after verifying.
type pageResult struct {
	Verdict   string `json:"verdict"` // the verdict element's class: sound, not_sound, unverifiable or usage
	Banner    string `json:"banner"`
	Exit      string `json:"exit"`
	SHA256    string `json:"sha256"`
	Error     string `json:"error"`
	Report    string `json:"report"`
	WasmBytes string `json:"wasmBytes"`
	Seconds   string `json:"seconds"`
}

// exitCode is the exit status the page says auditor verify would end with.
func (r pageResult) exitCode(t *testing.T) int {
	t.Helper()
	n, err := strconv.Atoi(strings.Fields(r.Exit + " x")[0])
	if err != nil {
		t.Fatalf("exit %q is not a number", r.Exit)
	}
	return n
}

// verifyInPage opens the page at url in the browser of ctx, chooses the
// files through its file inputs, verifies, and reads what the page shows.
func verifyInPage(t *testing.T, ctx context.Context, url string, in pageInput) pageResult {
	t.Helper()
	steps := []chromedp.Action[chromedp.Void]{
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.CSS(`body[data-state="ready"]`)),
		chromedp.SetUploadFiles(chromedp.CSS("#package"), []string{in.pkg}),
	}
	var filled []string // the text boxes the key files fill
	upload := func(input, area string, files ...string) {
		if len(files) == 0 || files[0] == "" {
			return
		}
		steps = append(steps, chromedp.SetUploadFiles(chromedp.CSS(input), files))
		filled = append(filled, fmt.Sprintf("document.getElementById(%q).value.length > 0", area))
	}
	upload("#log-key-file", "log-key", in.logKey)
	upload("#disclosure-key-file", "disclosure-key", in.disclosure)
	upload("#witness-file", "witness", in.witnesses...)
	upload("#policy-file", "policy", in.policy)
	if in.quorum != 0 {
		steps = append(steps, chromedp.SetValue(chromedp.CSS("#quorum"), strconv.Itoa(in.quorum)))
	}
	if len(filled) > 0 {
		// Key files are read asynchronously into their text boxes.
		steps = append(steps, chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Run(ctx, chromedp.Poll[bool](strings.Join(filled, " && ")))
			return err
		}))
	}
	steps = append(steps,
		chromedp.Click(chromedp.CSS("#verify")),
		chromedp.WaitVisible(chromedp.CSS(`body[data-state="done"]`)),
	)
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("verifying %s in the page: %v", filepath.Base(in.pkg), err)
	}
	res, err := chromedp.Run(ctx, chromedp.Evaluate[pageResult](`(() => {
		const $ = (id) => document.getElementById(id);
		return {
			verdict: $("verdict").className.replace("verdict", "").trim(),
			banner: $("verdict").textContent,
			exit: $("exit").textContent,
			sha256: $("sha256").textContent,
			error: $("error").hidden ? "" : $("error").textContent,
			report: $("report").textContent,
			wasmBytes: $("memory").dataset.wasmBytes || "",
			seconds: document.body.dataset.seconds || "",
		};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// cliArgs are the auditor verify flags for the same files.
func (in pageInput) cliArgs() []string {
	args := []string{"verify", in.pkg}
	if in.logKey != "" {
		args = append(args, "--log-key", "@"+in.logKey)
	}
	for _, w := range in.witnesses {
		args = append(args, "--witness", "@"+w)
	}
	if in.policy != "" {
		args = append(args, "--policy", in.policy)
	}
	if in.disclosure != "" {
		args = append(args, "--disclosure-key", "@"+in.disclosure)
	}
	if in.quorum != 0 {
		args = append(args, "--quorum", strconv.Itoa(in.quorum))
	}
	return args
}

// pageServer serves the verify page as journal serve does.
func pageServer(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	h := verifypage.Handler("/verify")
	mux.Handle("/verify/", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/verify/"
}

// TestVerifyPageMatchesCLI verifies packages in a real browser through the
// verify page's file inputs and requires, for each, the verdict the case
// expects and exactly the report and exit status auditor verify gives on
// the same files: a genuine package, a tampered one, a file that is not a
// package, a cut package, and wrong keys of each kind.
func TestVerifyPageMatchesCLI(t *testing.T) {
	e := newEnv(t)
	a, b := e.addRun(false), e.addRun(true)
	good := e.pkg("genuine.jsonl", a, b)
	raw, _ := os.ReadFile(good)
	tampered := e.write("tampered.jsonl", string(bytes.Replace(raw, []byte(`"text":"more"`), []byte(`"text":"mote"`), 1)))
	cut := e.write("cut.jsonl", string(raw[:len(raw)*2/3]))
	notPkg := e.write("photo.jsonl", "\x89PNG\r\n\x1a\n not a package at all\n")
	_, otherLog, err := checkpoint.GenerateLogKey(rand.Reader, origin)
	if err != nil {
		t.Fatal(err)
	}
	otherLogFile := e.write("other-log.vkey", otherLog+"\n")
	malformed := e.write("malformed.vkey", "example.com/log+00000000+AS2t66Y8jqA6iglM+/cf9SK9to/kWF5ZOKQuzBizIkt0\n")
	_, otherDisc, err := checkpoint.GenerateLogKey(rand.Reader, origin+"/disclosure")
	if err != nil {
		t.Fatal(err)
	}
	otherDiscFile := e.write("other-disclosure.vkey", otherDisc+"\n")
	key := func(name string) string { return filepath.Join(e.dir, name) }
	witnesses := []string{key("w1.vkey"), key("w2.vkey")}
	keys := func(pkg string) pageInput {
		return pageInput{pkg: pkg, logKey: key("log.vkey"), witnesses: witnesses, disclosure: key("disclosure.vkey")}
	}
	with := func(in pageInput, f func(*pageInput)) pageInput { f(&in); return in }
	url := pageServer(t)
	ctx := browsertest.New(t) // one browser for every case: starting one is the slow part

	for _, tc := range []struct {
		name    string
		in      pageInput
		verdict string // the page's verdict class
		code    int
		says    string // in the report or error
		shot    bool   // leave a screenshot for a reviewer
	}{
		{"genuine", keys(good), "sound", exitSound, "genuine.jsonl: SOUND", true},
		{"genuine with a policy file", with(keys(good), func(in *pageInput) { in.witnesses, in.policy = nil, e.fullPolicy() }), "sound", exitSound, "quorum met", false},
		{"tampered", keys(tampered), "not_sound", exitNotSound, "[record_hash]", true},
		{"not a package", keys(notPkg), "not_sound", exitNotSound, "photo.jsonl: NOT SOUND", false},
		{"truncated", keys(cut), "unverifiable", exitUnverifiable, "NOT complete", true},
		{"another log's key", with(keys(good), func(in *pageInput) { in.logKey = otherLogFile }), "unverifiable", exitUnverifiable, "log signature  NOT verified", false},
		{"another disclosure key", with(keys(good), func(in *pageInput) { in.disclosure = otherDiscFile }), "unverifiable", exitUnverifiable, "statement   NOT verified", false},
		{"malformed log key", with(keys(good), func(in *pageInput) { in.logKey = malformed }), "usage", exitUsage, `--log-key "example.com/log+00000000`, true},
		{"witness key as log key", with(keys(good), func(in *pageInput) { in.logKey = witnesses[0] }), "usage", exitUsage, "give it with --witness", false},
		{"log key as disclosure key", with(keys(good), func(in *pageInput) { in.disclosure = key("log.vkey") }), "usage", exitUsage, "--disclosure-key", false},
		{"quorum too high", with(keys(good), func(in *pageInput) { in.quorum = 3 }), "usage", exitUsage, "--quorum", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := verifyInPage(t, ctx, url, tc.in)
			if tc.shot {
				browsertest.Screenshot(t, ctx, "result")
			}
			if got.Verdict != tc.verdict || got.exitCode(t) != tc.code {
				t.Fatalf("page: verdict %q, exit %q; want %q, %d\n%s\n%s", got.Verdict, got.Exit, tc.verdict, tc.code, got.Error, got.Report)
			}
			if !strings.Contains(got.Report+got.Error, tc.says) {
				t.Errorf("page does not say %q:\n%s\n%s", tc.says, got.Error, got.Report)
			}
			if !strings.HasPrefix(got.Exit, fmt.Sprintf("%d — %s", tc.code, audit.ExitMeaning(tc.code))) {
				t.Errorf("page exit %q does not give the meaning of %d", got.Exit, tc.code)
			}
			// The same files through auditor verify, in-process.
			code, out, errOut := cli(t, tc.in.cliArgs()...)
			if code != tc.code {
				t.Fatalf("auditor verify exit %d, the page says %d\n%s%s", code, tc.code, out, errOut)
			}
			out = strings.ReplaceAll(out, tc.in.pkg, filepath.Base(tc.in.pkg))
			if got.Report != out {
				t.Errorf("page report differs from auditor verify's:\npage:\n%s\ncli:\n%s", got.Report, out)
			}
			if code == exitUsage {
				// The CLI's one-line error, as the page shows it.
				first := strings.SplitN(errOut, "\n", 2)[0]
				if got.Error != first {
					t.Errorf("page error %q, auditor verify says %q", got.Error, first)
				}
				return
			}
			if got.SHA256 == "" || !strings.Contains(out, "sha256 "+got.SHA256) {
				t.Errorf("page SHA-256 %q is not the report's", got.SHA256)
			}
			if !strings.HasSuffix(got.Banner, audit.Headline(disclosure.Verdict(tc.verdict))) {
				t.Errorf("banner %q is not the headline for %s", got.Banner, tc.verdict)
			}
		})
	}
}
