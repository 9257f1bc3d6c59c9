package disclosure

import (
	"crypto/sha256"
	"testing"

	"github.com/runseal/runseal/disclosure/internal/sha256x2"
	"github.com/runseal/runseal/store"
)

// TestWorkerChunk_PairedChainHashes: the workers hash record lines beside
// the file's digest and two at a time (sha256x2). Every chained line's
// hash must be SHA-256(used || raw) of its own line, whatever it was paired
// with, and the chunk's digest its own: an odd line out, lines of
// different lengths, a chunk cut at every place (so each chunk's first
// lines, run blocks and pairs shift).
func TestWorkerChunk_PairedChainHashes(t *testing.T) {
	pkg, _ := smallPackage(t)
	w := (&examiner{}).worker()
	chained := 0
	for cut := 0; cut < len(pkg); cut += 7 {
		for _, part := range []struct {
			b         []byte
			lineStart bool
		}{{pkg[:cut], true}, {pkg[cut:], cut == 0 || pkg[cut-1] == '\n'}} {
			d := sha256x2.New()
			turn := func(jobs []sha256x2.Job) int { return d.WriteWith(part.b, jobs) }
			ex := w.chunk(part.b, part.lineStart, nil, turn)
			if got, want := d.Sum(), sha256.Sum256(part.b); got != want {
				t.Fatalf("cut at %d: the chunk's digest is %x, crypto/sha256 says %x", cut, got, want)
			}
			for _, e := range ex {
				if !e.chained {
					continue
				}
				chained++
				raw := part.b[e.off+e.rawStart : e.off+e.rawEnd]
				if want := store.ChainHash(e.used, raw); e.chain != want {
					t.Fatalf("cut at %d: the line at %d has chain hash %s, SHA-256(used || raw) is %s", cut, e.off, e.chain, want)
				}
			}
		}
	}
	if chained == 0 {
		t.Fatal("no chained line was examined")
	}
}
