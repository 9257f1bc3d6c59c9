package disclosure

import (
	"testing"

	"github.com/runseal/runseal/store"
)

// TestWorkerChunk_PairedChainHashes: the workers hash record lines two at
// a time (sha256x2). Every chained line's hash must be SHA-256(used || raw)
// of its own line, whatever line it was paired with: an odd line out, lines
// of different lengths, a chunk cut at every place (so each chunk's first
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
			for _, e := range w.chunk(part.b, part.lineStart, nil) {
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
