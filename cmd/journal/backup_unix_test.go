//go:build unix

package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestBackup_FileIsOwnerOnly: journal backup, under the common umask 022,
// leaves a backup of mode 0600 like the journal it copies (the copy is
// written under a temporary name and renamed into place). The umask is
// the process's, so the test is not parallel.
func TestBackup_FileIsOwnerOnly(t *testing.T) {
	db, _ := sealedJournal(t, 2)
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	out := filepath.Join(t.TempDir(), "copy.db")
	expect(t, cli(t, db, "", "backup", "--out", out), exitOK)
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("journal backup wrote %s with mode %v under umask 022, want -rw-------", out, fi.Mode())
	}
}
