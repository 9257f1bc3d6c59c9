package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/runseal/runseal/disclosure"
	"github.com/runseal/runseal/store"
)

// TestRestore_CutByStoreFailureSaysResume: a restore cut by its store (a
// PostgreSQL restart broke the connection) tells the operator to run it
// again with --resume; a refusal of the file, the target or the rebuilt
// log, which --resume would not fix, does not.
func TestRestore_CutByStoreFailureSaysResume(t *testing.T) {
	for _, c := range []struct {
		name   string
		err    error
		resume bool
	}{
		{"store connection lost", errors.New("postgres journal: checkpoint: read log size: write: broken pipe"), true},
		{"commit unknown", &store.CommitUnknownError{Detail: "connection reset"}, true},
		{"refused", &disclosure.RestoreRefusedError{Reason: "the target is not empty"}, false},
		{"cut file", &disclosure.CutError{Line: 3}, false},
		{"unfaithful", &disclosure.UnfaithfulRestoreError{}, false},
		{"corrupt", &store.CorruptError{Detail: "chain"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := restoreFailed(c.err)
			if !errors.Is(err, c.err) {
				t.Fatalf("%v does not wrap %v", err, c.err)
			}
			if got := strings.Contains(err.Error(), "--resume"); got != c.resume {
				t.Errorf("restoreFailed(%v) = %q; names --resume: %v, want %v", c.err, err, got, c.resume)
			}
		})
	}
}
