package benchjournal

import (
	"context"
	"reflect"
	"testing"

	"github.com/runseal/runseal/internal/canon"
	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// Generated records are canonical, decode to the bodies ReadPage returns,
// chain to the heads, and the sealed heads are the log's leaves.
func TestGenerated(t *testing.T) {
	ctx := context.Background()
	j, err := New(Spec{Origin: "bench.example/log", Runs: 7, RecordsPerRun: 5, PayloadBytes: 100, UnsealedEvery: 3})
	if err != nil {
		t.Fatal(err)
	}
	cp, _ := j.Checkpoint(ctx)
	if cp.Size != 5 {
		t.Fatalf("size %d", cp.Size)
	}
	runs, _ := j.CaseRuns(ctx, j.Case, nil, 4)
	more, _ := j.CaseRuns(ctx, j.Case, &runs[3], 4)
	if len(runs) != 4 || len(more) != 3 {
		t.Fatalf("case pages %d %d", len(runs), len(more))
	}
	for _, run := range append(runs, more...) {
		h, _ := j.Head(ctx, run)
		recs, err := j.ReadPage(ctx, run, 1, 3)
		if err != nil {
			t.Fatal(err)
		}
		rest, _ := j.ReadPage(ctx, run, 4, 100)
		v := store.NewChainVerifier(run)
		for _, r := range append(recs, rest...) {
			if !canon.IsCanonical(r.Raw) {
				t.Fatalf("not canonical: %s", r.Raw)
			}
			b, err := store.DecodeBody(r.Raw)
			if err != nil || !reflect.DeepEqual(b, r.Body) {
				t.Fatalf("body %+v, decoded %+v (%v)", r.Body, b, err)
			}
			if err := v.Next(r); err != nil {
				t.Fatal(err)
			}
		}
		if v.Head() != h {
			t.Fatalf("head %v, chain %v", h, v.Head())
		}
		inc, _ := j.InclusionProofAt(ctx, run, cp.Size)
		if inc != nil {
			ps := make([]log.Hash, len(inc.Proof))
			for i, p := range inc.Proof {
				ps[i] = log.Hash(p)
			}
			if err := log.VerifyInclusion(log.Hash(h.Hash), inc.Index, cp.Size, ps, log.Hash(cp.Root)); err != nil {
				t.Fatal(err)
			}
		}
	}
}
