package browsertest

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserRunsScriptAndScreenshots proves the harness drives a real
// browser: the page's script runs (so the text read back is not the
// served HTML's), and the screenshot is a PNG file.
func TestBrowserRunsScriptAndScreenshots(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(`<!doctype html><title>t</title><p id="out">served</p>` +
			`<script>document.getElementById("out").textContent = "ran " + (6*7);</script>`))
	}))
	defer srv.Close()

	ctx := New(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL)); err != nil {
		t.Fatal(err)
	}
	text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#out")))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(text) != "ran 42" {
		t.Fatalf("page text = %q, want the script's %q", text, "ran 42")
	}
	t.Setenv(EnvScreenshots, t.TempDir())
	file := Screenshot(t, ctx, "page")
	png, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("%s is not a PNG", file)
	}
}
