package storetest

// Chaining: seqs contiguous from 1, each prev_hash the previous hash, each
// hash covering the stored bytes.

import (
	"bytes"
	"strings"
	"sync"

	"github.com/runseal/runseal/store"
)

func checkGenesisHead(t *T) {
	j, _ := t.Open()
	h := t.head(j, store.NewRunID())
	if h != (store.Head{}) {
		t.Fatalf("head of an unknown run = %+v, want genesis {0, zero}", h)
	}
}

func checkContiguousSeq(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	var got []store.Seq
	for i := 0; i < 3; i++ {
		for _, r := range t.append(j, 1, note(run, "a"), note(run, "b")) {
			got = append(got, r.Seq)
		}
	}
	for i, s := range got {
		if s != store.Seq(i+1) {
			t.Fatalf("seqs = %v, want 1..6", got)
		}
	}
	if h := t.head(j, run); h.Seq != 6 {
		t.Fatalf("head seq = %d, want 6", h.Seq)
	}
}

func checkLinks(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	t.append(j, 1, note(run, "a"))
	t.append(j, 1, note(run, "b"), note(run, "c"))
	recs, err := j.Read(t.ctx, run, 1)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	prev := store.ZeroDigest
	for _, r := range recs {
		if r.PrevHash != prev {
			t.Fatalf("seq %d prev_hash %s, want %s", r.Seq, r.PrevHash, prev)
		}
		prev = r.Hash
	}
	if h := t.head(j, run); h.Hash != prev {
		t.Fatalf("head hash %s, want last record's %s", h.Hash, prev)
	}
}

func checkHashCoversRaw(t *T) {
	j, _ := t.Open()
	run, c := store.NewRunID(), store.NewCaseID()
	step := uint32(7)
	k := key("e")
	in := []store.Append{
		{Run: run, Case: c, Step: &step, Kind: "StepStarted", Fields: []byte(`{"b":2, "a":[1,2]}`)},
		{Run: run, Phase: store.Compensating, EffectKey: &k, Kind: "EffectDone", Fields: []byte(`{"output":{"n":18446744073709551615}}`)},
	}
	recs := t.append(j, 3, in...)
	read, err := j.Read(t.ctx, run, 1)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	for i, r := range read {
		if store.ChainHash(r.PrevHash, r.Raw) != r.Hash {
			t.Errorf("seq %d: hash does not cover prev||raw", r.Seq)
		}
		if !bytes.Equal(r.Raw, recs[i].Raw) || r.Hash != recs[i].Hash {
			t.Errorf("seq %d: read back different bytes than append returned", r.Seq)
		}
		b, err := store.DecodeBody(r.Raw)
		if err != nil {
			t.Errorf("seq %d: raw does not decode: %v", r.Seq, err)
			continue
		}
		if b.Epoch != 3 || b.Run != run || b.Kind != in[i].Kind || b.V != store.RecordVersion {
			t.Errorf("seq %d: body %+v does not carry what was appended", r.Seq, b)
		}
	}
	// The integer must come back exactly in the fields a read returns, and
	// in the stored bytes too unless the store seals them (then Raw holds
	// the field's envelope, and Fields its opened value).
	if !strings.Contains(string(read[1].Fields), `18446744073709551615`) {
		t.Errorf("integer beyond 2^53 not read back exactly: %s", read[1].Fields)
	}
	if !j.Seals() && !strings.Contains(string(read[1].Raw), `18446744073709551615`) {
		t.Errorf("integer beyond 2^53 not written exactly: %s", read[1].Raw)
	}
	if read[0].Case != c || read[0].Step == nil || *read[0].Step != 7 || read[1].Phase != store.Compensating || read[1].EffectKey == nil || *read[1].EffectKey != k {
		t.Errorf("routing fields lost: %+v / %+v", read[0].Body, read[1].Body)
	}
}

func checkVerify(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	t.append(j, 1, note(run, "a"), note(run, "b"))
	recs := t.append(j, 1, note(run, "c"))
	d, err := j.Verify(t.ctx, run)
	if err != nil {
		t.Fatalf("Verify of a sound chain: %v", err)
	}
	if d != recs[0].Hash {
		t.Fatalf("Verify = %s, want head %s", d, recs[0].Hash)
	}
	_, err = j.Verify(t.ctx, store.NewRunID())
	expect[*store.NotFoundError](t, err, "Verify of an unknown run")
}

func checkConcurrentOneRun(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	const writers, each = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if _, err := j.Append(t.ctx, 1, []store.Append{note(run, "x"), note(run, "y")}); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent append: %v", err)
	}
	if h := t.head(j, run); h.Seq != writers*each*2 {
		t.Fatalf("head seq = %d, want %d", h.Seq, writers*each*2)
	}
	if _, err := j.Verify(t.ctx, run); err != nil {
		t.Fatalf("chain after concurrent appends: %v", err)
	}
}
