//go:build unix

package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/runseal/runseal/store"
)

// TestBackup_FileIsOwnerOnly: a backup holds every record of the journal,
// so under the common umask 022 it is still 0600, as the journal is, not
// the -rw-r--r-- SQLite gives a file it creates; and it is a whole copy.
// The umask is the process's, so the test is not parallel.
func TestBackup_FileIsOwnerOnly(t *testing.T) {
	ctx := context.Background()
	s, _ := sealedRuns(t, 20)
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dst := filepath.Join(t.TempDir(), "copy.db")
	if err := s.Backup(ctx, dst); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Fatalf("backup written with mode %v under umask 022, want -rw-------", fi.Mode())
	}
	c, err := Open(ctx, dst, Options{NoWarm: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sum, err := store.VerifyAll(ctx, c, nil)
	if err != nil || sum.Runs != 20 || sum.Failed != 0 || !sum.LogOK {
		t.Fatalf("the copy: %+v %v, want 20 runs intact", sum, err)
	}
	if err := s.Backup(ctx, dst); err == nil {
		t.Fatal("a second backup onto the first was not refused")
	}
}
