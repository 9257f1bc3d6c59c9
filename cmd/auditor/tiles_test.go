package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/monitor"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sqlite"
	"github.com/runseal/runseal/tiles"
)

// envTiles publishes an env's journal as tlog-tiles: its current
// checkpoint signed by the log and both witnesses (so it meets the
// env's 2-of-2 policy) as both checkpoint and checkpoint-witnessed, and
// its tiles from the sqlite store.
type envTiles struct {
	mu   sync.Mutex
	e    *env
	j    *sqlite.Store
	swap map[string][]byte // served instead of the real resource
}

func (s *envTiles) LatestCheckpoint(ctx context.Context) (*store.SignedCheckpoint, error) {
	cp, err := s.store().Checkpoint(ctx)
	if err != nil {
		return nil, err
	}
	return &store.SignedCheckpoint{Size: cp.Size, Root: cp.Root, Note: s.e.signNote(cp, 2)}, nil
}

func (s *envTiles) LatestWitnessed(ctx context.Context) (*store.SignedCheckpoint, error) {
	return s.LatestCheckpoint(ctx)
}

func (s *envTiles) LogLeaves(ctx context.Context, start, end uint64) ([]store.Digest, error) {
	return s.store().LogLeaves(ctx, start, end)
}

func (s *envTiles) LogNodes(ctx context.Context, level uint, start, end uint64) ([]store.Digest, error) {
	return s.store().LogNodes(ctx, level, start, end)
}

func (s *envTiles) store() *sqlite.Store {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.j
}

func (s *envTiles) set(j *sqlite.Store, swap map[string][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.j, s.swap = j, swap
}

func (e *env) serveTiles() (*envTiles, string) {
	et := &envTiles{e: e, j: e.j}
	h := tiles.NewHandler(tiles.NewLog(et), nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		et.mu.Lock()
		b, ok := et.swap[strings.TrimPrefix(r.URL.Path, "/")]
		et.mu.Unlock()
		if ok {
			w.Write(b)
			return
		}
		h.ServeHTTP(w, r)
	}))
	e.t.Cleanup(srv.Close)
	return et, srv.URL + "/"
}

func (e *env) tileBytes(p string) []byte {
	e.t.Helper()
	r, err := tiles.ParsePath(p)
	if err != nil {
		e.t.Fatal(err)
	}
	cp, _ := e.j.Checkpoint(context.Background())
	b, err := tiles.NewLog(&envTiles{e: e, j: e.j}).Resource(context.Background(), r, cp.Size)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

func monitorTilesOnce(t *testing.T, e *env, loc, state string) (int, checkResult) {
	t.Helper()
	code, out, errOut := cli(t, e.args("monitor", "--tiles", loc, "--state", state, "--once", "--json")...)
	var res checkResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("monitor output %q (stderr %q): %v", out, errOut, err)
	}
	if res.Code != code {
		t.Fatalf("printed exit code %d, exited %d", res.Code, code)
	}
	return code, res
}

// TestMonitorTiles follows a log through its tiles across a tile boundary,
// then is fed a partial tile wider than the checkpoint implies (no
// verdict, the tile named, state unchanged), then a fork (exit 4).
func TestMonitorTiles(t *testing.T) {
	e := newEnv(t)
	for range 3 {
		e.addRun(false)
	}
	et, url := e.serveTiles()
	state := filepath.Join(t.TempDir(), "state")
	if code, res := monitorTilesOnce(t, e, url, state); code != exitSound || res.Result != "started" {
		t.Fatalf("first check: %d %+v", code, res)
	}
	for range 300 {
		e.addRun(false)
	}
	if code, res := monitorTilesOnce(t, e, url, state); code != exitSound || res.Result != "advanced" || res.Size != 303 {
		t.Fatalf("across a tile boundary: %d %+v", code, res)
	}
	for range 5 {
		e.addRun(false)
	}
	// 308: the edge tile is tile/0/001.p/52; serve it one hash wider.
	wide := append(e.tileBytes("tile/0/001.p/52"), make([]byte, 32)...)
	et.set(e.j, map[string][]byte{"tile/0/001.p/52": wide})
	code, res := monitorTilesOnce(t, e, url, state)
	if code != exitUnverifiable || !strings.Contains(res.Message, "tile/0/001.p/52") {
		t.Fatalf("a partial tile wider than the checkpoint implies: %d %+v", code, res)
	}
	// A tile whose hashes do not lead to the signed root.
	bad := e.tileBytes("tile/0/001.p/52")
	bad[40] ^= 1
	et.set(e.j, map[string][]byte{"tile/0/001.p/52": bad})
	if code, res := monitorTilesOnce(t, e, url, state); code != exitUnverifiable || !strings.Contains(res.Message, "tile/0/001.p/52") {
		t.Fatalf("a tile that does not lead to the root: %d %+v", code, res)
	}
	if savedSize(t, e, state) != 303 {
		t.Fatal("a bad tile moved the state")
	}
	et.set(e.j, nil)
	if code, res := monitorTilesOnce(t, e, url, state); code != exitSound || res.Size != 308 {
		t.Fatalf("good tiles again: %d %+v", code, res)
	}
	// A fork: another history of a larger size, under the same keys.
	fj := forked(t, e, 0)
	saved := e.j
	e.j = fj
	for range 320 {
		e.addRun(false)
	}
	e.j = saved
	et.set(fj, nil)
	code, res = monitorTilesOnce(t, e, url, state)
	if code != exitFork || res.Result != "fork" || res.Evidence == "" {
		t.Fatalf("fork over tiles: %d %+v", code, res)
	}
	if savedSize(t, e, state) != 308 {
		t.Fatal("state moved to the forked checkpoint")
	}
	// The evidence stands alone: the proof verifies from the prefix root
	// it names to the served signed root, and that is not the saved root.
	b, err := os.ReadFile(res.Evidence)
	if err != nil {
		t.Fatal(err)
	}
	var ev monitor.Evidence
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	savedN, _ := e.policy.Verify([]byte(ev.Saved.Note), e.logV)
	served, err := e.policy.Verify([]byte(ev.Served.Note), e.logV)
	if savedN == nil || err != nil {
		t.Fatalf("evidence notes do not verify: %v", err)
	}
	var proof []log.Hash
	for _, p := range ev.Proof {
		h, _ := parseB64(p)
		proof = append(proof, h)
	}
	i := strings.Index(ev.Reason, "leaves the root ")
	if i < 0 || len(ev.Reason) < i+16+64 {
		t.Fatalf("the fork evidence does not name the served tree's root at the saved size: %s", ev.Reason)
	}
	xb, _ := hex.DecodeString(ev.Reason[i+16 : i+16+64])
	a, c := savedN.Checkpoint(), served.Checkpoint()
	if err := log.VerifyConsistency(a.Size, c.Size, log.Hash(xb), c.Root, proof); err != nil || log.Hash(xb) == a.Root {
		t.Fatalf("the evidence does not show the served tree's prefix differs from the saved root: %v (%s)", err, ev.Reason)
	}
}

func TestInclusionAndConsistencyFromTiles(t *testing.T) {
	e := newEnv(t)
	for range 3 {
		e.addRun(false)
	}
	old := e.write("old.note", string(e.note(2)))
	for range 297 {
		e.addRun(false)
	}
	et, url := e.serveTiles()
	dir := t.TempDir()
	if _, err := tiles.Sync(context.Background(), tiles.NewLog(et), dir, tiles.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	leaves, err := e.j.LogLeaves(context.Background(), 0, 300)
	if err != nil {
		t.Fatal(err)
	}
	for _, loc := range []string{url, dir} {
		for _, i := range []int{0, 255, 299} {
			code, out, errOut := cli(t, e.args("inclusion", "--tiles", loc, "--index", strconv.Itoa(i), "--leaf", hex.EncodeToString(leaves[i][:]))...)
			if code != exitSound {
				t.Fatalf("inclusion of %d from %s: %d %s %s", i, loc, code, out, errOut)
			}
		}
		// Another run's leaf at that index is not included there.
		code, out, _ := cli(t, e.args("inclusion", "--tiles", loc, "--index", "7", "--leaf", hex.EncodeToString(leaves[8][:]))...)
		if code != exitNotSound {
			t.Fatalf("a wrong leaf: %d %s", code, out)
		}
		code, out, errOut := cli(t, e.args("consistency", "--old", old, "--tiles", loc)...)
		if code != exitSound || !strings.Contains(out, "VERIFIED") {
			t.Fatalf("consistency from %s: %d %s %s", loc, code, out, errOut)
		}
	}
	// A level-0 tile of the wrong size: named, no verdict.
	et.set(e.j, map[string][]byte{"tile/0/000": e.tileBytes("tile/0/000")[:100]})
	code, out, _ := cli(t, e.args("inclusion", "--tiles", url, "--index", "5", "--leaf", hex.EncodeToString(leaves[5][:]))...)
	if code != exitUnverifiable || !strings.Contains(out, "tile/0/000") {
		t.Fatalf("a short tile: %d %s", code, out)
	}
	// Usage: PROOF and --tiles are exclusive; --tiles needs --index.
	if code, _, _ := cli(t, e.args("inclusion", "p.json", "--tiles", url, "--index", "1", "--leaf", hex.EncodeToString(leaves[1][:]))...); code != exitUsage {
		t.Errorf("PROOF with --tiles: %d, want usage", code)
	}
	if code, _, _ := cli(t, e.args("inclusion", "--tiles", url, "--leaf", hex.EncodeToString(leaves[1][:]))...); code != exitUsage {
		t.Errorf("--tiles without --index: %d, want usage", code)
	}
}
