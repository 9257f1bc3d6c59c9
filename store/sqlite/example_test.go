package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sqlite"
)

// A program journals one run, seals it, and proves the sealed run is in the
// tenant's Merkle log, as the README's library example shows.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "runseal-example")
	defer os.RemoveAll(dir)

	j, err := sqlite.Open(ctx, filepath.Join(dir, "runseal.db"), sqlite.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer j.Close()

	run := store.NewRunID()
	_, err = j.Append(ctx, 1, []store.Append{
		{Run: run, Kind: store.KindRunAdmitted, Fields: []byte(`{"source":"api"}`)},
		{Run: run, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)},
	})
	fmt.Println("appended:", err)

	leaf, _ := j.Seal(ctx, run, 1, "succeeded")
	cp, _ := j.Checkpoint(ctx)
	p, _ := j.InclusionProof(ctx, run)
	hashes := make([]log.Hash, len(p.Proof))
	for i, h := range p.Proof {
		hashes[i] = log.Hash(h)
	}
	err = log.VerifyInclusion(log.Hash(leaf), p.Index, cp.Size, hashes, log.Hash(cp.Root))
	fmt.Println("log size:", cp.Size, "run included:", err == nil)
	// Output:
	// appended: <nil>
	// log size: 1 run included: true
}
