package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/tiles"
)

// sealMany seals n fresh runs in db directly through the store, from
// several goroutines so that group commit batches them.
func sealMany(t *testing.T, db string, n int) {
	t.Helper()
	ctx := context.Background()
	s := openStore(t, db, nil)
	defer s.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < n; i += 16 {
				run := store.NewRunID()
				if _, err := s.Append(ctx, 1, []store.Append{
					{Run: run, Kind: store.KindRunAdmitted},
					{Run: run, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)},
				}); err != nil {
					errs <- err
					return
				}
				if _, err := s.Seal(ctx, run, 1, "succeeded"); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// dirCheckpoint reads and verifies DIR/checkpoint with the journal's key.
func dirCheckpoint(t *testing.T, db, dir string) (checkpoint.Checkpoint, bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, tiles.CheckpointPath))
	if os.IsNotExist(err) {
		return checkpoint.Checkpoint{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	a := &app{db: db}
	cp, err := a.verifyTilesCheckpoint(b, "")
	if err != nil {
		t.Fatalf("the directory's checkpoint does not verify: %v", err)
	}
	return cp, true
}

func TestTilesSyncFsckAndServe(t *testing.T) {
	db := newJournal(t)
	sealMany(t, db, 300)
	mustCLI(t, db, "", "checkpoint")
	dir := filepath.Join(t.TempDir(), "tiles")
	var res tiles.SyncResult
	if err := json.Unmarshal([]byte(mustCLI(t, db, "", "tiles", "sync", "--dir", dir, "--json")), &res); err != nil {
		t.Fatal(err)
	}
	if res.From != 0 || res.To != 300 || res.Tiles != 3 || res.Bundles != 2 {
		t.Fatalf("sync: %+v", res)
	}
	sealMany(t, db, 20)
	mustCLI(t, db, "", "checkpoint")
	out := mustCLI(t, db, "", "tiles", "sync", "--dir", dir)
	if !strings.Contains(out, "size 300 -> 320") {
		t.Fatalf("incremental sync said %q", out)
	}
	if out := mustCLI(t, db, "", "tiles", "fsck", "--dir", dir); !strings.Contains(out, "ok: size 320: 3 tiles and 2 entry bundles") {
		t.Fatalf("fsck said %q", out)
	}
	// fsck names an altered tile and fails.
	p := filepath.Join(dir, "tile", "0", "000")
	b, _ := os.ReadFile(p)
	b[5] ^= 1
	os.WriteFile(p, b, 0o644)
	r := cli(t, db, "", "tiles", "fsck", "--dir", dir)
	expect(t, r, exitFailure, "tile/0/000")

	// journal serve publishes the same layout under /tiles/<tenant>/,
	// byte for byte as sync wrote it (the good tile back in place).
	b[5] ^= 1
	os.WriteFile(p, b, 0o644)
	sv := startServe(t, db, "--public", "--checkpoint-interval", "1h", "--checkpoint-every", "1000000")
	for _, path := range []string{"tile/0/000", "tile/0/001.p/64", "tile/1/000.p/1", "tile/entries/001.p/64", "tile/0/001.p/44"} {
		resp, err := http.Get(sv.base + "/tiles/default/" + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(path)))
		if resp.StatusCode != 200 || string(body) != string(want) {
			t.Errorf("GET /tiles/default/%s: %s, %d bytes; want the %d bytes sync wrote", path, resp.Status, len(body), len(want))
		}
		if cc := resp.Header.Get("Cache-Control"); cc != tiles.CacheImmutable {
			t.Errorf("GET /tiles/default/%s: Cache-Control %q", path, cc)
		}
	}
	if code, _ := sv.do("GET", "/tiles/default/tile/0/002.p/1", "", ""); code != http.StatusNotFound {
		t.Errorf("a tile beyond the log: %d, want 404", code)
	}
	if code, _ := sv.do("GET", "/tiles/nosuch/checkpoint", "", ""); code != http.StatusNotFound {
		t.Errorf("an unknown tenant: %d, want 404", code)
	}
}

func TestTilesServeNeedsReaderUnlessPublic(t *testing.T) {
	db := newJournal(t)
	sealMany(t, db, 3)
	mustCLI(t, db, "", "checkpoint")
	tok := createToken(t, db, "default", "reader")
	other := createToken(t, db, "acme", "reader")
	sv := startServe(t, db, "--checkpoint-interval", "1h", "--checkpoint-every", "1000000")
	for _, tc := range []struct {
		token string
		want  int
	}{{"", http.StatusUnauthorized}, {other, http.StatusForbidden}, {tok, http.StatusOK}} {
		if code, body := sv.do("GET", "/tiles/default/checkpoint", tc.token, ""); code != tc.want {
			t.Errorf("token %.8q: %d %s, want %d", tc.token, code, body, tc.want)
		}
	}
}

// TestTilesSyncSIGKILL kills a real 'journal tiles sync' process after a
// random number of files, over and over while the log grows, and checks
// after every kill that the directory's checkpoint (if any) verifies and
// is backed by every tile and bundle it implies (fsck), and that the next
// sync completes from there.
func TestTilesSyncSIGKILL(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	db := newJournal(t)
	dir := filepath.Join(t.TempDir(), "tiles")
	rounds, killed := 6, 0
	if testing.Short() {
		rounds = 3
	}
	for round := range rounds {
		sealMany(t, db, 700+rand.IntN(700))
		mustCLI(t, db, "", "checkpoint")
		cmd := exec.Command(exe, "--db", db, "--log-level", "debug", "tiles", "sync", "--dir", dir)
		cmd.Env = append(os.Environ(), childEnv+"=cli")
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill after the k-th file renamed into place: an event, not a
		// timer, so the kill always lands mid-sync.
		k := 1 + rand.IntN(14) // sometimes past the last file: the sync completes
		seen := 0
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "tiles: wrote") {
				if seen++; seen == k {
					cmd.Process.Signal(syscall.SIGKILL)
					break
				}
			}
		}
		go io.Copy(io.Discard, stderr)
		cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			killed++
		}
		if cp, ok := dirCheckpoint(t, db, dir); ok {
			if _, err := tiles.Fsck(context.Background(), tiles.DirFetcher{Dir: dir}, cp.Size, cp.Root); err != nil {
				t.Fatalf("round %d: after SIGKILL after %d files, the checkpoint of size %d is not backed by its tiles: %v", round, k, cp.Size, err)
			}
			t.Logf("round %d: killed after %d files; checkpoint at %d is backed by its tiles", round, k, cp.Size)
		} else {
			t.Logf("round %d: killed after %d files; no checkpoint yet", round, k)
		}
		// Every other round, a clean sync must finish from what is there.
		if round%2 == 1 {
			mustCLI(t, db, "", "tiles", "sync", "--dir", dir)
			mustCLI(t, db, "", "tiles", "fsck", "--dir", dir)
		}
	}
	if killed == 0 {
		t.Fatal("no sync was killed mid-way")
	}
}
