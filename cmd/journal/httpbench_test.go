package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/mod/sumdb/note"
)

// TestBenchHTTPReport runs 'bench --http' end to end on a tiny load: a
// child 'journal serve' (this test binary acting as the CLI), driven by
// clients each on their own leased run, beside the store's own rate.
func TestBenchHTTPReport(t *testing.T) {
	t.Setenv(childEnv, "cli") // children of this process run the CLI
	r := cli(t, "", "", "bench", "--http", "--json", "--dir", t.TempDir(), "--duration", "200ms", "--concurrency", "2,5")
	expect(t, r, exitOK)
	var rep httpBenchReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("bench --http --json is not one JSON document: %v\n%s", err, r.stdout)
	}
	if len(rep.Points) != 2 || rep.Record < 150 || rep.Record > 250 {
		t.Fatalf("report: %+v", rep)
	}
	for _, p := range rep.Points {
		if p.Max.Done == 0 || p.Max.Failed != 0 || p.Open.Done == 0 || p.Open.Failed != 0 || p.Open.Offered <= 0 || p.Store.RecordsPerSec <= 0 || p.Ratio <= 0 {
			t.Errorf("clients %d: %+v", p.Clients, p)
		}
	}
}

// TestBenchHTTPReport_TesseraPeerInAlternatingRounds runs 'bench --http --tessera-posix' with
// a stand-in for Tessera's conformance server (this test binary, taking
// the same flags and checking the note key it is given): every point gets
// the peer's figures from the same run, and the ratio beside them.
func TestBenchHTTPReport_TesseraPeerInAlternatingRounds(t *testing.T) {
	t.Setenv(childEnv, "cli")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "tessera-posix")
	script := "#!/bin/sh\nJOURNAL_TEST_CHILD=tessera exec '" + exe + "' \"$@\"\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "", "", "bench", "--http", "--json", "--dir", t.TempDir(), "--duration", "200ms", "--concurrency", "3", "--rounds", "2", "--tessera-posix", bin)
	expect(t, r, exitOK)
	var rep httpBenchReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("bench --http --json is not one JSON document: %v\n%s", err, r.stdout)
	}
	if len(rep.Points) != 1 || rep.Points[0].Tessera == nil {
		t.Fatalf("report has no peer figures: %s", r.stdout)
	}
	p := rep.Points[0]
	if tp := p.Tessera; tp.Max.Done == 0 || tp.Max.Failed != 0 || tp.Open.Done == 0 || tp.Ratio <= 0 || tp.RoundRatio <= 0 {
		t.Fatalf("peer point: %+v", tp)
	}
	// The rounds alternate which server goes first, so neither always
	// meets the other's leftovers or the machine's later load.
	if len(p.Rounds) != 2 || p.Rounds[0].PeerFirst || !p.Rounds[1].PeerFirst {
		t.Fatalf("rounds: %+v, want 2, the peer first in the second", p.Rounds)
	}
	for _, rd := range p.Rounds {
		if rd.Journal <= 0 || rd.Peer <= 0 {
			t.Fatalf("round without both rates: %+v", rd)
		}
	}
}

// fakeTessera stands in for Tessera's cmd/conformance/posix: the same
// flags, a note signer key it must be able to load, POST /add answering an
// index, GET /checkpoint.
func fakeTessera(args []string) int {
	fs := flag.NewFlagSet("tessera", flag.ContinueOnError)
	dir := fs.String("storage_dir", "", "")
	listen := fs.String("listen", "", "")
	keyFile := fs.String("private_key", "", "")
	if err := fs.Parse(args); err != nil || *dir == "" || *listen == "" {
		return 2
	}
	key, err := os.ReadFile(*keyFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := note.NewSigner(string(key)); err != nil {
		fmt.Fprintln(os.Stderr, "private key:", err)
		return 1
	}
	var mu sync.Mutex
	seen := map[string]uint64{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /add", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		idx, dup := seen[string(b)]
		if !dup {
			idx = uint64(len(seen))
			seen[string(b)] = idx
		}
		mu.Unlock()
		if dup {
			http.Error(w, "duplicate entry: a fair load sends each once", http.StatusConflict)
			return
		}
		fmt.Fprintf(w, "%d", idx)
	})
	mux.HandleFunc("GET /checkpoint", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "fake\n") })
	if err := http.ListenAndServe(*listen, mux); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
