// Package browsertest gives tests a real headless Chromium, driven through
// the DevTools protocol with chromedp, and a place to leave screenshots for
// a reviewer.
//
// The browser is the one named by $RUNSEAL_CHROMIUM, else the first of
// chromium, chromium-browser and google-chrome on PATH (.ci/chromium.sh
// installs Debian's chromium when none is there). A test that needs a
// browser and cannot have one fails with the reason: a page whose browser
// test silently skipped has not been tested. Set RUNSEAL_SKIP_BROWSER=1 to
// skip browser tests on purpose.
//
// Every browser gets its own profile in a temporary directory, so no
// cookie, storage or cache crosses from one test to another.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The environment variables this package reads.
const (
	EnvChromium    = "RUNSEAL_CHROMIUM"       // path of the browser binary
	EnvSkip        = "RUNSEAL_SKIP_BROWSER"   // "1": skip browser tests instead of failing them
	EnvScreenshots = "RUNSEAL_SCREENSHOT_DIR" // where screenshots go; default $TMPDIR/runseal-screenshots
)

// Timeout bounds one test's whole use of its browser (generous: CI runs
// other packages' tests beside it on 2 cores), so a page that never
// finishes loading fails the test instead of hanging the run.
const Timeout = 5 * time.Minute

// Path returns the browser binary to use, or an error saying how to get one.
func Path() (string, error) {
	if p := os.Getenv(EnvChromium); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("browsertest: $%s=%q: %w", EnvChromium, p, err)
		}
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("browsertest: no Chromium found: install Debian's chromium (bash .ci/chromium.sh), set $%s to a browser binary, or set %s=1 to skip browser tests on purpose", EnvChromium, EnvSkip)
}

// New starts a headless browser for t and returns a context for chromedp
// actions in its first tab. The browser is stopped, and its profile removed,
// when t ends. A test without a browser fails, or skips if RUNSEAL_SKIP_BROWSER=1.
func New(t testing.TB) context.Context {
	t.Helper()
	if os.Getenv(EnvSkip) == "1" {
		t.Skipf("browsertest: %s=1", EnvSkip)
	}
	path, err := Path()
	if err != nil {
		t.Fatal(err)
	}
	opts := append([]chromedp.ExecAllocatorOption{},
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		// CI runs as root, where Chromium's sandbox cannot start.
		chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("mute-audio", true),
		chromedp.WindowSize(1280, 900),
	)
	base, cancelBase := context.WithTimeout(context.Background(), Timeout)
	actx, cancelAlloc := chromedp.NewExecAllocator(base, opts...)
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	// Start the browser now, so a browser that cannot start fails here
	// with its own error rather than in the test's first action.
	if err := chromedp.Do(ctx); err != nil {
		cancelCtx()
		cancelAlloc()
		cancelBase()
		t.Fatalf("browsertest: starting %s: %v", path, err)
	}
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
		cancelBase()
	})
	return ctx
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// Screenshot writes a full-page PNG of the current tab to
// $RUNSEAL_SCREENSHOT_DIR/<test name>/<name>.png (the directory defaults to
// runseal-screenshots in the system's temporary directory) and logs where.
// Screenshots are for a reviewer's eyes; they are never compared.
func Screenshot(t testing.TB, ctx context.Context, name string) string {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("browsertest: screenshot %q: %v", name, err)
	}
	dir := os.Getenv(EnvScreenshots)
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "runseal-screenshots")
	}
	dir = filepath.Join(dir, unsafeName.ReplaceAllString(t.Name(), "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("browsertest: %v", err)
	}
	file := filepath.Join(dir, unsafeName.ReplaceAllString(name, "_")+".png")
	if err := os.WriteFile(file, png, 0o644); err != nil {
		t.Fatalf("browsertest: %v", err)
	}
	t.Logf("screenshot: %s", file)
	return file
}
