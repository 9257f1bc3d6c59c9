package verifypage

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/runseal/runseal/verifypage/internal/wasmbuild"
)

func committedStamp(t *testing.T) wasmbuild.Stamp {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("assets", wasmbuild.StampTxt))
	if err != nil {
		t.Fatal(err)
	}
	st, err := wasmbuild.ParseStamp(b)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func readAll(t *testing.T, name string) []byte {
	t.Helper()
	rc, err := Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWasmCurrent fails when the committed verify.wasm was not built from
// the sources in this tree: the page would then verify with other code than
// auditor verify. The fix is "go generate ./verifypage". It compares the
// stamp of the sources (go list, seconds) rather than rebuilding (minutes
// on a busy machine); RUNSEAL_WASM_REBUILD=1 also rebuilds and compares the
// bytes (TestWasmReproducible).
func TestWasmCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	st := committedStamp(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	src, err := wasmbuild.Sources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if src != st.Sources {
		t.Fatalf("the committed verify.wasm is stale: it was built from sources %s, the tree's are %s; run: go generate ./verifypage", st.Sources, src)
	}
	wasm := readAll(t, "verify.wasm")
	if got := wasmbuild.Hash(wasm); got != st.Wasm || int64(len(wasm)) != st.Bytes {
		t.Fatalf("embedded verify.wasm is %s (%d bytes), the stamp says %s (%d bytes): commit the files go generate wrote together", got, len(wasm), st.Wasm, st.Bytes)
	}
	if !bytes.HasPrefix(wasm, []byte("\x00asm")) {
		t.Fatal("verify.wasm is not WebAssembly")
	}
	if runtime.Version() == st.Toolchain {
		want, err := os.ReadFile(filepath.Join(runtime.GOROOT(), "lib", "wasm", "wasm_exec.js"))
		if err == nil && !bytes.Equal(want, readAll(t, "wasm_exec.js")) {
			t.Fatalf("wasm_exec.js is not %s's, which built verify.wasm: run go generate ./verifypage", st.Toolchain)
		}
	}
}

// TestWasmReproducible rebuilds verify.wasm and requires the committed
// bytes: Go's builds are reproducible with -trimpath, so the same toolchain
// and sources give the same binary on any machine. Set
// RUNSEAL_WASM_REBUILD=1 (minutes).
func TestWasmReproducible(t *testing.T) {
	if os.Getenv("RUNSEAL_WASM_REBUILD") != "1" {
		t.Skip("set RUNSEAL_WASM_REBUILD=1 to rebuild verify.wasm")
	}
	st := committedStamp(t)
	if runtime.Version() != st.Toolchain {
		t.Skipf("verify.wasm was built with %s; this is %s", st.Toolchain, runtime.Version())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	got, err := wasmbuild.Build(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got.Wasm != st.Wasm {
		t.Fatalf("a rebuild gives %s (%d bytes), the committed build is %s (%d bytes): run go generate ./verifypage", got.Wasm, got.Bytes, st.Wasm, st.Bytes)
	}
}

// TestIndexNoInlineScript: every script is a file of the page's own, and
// the page's meta policy is CSP (less frame-ancestors), so a copy hosted
// without our headers still runs no inline or foreign script.
func TestIndexNoInlineScript(t *testing.T) {
	html := string(readAll(t, "index.html"))
	scripts := regexp.MustCompile(`<script[^>]*>`).FindAllString(html, -1)
	if len(scripts) == 0 {
		t.Fatal("index.html has no script")
	}
	for _, s := range scripts {
		m := regexp.MustCompile(`src="([^"]+)"`).FindStringSubmatch(s)
		if m == nil || strings.Contains(m[1], ":") || strings.HasPrefix(m[1], "/") {
			t.Errorf("script %s is not one of the page's own files", s)
		}
	}
	if regexp.MustCompile(`<script[^>]*>[^<]+</script>`).MatchString(html) || regexp.MustCompile(`\son[a-z]+=`).MatchString(html) {
		t.Error("index.html has inline script")
	}
	want := strings.TrimSuffix(CSP, "; frame-ancestors 'none'")
	if !strings.Contains(html, `http-equiv="Content-Security-Policy" content="`+want+`"`) {
		t.Errorf("index.html's meta policy is not %q", want)
	}
}

func TestHandler(t *testing.T) {
	srv := httptest.NewServer(Handler("/verify"))
	defer srv.Close()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(method, path string, hdr map[string]string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		req.Header.Set("Accept-Encoding", "identity") // Go's client would add gzip and undo it
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.Header.Get("Content-Security-Policy") != CSP || resp.Header.Get("X-Frame-Options") != "DENY" ||
			resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s %s: headers %v lack the policy", method, path, resp.Header)
		}
		return resp, b
	}
	resp, _ := get("GET", "/verify", nil)
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/verify/" {
		t.Errorf("GET /verify = %d to %q, want a redirect to /verify/", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, body := get("GET", "/verify/", nil)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !bytes.Contains(body, []byte("verify.js")) {
		t.Errorf("GET /verify/ = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	wasm := readAll(t, "verify.wasm")
	resp, body = get("GET", "/verify/verify.wasm", nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/wasm" || !bytes.Equal(body, wasm) {
		t.Errorf("GET verify.wasm without gzip = %d %s, %d bytes, want %d", resp.StatusCode, resp.Header.Get("Content-Type"), len(body), len(wasm))
	}
	resp, body = get("GET", "/verify/verify.wasm", map[string]string{"Accept-Encoding": "gzip, deflate, br"})
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("GET verify.wasm with gzip: Content-Encoding %q", resp.Header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if unz, _ := io.ReadAll(zr); !bytes.Equal(unz, wasm) {
		t.Error("gzipped verify.wasm does not decompress to verify.wasm")
	}
	etag := resp.Header.Get("ETag")
	if resp, _ = get("GET", "/verify/verify.wasm", map[string]string{"Accept-Encoding": "gzip", "If-None-Match": etag}); resp.StatusCode != http.StatusNotModified {
		t.Errorf("revalidation = %d, want 304", resp.StatusCode)
	}
	for _, p := range []string{"/verify/nope.js", "/verify/../go.mod", "/verify/assets/index.html", "/verifyx"} {
		if resp, _ = get("GET", p, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", p, resp.StatusCode)
		}
	}
	if resp, _ = get("POST", "/verify/", nil); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST = %d, want 405", resp.StatusCode)
	}
}

func TestWriteFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "site")
	if err := WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != len(Files) {
		t.Fatalf("wrote %d files, want %v (no temporaries left)", len(ents), Files)
	}
	for _, name := range Files {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, readAll(t, name)) {
			t.Errorf("%s differs from the served file", name)
		}
	}
	st := committedStamp(t)
	b, _ := os.ReadFile(filepath.Join(dir, "verify.wasm"))
	if wasmbuild.Hash(b) != st.Wasm {
		t.Error("the written verify.wasm is not the stamped build")
	}
}
