// Package verifypage is the in-browser package verifier: an HTML page, its
// script and style, Go's wasm_exec.js, and cmd/verify-wasm built to
// WebAssembly, all embedded. journal serve answers it at /verify without a
// token (Handler); auditor web writes it out as static files (WriteFiles).
//
// The page verifies in the browser, reading the chosen file in slices, and
// uploads nothing: the only requests it makes are for its own files, and its
// Content-Security-Policy (CSP) allows no others, no inline script, and no
// framing.
//
// The WebAssembly binary cannot be built by "go build", so it is committed
// (gzipped, as assets/verify.wasm.gz) with a stamp of the sources it was
// built from (assets/verify.wasm.stamp); "go generate ./verifypage"
// rebuilds both, and TestWasmCurrent fails when the committed build is
// stale.
package verifypage

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

//go:generate go run gen.go

//go:embed assets/index.html assets/verify.js assets/verify.css assets/wasm_exec.js assets/verify.wasm.gz
var assets embed.FS

// CSP is the Content-Security-Policy the page is served with: its own
// scripts and WebAssembly only, no inline script, requests to its own
// origin only (it fetches nothing but its files), and no framing.
// index.html carries the same policy, less frame-ancestors (which a meta
// element cannot carry), for copies hosted elsewhere.
const CSP = "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Files are the page's files, by the names they are served under.
var Files = []string{"index.html", "verify.js", "verify.css", "wasm_exec.js", "verify.wasm"}

// wasmGz is the embedded name of verify.wasm, gzipped.
const wasmGz = "verify.wasm.gz"

type file struct {
	data  []byte // as served; for verify.wasm, gzipped
	gz    bool
	etag  string
	ctype string
}

var (
	loadOnce sync.Once
	files    map[string]*file
	loadErr  error
)

func load() (map[string]*file, error) {
	loadOnce.Do(func() {
		files = map[string]*file{}
		for _, name := range Files {
			src, gz := name, false
			if name == "verify.wasm" {
				src, gz = wasmGz, true
			}
			b, err := assets.ReadFile("assets/" + src)
			if err != nil {
				loadErr = err
				return
			}
			sum := sha256.Sum256(b)
			files[name] = &file{data: b, gz: gz, etag: `"` + hex.EncodeToString(sum[:12]) + `"`, ctype: contentType(name)}
		}
	})
	return files, loadErr
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".wasm":
		return "application/wasm"
	}
	return "application/octet-stream"
}

// Handler serves the page at base (say "/verify"): base redirects to
// base + "/", which is index.html, and base + "/<file>" each of Files. It
// answers GET and HEAD, without any credential, and sets the CSP, nosniff,
// no-referrer and DENY framing headers on every answer. Files are
// revalidated by ETag, so a new build is picked up at once.
func Handler(base string) http.Handler {
	base = strings.TrimSuffix(base, "/")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		rest, ok := strings.CutPrefix(r.URL.Path, base)
		switch {
		case !ok:
			http.NotFound(w, r)
			return
		case rest == "":
			http.Redirect(w, r, base+"/", http.StatusMovedPermanently)
			return
		case rest == "/":
			rest = "/index.html"
		}
		all, err := load()
		if err != nil {
			http.Error(w, "the verify page is missing from this build", http.StatusInternalServerError)
			return
		}
		f, ok := all[rest[1:]]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h.Set("Content-Type", f.ctype)
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", f.etag)
		if !f.gz {
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.data))
			return
		}
		h.Add("Vary", "Accept-Encoding")
		if acceptsGzip(r) {
			h.Set("Content-Encoding", "gzip")
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.data))
			return
		}
		// A client that cannot take gzip gets it decompressed, streaming.
		if match := r.Header.Get("If-None-Match"); match == f.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		zr, err := gzip.NewReader(bytes.NewReader(f.data))
		if err != nil {
			http.Error(w, "the verify page's build is corrupt", http.StatusInternalServerError)
			return
		}
		if r.Method == http.MethodHead {
			return
		}
		_, _ = io.Copy(w, zr)
	})
}

// acceptsGzip reports whether the request's Accept-Encoding takes gzip
// (every browser's does).
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(coding), "gzip") || strings.TrimSpace(coding) == "*" {
			q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}

// Open returns one of Files, as served to a client that does not take
// gzip (verify.wasm decompressed).
func Open(name string) (io.ReadCloser, error) {
	all, err := load()
	if err != nil {
		return nil, err
	}
	f, ok := all[name]
	if !ok {
		return nil, fmt.Errorf("verifypage: no file %q: %w", name, os.ErrNotExist)
	}
	if !f.gz {
		return io.NopCloser(bytes.NewReader(f.data)), nil
	}
	return gzip.NewReader(bytes.NewReader(f.data))
}

// WriteFiles writes the page's files into dir (created if need be) as
// static files any web server can host: index.html, its script, style,
// wasm_exec.js and verify.wasm. Existing files of those names are replaced;
// nothing else in dir is touched.
func WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range Files {
		if err := writeFile(filepath.Join(dir, name), name); err != nil {
			return err
		}
	}
	return nil
}

// writeFile writes one file through a temporary name, so a server hosting
// dir never serves half a file.
func writeFile(dst, name string) error {
	src, err := Open(name)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+name+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", dst, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}
