package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/runseal/runseal/store"
)

// sealedJournal makes a journal with n runs each concluded and sealed
// (outcomes succeeded, quarantined, cancelled in turn), a signed checkpoint
// after the second seal and one after the last, and returns the runs in
// seal order (run i holds log index i).
func sealedJournal(t *testing.T, n int) (string, []store.RunID) {
	t.Helper()
	db := newJournal(t)
	outcomes := []string{"succeeded", "quarantined", "cancelled"}
	var runs []store.RunID
	for i := range n {
		run := store.NewRunID()
		o := outcomes[i%3]
		mustCLI(t, db, line(run, "Note", "")+line(run, "RunConcluded", `"outcome":"`+o+`"`), "append", "--epoch", "1")
		mustCLI(t, db, "", "seal", run.String(), "--epoch", "1", "--outcome", o)
		runs = append(runs, run)
		if i == 1 || i == n-1 {
			mustCLI(t, db, "", "checkpoint")
		}
	}
	return db, runs
}

// TestVerifyAllStatesItsScope: a sound journal verifies, and the output says
// what was checked, with counts, in text and in the JSON summary.
func TestVerifyAllStatesItsScope(t *testing.T) {
	db, _ := sealedJournal(t, 5)
	r := cli(t, db, "", "verify", "--all")
	expect(t, r, exitOK, "chains: 5 runs, 0 failed", "seals: 5 sealed runs", "log: 5 leaves, 8 stored nodes recomputed",
		"checkpoints: 2 signed checkpoints", "all intact")
	r = cli(t, db, "", "verify", "--all", "--json")
	expect(t, r, exitOK)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	var last struct{ Summary verifySummary }
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatal(err)
	}
	want := verifySummary{Runs: 5, LogReport: store.LogReport{Size: 5, Sealed: 5, Nodes: 8, Checkpoints: 2}, LogOK: true}
	if last.Summary != want {
		t.Errorf("summary = %+v, want %+v", last.Summary, want)
	}
}

// Each test below edits the journal file directly, as anyone who can write
// it can, and requires verify --all to exit 1 naming what broke.

func attackVerifyAll(t *testing.T, sqlText string, args func(runs []store.RunID) []any, want ...string) {
	t.Helper()
	db, runs := sealedJournal(t, 5)
	mustCLI(t, db, "", "verify", "--all")
	if _, err := rawSQL(t, db).Exec(sqlText, args(runs)...); err != nil {
		t.Fatal(err)
	}
	r := cli(t, db, "", "verify", "--all")
	expect(t, r, exitFailure, append([]string{"verification FAILED"}, want...)...)
	if strings.Contains(r.stderr, "all intact") {
		t.Errorf("a failed verify says all intact: %s", r.stderr)
	}
	r = cli(t, db, "", "verify", "--all", "--json")
	expect(t, r, exitFailure)
}

func noArgs([]store.RunID) []any { return nil }

func TestVerifyAll_ZeroedLogNode(t *testing.T) {
	attackVerifyAll(t, `UPDATE log_nodes SET hash = zeroblob(32) WHERE level = 1 AND idx = 0`, noArgs, "node (1, 0)")
}

func TestVerifyAll_ZeroedLeafHash(t *testing.T) {
	attackVerifyAll(t, `UPDATE log_nodes SET hash = zeroblob(32) WHERE level = 0 AND idx = 3`, noArgs, "node (0, 3)")
}

func TestVerifyAll_DeletedLogNode(t *testing.T) {
	attackVerifyAll(t, `DELETE FROM log_nodes WHERE level = 2 AND idx = 0`, noArgs, "level 2")
}

func TestVerifyAll_ExtraLogNode(t *testing.T) {
	attackVerifyAll(t, `INSERT INTO log_nodes(tenant, level, idx, hash) VALUES('default', 0, 7, zeroblob(32))`, noArgs, "level 0 holds 6 nodes")
}

func TestVerifyAll_ChangedSealedOutcome(t *testing.T) {
	attackVerifyAll(t, `UPDATE runs SET sealed_outcome = 'succeeded' WHERE run = ?`,
		func(r []store.RunID) []any { return []any{r[1].String()} }, "for 1 of 5 runs", `sealed as "succeeded"`)
}

func TestVerifyAll_ChangedOutcomeIndex(t *testing.T) {
	attackVerifyAll(t, `UPDATE runs SET outcome = 'failed' WHERE run = ?`,
		func(r []store.RunID) []any { return []any{r[0].String()} }, "for 1 of 5 runs", "outcome index")
}

func TestVerifyAll_DeletedSealRow(t *testing.T) {
	attackVerifyAll(t, `UPDATE runs SET sealed_outcome = NULL, sealed_at = NULL, log_index = NULL, leaf = NULL WHERE run = ?`,
		func(r []store.RunID) []any { return []any{r[2].String()} }, "index 2 is held by no sealed run")
}

func TestVerifyAll_SwappedLogIndexes(t *testing.T) {
	attackVerifyAll(t, `UPDATE runs SET log_index = 100 WHERE log_index = 0;
		UPDATE runs SET log_index = 0 WHERE log_index = 1; UPDATE runs SET log_index = 1 WHERE log_index = 100`, noArgs, "node (0, 0)")
}

func TestVerifyAll_ShrunkLogSize(t *testing.T) {
	attackVerifyAll(t, `UPDATE logs SET size = 4`, noArgs, "beyond the log's 4 leaves")
}

func TestVerifyAll_ForgedSignedRoot(t *testing.T) {
	attackVerifyAll(t, `UPDATE signed_checkpoints SET root = zeroblob(32) WHERE size = 2`, noArgs, "signed checkpoint 2")
}

// TestVerifyAll_ForgedCheckpointRootAndNote replaces a signed checkpoint's
// root and the root in its note together, as a forger of another history
// would: the log's own root at that size gives it away.
func TestVerifyAll_ForgedCheckpointRootAndNote(t *testing.T) {
	db, _ := sealedJournal(t, 5)
	raw := rawSQL(t, db)
	var note []byte
	if err := raw.QueryRow(`SELECT note FROM signed_checkpoints WHERE size = 5`).Scan(&note); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitN(string(note), "\n", 4)
	forged := store.Sum([]byte("another history"))
	lines[2] = b64(forged)
	if _, err := raw.Exec(`UPDATE signed_checkpoints SET root = ?, note = ? WHERE size = 5`, forged[:], []byte(strings.Join(lines, "\n"))); err != nil {
		t.Fatal(err)
	}
	expect(t, cli(t, db, "", "verify", "--all"), exitFailure, "signed checkpoint 5", "not the signed root")
}

// TestVerifyAll_BothBrokenReportsBoth: a broken chain does not hide a broken
// log, nor the other way round.
func TestVerifyAll_BothBrokenReportsBoth(t *testing.T) {
	db, runs := sealedJournal(t, 3)
	raw := rawSQL(t, db)
	for _, q := range []string{
		fmt.Sprintf(`UPDATE records SET hash = zeroblob(32) WHERE run = '%s' AND seq = 1`, runs[0]),
		`UPDATE log_nodes SET hash = zeroblob(32) WHERE level = 1 AND idx = 0`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	expect(t, cli(t, db, "", "verify", "--all"), exitFailure, "for 1 of 3 runs", "and for the log", "node (1, 0)")
}

// TestVerifyAll_DeletedRunRowHidesRecords deletes the runs row of an open
// run and then rewrites one of its records: verify --all walks the listed
// runs, so before it checked for records of unlisted runs it said "all
// intact" about a journal holding a broken chain.
func TestVerifyAll_DeletedRunRowHidesRecords(t *testing.T) {
	db, _ := sealedJournal(t, 2)
	open := store.NewRunID()
	mustCLI(t, db, line(open, "Note", "")+line(open, "Note", ""), "append", "--epoch", "1")
	mustCLI(t, db, "", "verify", "--all")
	raw := rawSQL(t, db)
	if _, err := raw.Exec(`DELETE FROM runs WHERE run = ?`, open.String()); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`UPDATE records SET hash = zeroblob(32) WHERE run = ? AND seq = 2`, open.String()); err != nil {
		t.Fatal(err)
	}
	r := cli(t, db, "", "verify", "--all")
	expect(t, r, exitFailure, "verification FAILED", open.String(), "not listed among the journal's runs")
	if strings.Contains(r.stderr, "all intact") {
		t.Errorf("a failed verify says all intact: %s", r.stderr)
	}
}
