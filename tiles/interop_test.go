package tiles

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/tessera/client"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// cTileReader is an x/mod tlog.TileReader over a C2SP tlog-tiles HTTP
// prefix: x/mod's tiles of height 8 are C2SP's, at paths without the
// height ("tile/L/N" rather than "tile/8/L/N").
type cTileReader struct {
	base  string
	reads int
}

func (r *cTileReader) Height() int { return 8 }

func (r *cTileReader) ReadTiles(ts []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(ts))
	for i, t := range ts {
		if t.H != 8 || t.L < 0 {
			return nil, fmt.Errorf("unexpected tile %+v", t)
		}
		p := fmt.Sprintf("%s/tile/%d/%s", r.base, t.L, formatIndex(uint64(t.N)))
		if t.W != 256 {
			p += fmt.Sprintf(".p/%d", t.W)
		}
		resp, err := http.Get(p)
		if err != nil {
			return nil, err
		}
		b, err := readBounded(resp.Body, "tile/")
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %s", p, resp.Status)
		}
		r.reads++
		out[i] = b
	}
	return out, nil
}

func (r *cTileReader) SaveTiles([]tlog.Tile, [][]byte) {}

type sized struct {
	size uint64
	root tlog.Hash
}

// TestInterop_XModAndTessera grows a log across tile boundaries (sizes
// that are and are not multiples of 256, past 65,536) and, at every size,
// has two clients we did not write read our tiles over HTTP and build and
// verify inclusion and consistency proofs against our signed checkpoint:
// golang.org/x/mod/sumdb/tlog (TileHashReader, ProveRecord, CheckRecord,
// ProveTree, CheckTree) and Tessera's client (ProofBuilder,
// LogStateTracker, GetEntryBundle).
func TestInterop_XModAndTessera(t *testing.T) {
	ctx := context.Background()
	m := newMemLog(t)
	srv := serveMem(t, m)
	verifier, err := note.NewVerifier(m.vkey)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(srv.URL + "/")
	fetcher, err := client.NewHTTPFetcher(u, srv.Client())
	if err != nil {
		t.Fatal(err)
	}

	var tracker *client.LogStateTracker
	var seen []sized
	for _, step := range []int{1, 4, 250, 1, 1, 43, 700, 64535, 2, 4463} {
		m.grow(t, step)
		// The checkpoint as any tlog client reads it: Tessera's fetch
		// parses it and checks our log signature with x/mod's verifier.
		cp, raw, _, err := client.FetchCheckpoint(ctx, fetcher.ReadCheckpoint, verifier, m.origin)
		if err != nil {
			t.Fatalf("FetchCheckpoint: %v", err)
		}
		size := cp.Size
		if size != m.size() {
			t.Fatalf("checkpoint size %d, log size %d", size, m.size())
		}
		var root tlog.Hash
		copy(root[:], cp.Hash)

		thr := tlog.TileHashReader(tlog.Tree{N: int64(size), Hash: root}, &cTileReader{base: srv.URL})
		pb, err := client.NewProofBuilder(ctx, size, fetcher.ReadTile)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range []uint64{0, size / 3, size / 2, size - 1} {
			// The entry, from its bundle, as Tessera reads it.
			b, err := client.GetEntryBundle(ctx, fetcher.ReadEntryBundle, i/256, size)
			if err != nil {
				t.Fatalf("size %d: GetEntryBundle(%d): %v", size, i/256, err)
			}
			entry := b.Entries[i%256]
			if want := leafValue(i); string(entry) != string(want[:]) {
				t.Fatalf("size %d: entry %d is %x, want the leaf value %x", size, i, entry, want)
			}
			// x/mod.
			p, err := tlog.ProveRecord(int64(size), int64(i), thr)
			if err != nil {
				t.Fatalf("size %d: tlog.ProveRecord(%d): %v", size, i, err)
			}
			if err := tlog.CheckRecord(p, int64(size), root, int64(i), tlog.RecordHash(entry)); err != nil {
				t.Fatalf("size %d: tlog.CheckRecord(%d): %v", size, i, err)
			}
			// Tessera.
			tp, err := pb.InclusionProof(ctx, i)
			if err != nil {
				t.Fatalf("size %d: ProofBuilder.InclusionProof(%d): %v", size, i, err)
			}
			if err := proof.VerifyInclusion(rfc6962.DefaultHasher, i, size, rfc6962.DefaultHasher.HashLeaf(entry), tp, cp.Hash); err != nil {
				t.Fatalf("size %d: Tessera's inclusion proof of %d does not verify: %v", size, i, err)
			}
		}
		for _, old := range seen {
			p, err := tlog.ProveTree(int64(size), int64(old.size), thr)
			if err != nil {
				t.Fatalf("tlog.ProveTree(%d, %d): %v", size, old.size, err)
			}
			if err := tlog.CheckTree(p, int64(size), root, int64(old.size), old.root); err != nil {
				t.Fatalf("tlog.CheckTree(%d, %d): %v", size, old.size, err)
			}
			tp, err := pb.ConsistencyProof(ctx, old.size, size)
			if err != nil {
				t.Fatalf("ProofBuilder.ConsistencyProof(%d, %d): %v", old.size, size, err)
			}
			if err := proof.VerifyConsistency(rfc6962.DefaultHasher, old.size, size, tp, old.root[:], cp.Hash); err != nil {
				t.Fatalf("Tessera's consistency proof %d..%d does not verify: %v", old.size, size, err)
			}
		}
		// Tessera's LogStateTracker follows the log, proving each step
		// consistent with the last.
		if tracker == nil {
			tracker, err = client.NewLogStateTracker(ctx, fetcher.ReadTile, raw, verifier, m.origin, client.UnilateralConsensus(fetcher.ReadCheckpoint))
			if err != nil {
				t.Fatalf("NewLogStateTracker: %v", err)
			}
		} else {
			if _, _, _, err := tracker.Update(ctx); err != nil {
				t.Fatalf("LogStateTracker.Update to size %d: %v", size, err)
			}
		}
		if got := tracker.Latest().Size; got != size {
			t.Fatalf("LogStateTracker at size %d, want %d", got, size)
		}
		seen = append(seen, sized{size, root})
	}
	if last := seen[len(seen)-1].size; last != 70000 {
		t.Fatalf("grew to %d, the steps should reach 70000", last)
	}
}

// TestInterop_TesseraDetectsFork serves a log whose checkpoint was
// replaced by one of a different tree of a larger size: Tessera's
// LogStateTracker, reading our tiles, must refuse it as inconsistent.
func TestInterop_TesseraDetectsFork(t *testing.T) {
	ctx := context.Background()
	m := newMemLog(t)
	srv := serveMem(t, m)
	verifier, _ := note.NewVerifier(m.vkey)
	u, _ := url.Parse(srv.URL + "/")
	fetcher, _ := client.NewHTTPFetcher(u, srv.Client())
	m.grow(t, 300)
	_, raw, _, err := client.FetchCheckpoint(ctx, fetcher.ReadCheckpoint, verifier, m.origin)
	if err != nil {
		t.Fatal(err)
	}
	tracker, err := client.NewLogStateTracker(ctx, fetcher.ReadTile, raw, verifier, m.origin, client.UnilateralConsensus(fetcher.ReadCheckpoint))
	if err != nil {
		t.Fatal(err)
	}
	// Another tree, signed by the same key: the log forked.
	fork := newMemLog(t)
	fork.signer, fork.verifier, fork.vkey = m.signer, m.verifier, m.vkey
	fork.salt = 1
	fork.grow(t, 1)
	fork.grow(t, 400)
	m.mu.Lock()
	m.nodes, m.leaves, m.latest = fork.nodes, fork.leaves, fork.latest
	m.mu.Unlock()
	_, _, _, err = tracker.Update(ctx)
	var inc client.ErrInconsistency
	if !errors.As(err, &inc) {
		t.Fatalf("Update after a fork: %v, want ErrInconsistency", err)
	}
	if _, _, _, err := log.ParseCheckpoint(inc.LargerRaw, m.origin, verifier); err != nil {
		t.Fatalf("the evidence's larger checkpoint does not verify: %v", err)
	}
}
