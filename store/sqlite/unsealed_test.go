package sqlite

import (
	"context"
	"encoding/hex"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// TestUnsealedByEdit_OldJournalIsIndexedOnOpen: a version 6 journal, made
// before the log's leaves were indexed by hash, whose run was sealed and
// then unsealed by an edit while it was closed, gets the index when this
// version opens it, and the lookup every write to an open run makes
// (qLeafIndex) reads the index, not every leaf; the run's Verify and an
// append to it are refused.
func TestUnsealedByEdit_OldJournalIsIndexedOnOpen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	run := store.NewRunID()
	if _, err := s.Append(ctx, 1, []store.Append{note(run, "a"), {Run: run, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Seal(ctx, run, 1, "succeeded"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Make the file what version 6 wrote, then remove the run's seal.
	tamper(t, path, `DROP INDEX log_leaf_hashes`)
	tamper(t, path, `UPDATE meta SET value='6' WHERE key='schema'`)
	tamper(t, path, `UPDATE runs SET sealed_outcome = NULL, sealed_at = NULL, log_index = NULL, leaf = NULL WHERE run = ?`, run.String())

	s = open(t, path, Options{})
	var version string
	queryFile(t, path, `SELECT value FROM meta WHERE key='schema'`, &version)
	if version != "7" {
		t.Fatalf("schema version after open = %s, want 7", version)
	}
	// Both lookups, a write's and Verify's, search the index.
	for _, q := range []struct {
		query string
		args  []any
	}{{qLeafIndex, []any{"default", make([]byte, 32)}}, {qRunLeaves, []any{`["00"]`, "default"}}} {
		plan := strings.Join(queryPlan(t, s, q.query, q.args...), "\n")
		if !strings.Contains(plan, "SEARCH n USING COVERING INDEX log_leaf_hashes") && !strings.Contains(plan, "SEARCH log_nodes USING COVERING INDEX log_leaf_hashes") {
			t.Errorf("the plan of %q is %q, want a search of log_leaf_hashes", q.query, plan)
		}
	}
	head, err := s.Head(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	var ce *store.CorruptError
	if _, err := s.Verify(ctx, run); !errors.As(err, &ce) {
		t.Fatalf("Verify of the unsealed run = %v, want a *store.CorruptError", err)
	}
	if _, err := s.Append(ctx, 1, []store.Append{note(run, "b")}); !errors.As(err, &ce) || ce.Seq != head.Seq {
		t.Fatalf("Append to the unsealed run = %v, want a *store.CorruptError at its head seq %d", err, head.Seq)
	}
	lh := log.LeafHash(log.Hash(head.Hash))
	var idx int64
	queryFile(t, path, `SELECT idx FROM log_nodes INDEXED BY log_leaf_hashes WHERE level = 0 AND hash = x'`+hex.EncodeToString(lh[:])+`'`, &idx)
	if idx != 0 || !strings.Contains(ce.Detail, "leaf 0") {
		t.Fatalf("the run's leaf is at %d; the refusal says %q", idx, ce.Detail)
	}
}
