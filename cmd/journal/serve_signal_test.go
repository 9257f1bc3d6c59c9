//go:build unix

package main

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeSIGTERM: a real serve process answers, then on SIGTERM drains
// and exits 0, and the journal it leaves verifies.
func TestServeSIGTERM(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "j.db")
	cmd := exec.Command(exe, "serve", "--db", db, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), childEnv+"=cli")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	var base string
	var lines []string
	for sc.Scan() {
		l := sc.Text()
		lines = append(lines, l)
		if _, url, ok := strings.Cut(l, " on http://"); ok && strings.Contains(l, "serving") {
			base = "http://" + url
			break
		}
	}
	if base == "" {
		t.Fatalf("serve never said where it listens:\n%s", strings.Join(lines, "\n"))
	}
	go func() {
		for sc.Scan() {
		}
	}()
	resp, err := http.Get(base + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve after SIGTERM: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not stop after SIGTERM")
	}
	mustCLI(t, db, "", "verify", "--all")
}
