package main

import (
	"context"
	"testing"

	"github.com/runseal/runseal/store/sqlite"
)

// verify --all on a SQLite journal reads through the store's own Checker
// (off the read pool's memory map), so that a pass over the whole file
// does not stay resident (store/sqlite TestChecker_ReadsOffTheMap).
func TestVerifyAll_SQLiteReadsOffTheMap(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, newJournal(t), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := wholeFileChecker(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(*sqlite.Checker); !ok {
		t.Fatalf("verify --all checks a SQLite journal through %T, not its sqlite.Checker", c)
	}
}
