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
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
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
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`body[data-state="ready"]`))); err != nil {
		t.Fatalf("opening %s: %v", url, err)
	}
	return verifyAgain(t, ctx, in)
}

// verifyAgain verifies with the page as it is (after a verification, say).
func verifyAgain(t *testing.T, ctx context.Context, in pageInput) pageResult {
	t.Helper()
	steps := []chromedp.Action[chromedp.Void]{
		// Whatever an earlier verification left in the key boxes goes.
		chromedp.Evaluate[chromedp.Void](`for (const id of ["log-key", "disclosure-key", "witness", "policy"]) document.getElementById(id).value = ""`),
		chromedp.SetValue(chromedp.CSS("#quorum"), strconv.Itoa(in.quorum)),
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
	if len(filled) > 0 {
		// Key files are read asynchronously into their text boxes.
		steps = append(steps, chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Run(ctx, chromedp.Poll[bool](strings.Join(filled, " && ")))
			return err
		}))
	}
	steps = append(steps,
		chromedp.Evaluate[chromedp.Void](`document.body.dataset.state = "submitted"`),
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
	// Issue 29: a second, failing line by the disclosure key; a statement
	// signed by a key named for another origin, that key given.
	secondSig := e.write("second-signature.jsonl", withSecondBadSignature(t, good))
	elsewhereSKey, elsewhereVKey, err := checkpoint.GenerateLogKey(rand.Reader, "other.example/log/disclosure")
	if err != nil {
		t.Fatal(err)
	}
	elsewhereFile := e.write("elsewhere-disclosure.vkey", elsewhereVKey+"\n")
	ownDisc := e.disc
	if e.disc, err = checkpoint.NewSigner(elsewhereSKey); err != nil {
		t.Fatal(err)
	}
	elsewhere := e.pkg("elsewhere.jsonl", a, b)
	e.disc = ownDisc
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
		{"second statement signature fails", keys(secondSig), "not_sound", exitNotSound, "[statement]", false},
		{"statement key named for another origin", with(keys(elsewhere), func(in *pageInput) { in.disclosure = elsewhereFile }), "unverifiable", exitUnverifiable, "statement   NOT verified", false},
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

// TestAuditorWebStaticPage: auditor web --out writes the page as static
// files, and those files, hosted by a plain file server, verify a genuine
// package in the browser.
func TestAuditorWebStaticPage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "site")
	code, out, errOut := cli(t, "web", "--out", dir)
	if code != 0 {
		t.Fatalf("auditor web: %d %s", code, errOut)
	}
	for _, f := range verifypage.Files {
		if !strings.Contains(out, filepath.Join(dir, f)) {
			t.Errorf("auditor web does not list %s:\n%s", f, out)
		}
	}
	if !strings.Contains(out, "Content-Security-Policy: "+verifypage.CSP) {
		t.Errorf("auditor web does not print the header to send:\n%s", out)
	}
	if code, _, _ := cli(t, "web"); code != exitUsage {
		t.Errorf("auditor web without --out: exit %d, want %d", code, exitUsage)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)

	e := newEnv(t)
	good := e.pkg("genuine.jsonl", e.addRun(false))
	key := func(name string) string { return filepath.Join(e.dir, name) }
	ctx := browsertest.New(t)
	got := verifyInPage(t, ctx, srv.URL+"/", pageInput{pkg: good, logKey: key("log.vkey"),
		witnesses: []string{key("w1.vkey"), key("w2.vkey")}, disclosure: key("disclosure.vkey")})
	if got.Verdict != "sound" || got.exitCode(t) != exitSound {
		t.Fatalf("static page: verdict %q exit %q\n%s%s", got.Verdict, got.Exit, got.Error, got.Report)
	}
}

// TestVerifyPageMemoryFlat_WholeFileInMemory: the page's memory does not
// grow with the package. It verifies a small package, then one of 24 MB, in
// the same page, and requires the WebAssembly memory's peak to have grown
// by less than half the second package's size: a verifier that held the
// file (or any part of it that grows with it) would grow by more.
func TestVerifyPageMemoryFlat_WholeFileInMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("verifies a 24 MB package in a browser")
	}
	dir := t.TempDir()
	small, large := filepath.Join(dir, "small.jsonl"), filepath.Join(dir, "large.jsonl")
	if _, err := generate(context.Background(), 200_000, small, dir); err != nil {
		t.Fatal(err)
	}
	keysDir := filepath.Join(dir, "k2")
	if err := os.Mkdir(keysDir, 0o755); err != nil {
		t.Fatal(err)
	}
	gen, err := generate(context.Background(), 24_000_000, large, keysDir)
	if err != nil {
		t.Fatal(err)
	}
	in := func(pkg, keys string) pageInput {
		return pageInput{pkg: pkg, logKey: filepath.Join(keys, "log.vkey"),
			witnesses: []string{filepath.Join(keys, "w1.vkey"), filepath.Join(keys, "w2.vkey")}, disclosure: filepath.Join(keys, "disclosure.vkey")}
	}
	url := pageServer(t)
	ctx := browsertest.New(t)
	first := verifyInPage(t, ctx, url, in(small, dir))
	// The same page, not reloaded: its memory is the first run's plus
	// whatever the second needs.
	second := verifyAgain(t, ctx, in(large, keysDir))
	if first.Verdict != "sound" || second.Verdict != "sound" {
		t.Fatalf("verdicts %q, %q\n%s", first.Verdict, second.Verdict, second.Report)
	}
	m1, _ := strconv.ParseInt(first.WasmBytes, 10, 64)
	m2, _ := strconv.ParseInt(second.WasmBytes, 10, 64)
	t.Logf("WebAssembly memory peak: %.1f MiB after a small package, %.1f MiB after %d bytes more", float64(m1)/(1<<20), float64(m2)/(1<<20), gen.Bytes)
	if m1 == 0 || m2-m1 > gen.Bytes/2 {
		t.Fatalf("memory grew from %d to %d bytes verifying a %d-byte package", m1, m2, gen.Bytes)
	}
}

// TestVerifyPageMemory verifies a generated genuine package of
// $RUNSEAL_BROWSER_PACKAGE_BYTES bytes in the page and logs its time and
// the peak of the verifier's WebAssembly memory (linear memory only grows,
// so its size after verifying is its peak), beside two ceilings measured
// in the same run: auditor verify on the same file natively (before and
// after), and the page's own reading of the file in the same 1 MiB slices
// with no checking. Without the variable it skips: generating and
// verifying a large package takes minutes.
func TestVerifyPageMemory(t *testing.T) {
	size, _ := strconv.ParseInt(os.Getenv("RUNSEAL_BROWSER_PACKAGE_BYTES"), 10, 64)
	if size <= 0 {
		t.Skip("set RUNSEAL_BROWSER_PACKAGE_BYTES to measure")
	}
	dir := t.TempDir()
	pkg := filepath.Join(dir, "big.jsonl")
	gen, err := generate(context.Background(), size, pkg, dir)
	if err != nil {
		t.Fatal(err)
	}
	in := pageInput{pkg: pkg, logKey: filepath.Join(dir, "log.vkey"),
		witnesses: []string{filepath.Join(dir, "w1.vkey"), filepath.Join(dir, "w2.vkey")}, disclosure: filepath.Join(dir, "disclosure.vkey")}
	native := func() float64 {
		start := time.Now()
		if code, _, errOut := cli(t, append(in.cliArgs(), "--no-progress")...); code != exitSound {
			t.Fatalf("auditor verify: %d %s", code, errOut)
		}
		return time.Since(start).Seconds()
	}
	nativeBefore := native()
	url := pageServer(t)
	ctx := longBrowser(t, time.Hour)
	got := verifyInPage(t, ctx, url, in)
	if got.Verdict != "sound" {
		t.Fatalf("verdict %q\n%s%s", got.Verdict, got.Error, got.Report)
	}
	wasm, _ := strconv.ParseInt(got.WasmBytes, 10, 64)
	secs, _ := strconv.ParseFloat(got.Seconds, 64)
	heap, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`performance.memory ? performance.memory.usedJSHeapSize : 0`))
	if err != nil {
		t.Fatal(err)
	}
	readSecs, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`(async () => {
		const f = document.getElementById("package").files[0];
		const start = performance.now();
		for (let off = 0; off < f.size; off += 1 << 20) {
			await f.slice(off, Math.min(off + (1 << 20), f.size)).arrayBuffer();
		}
		return (performance.now() - start) / 1000;
	})()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	nativeAfter := native()
	mbps := func(s float64) float64 { return float64(gen.Bytes) / s / 1e6 }
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("package %d bytes, %d records; load average %s", gen.Bytes, gen.Records, strings.TrimSpace(string(load)))
	t.Logf("browser: verified in %.1f s (%.1f MB/s); WebAssembly memory peak %.1f MiB; JS heap after %.1f MiB",
		secs, mbps(secs), float64(wasm)/(1<<20), heap/(1<<20))
	t.Logf("ceilings: reading the file in 1 MiB slices in the page %.1f s (%.0f MB/s); auditor verify natively %.1f s (%.1f MB/s) before, %.1f s (%.1f MB/s) after",
		readSecs, mbps(readSecs), nativeBefore, mbps(nativeBefore), nativeAfter, mbps(nativeAfter))
	browsertest.Screenshot(t, ctx, "big")
}

// longBrowser is browsertest.New without its two-minute bound, for the
// measurement above (a 1 GB package takes longer than that in a browser).
func longBrowser(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	path, err := browsertest.Path()
	if err != nil {
		t.Fatal(err)
	}
	base, cancelBase := context.WithTimeout(context.Background(), d)
	actx, cancelAlloc := chromedp.NewExecAllocator(base, chromedp.ExecPath(path), chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 900))
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancelCtx(); cancelAlloc(); cancelBase() })
	return ctx
}

// TestVerifyPageRefusesFraming: another site that frames the verify page
// gets nothing in its frame (frame-ancestors 'none'), so it cannot dress
// the page's verdict up as its own.
func TestVerifyPageRefusesFraming(t *testing.T) {
	target := pageServer(t)
	framer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>framer</title><iframe id="f" src="%s" width="800" height="600"></iframe>`, target)
	}))
	t.Cleanup(framer.Close)
	ctx := browsertest.New(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(framer.URL)); err != nil {
		t.Fatal(err)
	}
	// Navigate returns once the framing page has loaded, its frame with it
	// (blocked or not).
	tree, err := chromedp.Call(ctx, page.GetFrameTree, cdp.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tree.FrameTree.ChildFrames) != 1 {
		t.Fatalf("the framing page has %d frames, want 1", len(tree.FrameTree.ChildFrames))
	}
	f := tree.FrameTree.ChildFrames[0].Frame
	t.Logf("framed: url %q unreachable %q", f.URL, f.UnreachableURL)
	if strings.HasPrefix(f.URL, target) {
		t.Fatalf("the verify page loaded in another site's frame (%s)", f.URL)
	}
	if f.UnreachableURL != target {
		t.Fatalf("the frame is %q, unreachable %q: want the page refused", f.URL, f.UnreachableURL)
	}
	browsertest.Screenshot(t, ctx, "framed")
}
