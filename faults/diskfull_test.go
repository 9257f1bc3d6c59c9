package faults

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runseal/runseal/store/sqlite"
)

// mountTmpfs mounts a tmpfs of size (mount's notation, "8m") on a fresh
// directory and unmounts it when t ends.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

func remount(t *testing.T, dir, size string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,size="+size, dir).CombinedOutput(); err != nil {
		t.Fatalf("remount tmpfs: %v: %s", err, out)
	}
}

// TestFault_DiskFullUnderServe fills the filesystem under a serving SQLite
// journal: appends must be refused with an answer that names the full
// disk (507), not a bare 500; once space returns, appends succeed again
// without a restart, every acknowledged write is there, and the log
// verifies.
func TestFault_DiskFullUnderServe(t *testing.T) {
	campaign(t)
	needRoot(t)
	dir := mountTmpfs(t, "8m")
	db := filepath.Join(dir, "j.db")
	token := newJournal(t, db)
	srv := serve(t, db, token, "--checkpoint-every", "1", "--checkpoint-interval", "1s")
	ctx := context.Background()
	got := newAcks()

	var full error
	for i := 0; i < 1000 && full == nil; i++ {
		full = runOnce(ctx, srv.client, got, 4, 8, 16<<10)
	}
	if full == nil {
		t.Fatal("8 MiB never filled")
	}
	t.Logf("disk full after %d acknowledged records, %d seals: %v", got.records(), got.seals(), full)
	if !isDiskFull(full) || !strings.Contains(strings.ToLower(full.Error()), "full") {
		t.Fatalf("a full disk answered %v; want 507 naming the full disk\n%s", full, tail(srv.lines(), 10))
	}
	// Refused again while full, not stuck in some other state.
	if err := runOnce(ctx, srv.client, got, 1, 8, 16<<10); !isDiskFull(err) {
		t.Fatalf("second append on a full disk: %v; want 507", err)
	}
	if !strings.Contains(srv.lines(), "full") {
		t.Errorf("serve logged nothing naming the full disk:\n%s", srv.lines())
	}

	remount(t, dir, "64m")
	for i := range 5 {
		if err := runOnce(ctx, srv.client, got, 2, 4, 1<<10); err != nil {
			t.Fatalf("run %d after space returned, no restart: %v\n%s", i, err, tail(srv.lines(), 20))
		}
	}
	srv.kill()
	s, err := sqlite.Open(ctx, db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkAcked(t, s, got)
	checkSigned(t, s)
	s.Close()
	verifyAll(t, db)
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	l := strings.Split(s, "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}
