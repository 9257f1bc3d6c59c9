package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/runseal/runseal/store"
)

// TestBackupWhileAppending copies a journal while another writer appends to
// it, and the copy holds every record acknowledged before the backup began,
// verifies on its own, and covers every tenant of the file.
func TestBackupWhileAppending(t *testing.T) {
	db, _ := sealedJournal(t, 3)
	mustCLI(t, "", line(store.NewRunID(), "Note", ""), "--db", db, "--tenant", "acme", "append", "--epoch", "1")
	run := store.NewRunID()

	var acked atomic.Int64
	stop := make(chan struct{})
	done := make(chan error, 1)
	firstAcks := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if r := cli(t, db, line(run, "Note", ""), "append", "--epoch", "1"); r.code != 0 {
				done <- errors.New(r.stderr)
				return
			}
			if acked.Add(1) == 5 {
				close(firstAcks)
			}
		}
	}()
	<-firstAcks
	before := acked.Load()
	out := filepath.Join(t.TempDir(), "copy.db")
	r := cli(t, db, "", "backup", "--out", out, "--json")
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("writer failed during the backup: %v", err)
	}
	expect(t, r, exitOK)
	var rep backupReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("backup --json: %v\n%s", err, r.stdout)
	}
	if len(rep.Tenants) != 2 || rep.Tenants[0].Tenant != "acme" || rep.Tenants[1].Tenant != store.DefaultTenant {
		t.Fatalf("backup verified tenants %+v, want acme and default", rep.Tenants)
	}
	if rep.Bytes == 0 || rep.Out != out {
		t.Errorf("report %+v", rep)
	}
	// The copy stands alone: verify --all passes on it, and it holds at
	// least what was acknowledged before the backup started.
	mustCLI(t, out, "", "verify", "--all")
	h := head(t, out, run)
	if int64(h.Seq) < before {
		t.Errorf("copy holds %d records of the appended run, but %d were acknowledged before the backup began", h.Seq, before)
	}
	if _, err := os.Stat(out + ".partial"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the partial copy was left behind: %v", err)
	}
}

// TestBackup_CorruptJournalIsNotReportedDone: a copy of a journal whose
// Merkle log was edited does not verify, so backup exits 1 and leaves no
// file that looks like a backup.
func TestBackup_CorruptJournalIsNotReportedDone(t *testing.T) {
	db, _ := sealedJournal(t, 3)
	if _, err := rawSQL(t, db).Exec(`UPDATE log_nodes SET hash = zeroblob(32) WHERE level = 0 AND idx = 1`); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "copy.db")
	r := cli(t, db, "", "backup", "--out", out)
	expect(t, r, exitFailure, "did not verify", "node (0, 1)")
	for _, p := range []string{out, out + ".partial"} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists after a failed backup", p)
		}
	}
}

func TestBackupRefusals(t *testing.T) {
	db := newJournal(t)
	existing := filepath.Join(t.TempDir(), "there.db")
	if err := os.WriteFile(existing, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	expect(t, cli(t, db, "", "backup"), exitUsage, "--out")
	expect(t, cli(t, db, "", "backup", "--out", existing), exitFailure, "already exists")
	if b, _ := os.ReadFile(existing); string(b) != "keep me" {
		t.Errorf("backup changed an existing file: %q", b)
	}
	expect(t, cli(t, "", "", "--store", "postgres://u@h/db", "backup", "--out", existing), exitUsage, "pg_dump")
}
