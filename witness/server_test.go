package witness

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/internal/journaltest"
)

// TestStatus200 covers the accepting paths over real HTTP: a first
// checkpoint, growth with a proof, a same-size resubmission, the empty tree.
func TestStatus200(t *testing.T) {
	e := newEnv(t)
	l := journaltest.NewLog(t, "log.example/a")
	e.addLog(l)

	l.Tree.Grow(5)
	n := l.Note(t, 5, nil)
	code, ctype, body := e.post(request(0, nil, n))
	if code != 200 || ctype != "text/plain; charset=utf-8" {
		t.Fatalf("first checkpoint: %d %q %q", code, ctype, body)
	}
	first := e.verifyCosigned(l, n, []byte(body))
	if ts := first.Cosignatures()[0].Time; !ts.Equal(e.clock.Now()) {
		t.Errorf("cosignature time %v, want the witness clock %v", ts, e.clock.Now())
	}

	l.Tree.Grow(4)
	e.mustCosign(l, 5, 9)

	// The same checkpoint again: cosigned again with a fresh timestamp.
	e.clock.Advance(time.Minute)
	again := e.mustCosign(l, 9, 9)
	if ts := again.Cosignatures()[0].Time; !ts.Equal(e.clock.Now()) {
		t.Errorf("resubmission cosigned at %v, want %v", ts, e.clock.Now())
	}
	li, err := e.store.Log(context.Background(), l.Origin)
	if err != nil {
		t.Fatal(err)
	}
	if li.Size != 9 || li.Root != l.Tree.Root(9) || !li.CosignedAt.Equal(e.clock.Now()) {
		t.Errorf("stored state %d %x %v", li.Size, li.Root, li.CosignedAt)
	}

	// A new log's empty tree.
	empty := journaltest.NewLog(t, "log.example/empty")
	e.addLog(empty)
	e.mustCosign(empty, 0, 0)
	empty.Tree.Grow(1)
	e.mustCosign(empty, 0, 1)
}

// TestStatus409 covers stale old sizes, including a first submission with
// old ≠ 0, and checks the exact 409 format.
func TestStatus409(t *testing.T) {
	e := newEnv(t)
	l := journaltest.NewLog(t, "log.example/a")
	e.addLog(l)
	l.Tree.Grow(7)

	code, ctype, body := e.post(request(3, l.Tree.Proof(3, 7), l.Note(t, 7, nil)))
	if code != 409 || ctype != ContentTypeTlogSize || body != "0\n" {
		t.Fatalf("first submission with old 3: %d %q %q, want 409 text/x.tlog.size \"0\\n\"", code, ctype, body)
	}
	e.mustCosign(l, 0, 5)
	for _, old := range []uint64{0, 3, 6} {
		code, ctype, body = e.post(request(old, l.Tree.Proof(old, 7), l.Note(t, 7, nil)))
		if code != 409 || ctype != ContentTypeTlogSize || body != "5\n" {
			t.Errorf("old %d: %d %q %q, want 409 \"5\\n\"", old, code, ctype, body)
		}
	}
	_, err := e.client.AddCheckpoint(context.Background(), 2, l.Tree.Proof(2, 7), l.Note(t, 7, nil))
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Size != 5 || !errors.Is(err, ErrConflict) {
		t.Fatalf("client error %v, want *ConflictError{5}", err)
	}
	// The client's recovery: a proof from the size the witness gave.
	e.mustCosign(l, ce.Size, 7)
}

func TestStatus404(t *testing.T) {
	e := newEnv(t)
	l := journaltest.NewLog(t, "log.example/unknown")
	l.Tree.Grow(1)
	code, _, body := e.post(request(0, nil, l.Note(t, 1, nil)))
	if code != 404 {
		t.Fatalf("unknown origin: %d %q", code, body)
	}
	_, err := e.client.AddCheckpoint(context.Background(), 0, nil, l.Note(t, 1, nil))
	if !errors.Is(err, ErrUnknownLog) {
		t.Fatalf("client: %v", err)
	}
	// Unknown origins are counted without an origin label.
	if got := testCount(t, e, `witness_add_checkpoint_requests_total{code="404",origin=""}`); got != 2 {
		t.Errorf("404 counter = %v, want 2", got)
	}
}

func TestStatus403(t *testing.T) {
	e := newEnv(t)
	l := journaltest.NewLog(t, "log.example/a")
	e.addLog(l)
	l.Tree.Grow(3)
	ctx := context.Background()

	// Signed by a key with the log's name that the witness does not know.
	impostor := journaltest.NewLog(t, l.Origin)
	impostor.Tree = l.Tree
	if code, _, body := e.post(request(0, nil, impostor.Note(t, 3, nil))); code != 403 {
		t.Errorf("unknown key: %d %q", code, body)
	}

	// A signature line of the known key that does not verify.
	good := l.Note(t, 3, nil)
	bad := tamperLastSig(t, good)
	if code, _, body := e.post(request(0, nil, bad)); code != 403 {
		t.Errorf("invalid signature from the known key: %d %q", code, body)
	}
	// Both the good line and a bad line of the same key: still refused.
	both := append(bytes.Clone(good), bad[bytes.LastIndex(bad, []byte("\n\u2014 "))+1:]...)
	if code, _, body := e.post(request(0, nil, both)); code != 403 {
		t.Errorf("good and bad line of the known key: %d %q", code, body)
	}

	// A removed key no longer counts.
	if err := e.store.DelKey(ctx, l.Origin, l.VKey); err != nil {
		t.Fatal(err)
	}
	_, err := e.client.AddCheckpoint(ctx, 0, nil, good)
	if !errors.Is(err, ErrNotTrusted) {
		t.Fatalf("removed key: %v", err)
	}
	// And an added one counts at once, without waiting for the cache.
	if err := e.store.AddKey(ctx, l.Origin, l.VKey); err != nil {
		t.Fatal(err)
	}
	e.mustCosign(l, 0, 3)
}

// TestKeyRemovedDuringRequest removes the log's key while a request that
// verified with it is about to commit: the cosignature must not be
// released, because the commit checks the key again.
func TestKeyRemovedDuringRequest(t *testing.T) {
	e := newEnv(t)
	l := journaltest.NewLog(t, "log.example/a")
	e.addLog(l)
	l.Tree.Grow(2)
	e.w.beforeCommit = func(string) {
		if err := e.store.DelKey(context.Background(), l.Origin, l.VKey); err != nil {
			t.Error(err)
		}
	}
	_, err := e.client.AddCheckpoint(context.Background(), 0, nil, l.Note(t, 2, nil))
	if !errors.Is(err, ErrNotTrusted) {
		t.Fatalf("got %v, want 403", err)
	}
	if li, _ := e.store.Log(context.Background(), l.Origin); li.Size != 0 {
		t.Fatalf("state moved to %d", li.Size)
	}
}

func tamperLastSig(t testing.TB, n []byte) []byte {
	t.Helper()
	i := bytes.LastIndex(n, []byte(" "))
	sig, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(n[i+1:])))
	if err != nil {
		t.Fatal(err)
	}
	sig[len(sig)-1] ^= 1
	return append(bytes.Clone(n[:i+1]), base64.StdEncoding.EncodeToString(sig)+"\n"...)
}

func TestStatus400(t *testing.T) {
	e := newEnv(t)
	l := journaltest.NewLog(t, "log.example/a")
	e.addLog(l)
	l.Tree.Grow(4)
	n := l.Note(t, 4, nil)
	h := base64.StdEncoding.EncodeToString(make([]byte, 32))
	cases := []struct{ name, body string }{
		{"empty body", ""},
		{"no old line", "\n" + string(n)},
		{"old without number", "old \n\n" + string(n)},
		{"old with leading zero", "old 01\n\n" + string(n)},
		{"old negative", "old -1\n\n" + string(n)},
		{"old with plus", "old +1\n\n" + string(n)},
		{"old too large", "old 18446744073709551616\n\n" + string(n)},
		{"old with two spaces", "old  0\n\n" + string(n)},
		{"Old capitalized", "Old 0\n\n" + string(n)},
		{"CRLF", "old 0\r\n\r\n" + string(n)},
		{"no blank line", "old 0\n" + string(n)},
		{"nothing after blank line", "old 0\n\n"},
		{"proof not base64", "old 0\n!!!!\n\n" + string(n)},
		{"proof 31 bytes", "old 0\n" + base64.StdEncoding.EncodeToString(make([]byte, 31)) + "\n\n" + string(n)},
		{"proof unpadded", "old 0\n" + strings.TrimRight(h, "=") + "\n\n" + string(n)},
		{"proof URL alphabet", "old 0\n" + strings.Repeat("_", 43) + "=\n\n" + string(n)},
		{"64 proof lines", "old 0\n" + strings.Repeat(h+"\n", 64) + "\n" + string(n)},
		{"note without signatures", "old 0\n\n" + string(n[:bytes.Index(n, []byte("\n\n"))+1])},
		{"note with bad body", "old 0\n\nlog.example/a\n04\n" + h + "\n\n\u2014 x AAAAAAA=\n"},
		{"note not UTF-8", "old 0\n\n\xff\n"},
	}
	for _, c := range cases {
		code, _, body := e.post([]byte(c.body))
		if code != 400 {
			t.Errorf("%s: %d %q, want 400", c.name, code, body)
		}
	}
	// old > size.
	_, err := e.client.AddCheckpoint(context.Background(), 5, nil, n)
	if !errors.Is(err, ErrMalformedRequest) {
		t.Errorf("old 5 > size 4: %v", err)
	}
	if code, _, body := e.post(request(5, nil, n)); code != 400 {
		t.Errorf("old > size: %d %q", code, body)
	}
	// Nothing of this moved the state.
	if li, _ := e.store.Log(context.Background(), l.Origin); li.Size != 0 {
		t.Fatalf("state moved to %d", li.Size)
	}
	// The client refuses to send what the witness would refuse.
	if _, err := e.client.AddCheckpoint(context.Background(), 0, make([][32]byte, 64), n); !errors.Is(err, ErrMalformedRequest) {
		t.Errorf("client with 64 proof hashes: %v", err)
	}
}

func TestStatus413(t *testing.T) {
	e := newEnv(t)
	big := append([]byte("old 0\n\n"), bytes.Repeat([]byte("a"), MaxRequestSize)...)
	if code, _, body := e.post(big); code != 413 {
		t.Fatalf("oversized body: %d %q", code, body)
	}
	// Without a Content-Length the cap applies while reading.
	resp, err := e.srv.Client().Post(e.srv.URL+"/add-checkpoint", "", struct{ *bytes.Reader }{bytes.NewReader(big)})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Fatalf("chunked oversized body: %d", resp.StatusCode)
	}
}

func TestStatus422(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	l := journaltest.NewLog(t, "log.example/a")
	e.addLog(l)
	l.Tree.Grow(8)

	// A proof with old 0.
	if code, _, body := e.post(request(0, l.Tree.Proof(4, 8), l.Note(t, 8, nil))); code != 422 {
		t.Errorf("proof with old 0: %d %q", code, body)
	}
	// Size 0 with a root other than the empty root, signed by the log.
	zero, err := note.Sign(&note.Note{Text: fmt.Sprintf("%s\n0\n%s\n", l.Origin, base64.StdEncoding.EncodeToString(make([]byte, 32)))}, l.Signer)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, body := e.post(request(0, nil, zero)); code != 422 {
		t.Errorf("size 0 without the empty root: %d %q", code, body)
	}
	_, err = e.client.AddCheckpoint(ctx, 0, nil, zero)
	if !errors.Is(err, ErrInconsistent) {
		t.Errorf("client: %v", err)
	}

	e.mustCosign(l, 0, 4)
	// A proof that does not verify: from another size, and corrupted.
	if code, _, body := e.post(request(4, l.Tree.Proof(3, 8), l.Note(t, 8, nil))); code != 422 {
		t.Errorf("proof from the wrong size: %d %q", code, body)
	}
	p := l.Tree.Proof(4, 8)
	p[0][0] ^= 1
	if code, _, body := e.post(request(4, p, l.Note(t, 8, nil))); code != 422 {
		t.Errorf("corrupted proof: %d %q", code, body)
	}
	if code, _, body := e.post(request(4, nil, l.Note(t, 8, nil))); code != 422 {
		t.Errorf("missing proof: %d %q", code, body)
	}
	// A proof between equal sizes.
	if code, _, body := e.post(request(4, l.Tree.Proof(2, 4), l.Note(t, 4, nil))); code != 422 {
		t.Errorf("proof between equal sizes: %d %q", code, body)
	}
	// The same size with another root, validly signed: a split view.
	fork := (&journaltest.Tree{}).Fork("fork")
	fork.Grow(4)
	forkNote := l.Note(t, 4, fork)
	_, err = e.client.AddCheckpoint(ctx, 4, nil, forkNote)
	if !errors.Is(err, ErrInconsistent) {
		t.Fatalf("split view: %v", err)
	}
	if li, _ := e.store.Log(ctx, l.Origin); li.Size != 4 || li.Root != l.Tree.Root(4) {
		t.Fatalf("state after refusals: %d %x", li.Size, li.Root)
	}
	e.mustCosign(l, 4, 8)
}

// TestSplitViewEvidence checks that a refused split view is kept, with the
// checkpoint the witness had cosigned, and shown to the operator.
func TestSplitViewEvidence(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	l := journaltest.NewLog(t, "log.example/a")
	e.addLog(l)
	fork := (&journaltest.Tree{}).Fork("fork")
	l.Tree.Grow(6)
	fork.Grow(6)
	cosigned := e.mustCosign(l, 0, 6)
	forkNote := l.Note(t, 6, fork)
	for range 2 {
		if code, _, body := e.post(request(6, nil, forkNote)); code != 422 {
			t.Fatalf("split view: %d %q", code, body)
		}
	}
	// A bad proof for a larger size is kept too, with the proof.
	fork.Grow(2)
	badProof := fork.Proof(6, 8)
	if code, _, _ := e.post(request(6, badProof, l.Note(t, 8, fork))); code != 422 {
		t.Fatalf("fork with a proof from the fork: %d", code)
	}

	evs, err := e.store.Evidence(ctx, l.Origin)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 {
		t.Fatalf("evidence = %+v", evs)
	}
	sv := evs[0]
	if sv.Kind != EvidenceSplitView || sv.Size != 6 || sv.Root != fork.Root(6) || sv.KnownSize != 6 || sv.KnownRoot != l.Tree.Root(6) || sv.Count != 2 {
		t.Errorf("split view evidence = %+v", sv)
	}
	// Both notes of the pair verify under the log's key: the evidence
	// stands on its own.
	logV, _ := checkpoint.NewVerifier(l.VKey)
	for _, n := range [][]byte{sv.Note, sv.KnownNote} {
		if _, err := checkpoint.Open(n, note.VerifierList(logV)); err != nil {
			t.Errorf("evidence note does not verify: %v\n%s", err, n)
		}
	}
	if !bytes.Equal(sv.KnownNote, append(cosigned.Text(), sv.KnownNote[len(cosigned.Text()):]...)) || !bytes.Contains(sv.KnownNote, []byte(testWitnessName)) {
		t.Errorf("known note is not the cosigned checkpoint:\n%s", sv.KnownNote)
	}
	bp := evs[1]
	if bp.Kind != EvidenceBadProof || bp.Size != 8 || len(bp.Proof) != len(badProof) || bp.Proof[0] != badProof[0] {
		t.Errorf("bad proof evidence = %+v", bp)
	}
	if got := testCount(t, e, `witness_evidence_total{kind="split_view",origin="log.example/a"}`); got != 2 {
		t.Errorf("split view metric = %v", got)
	}
	if !strings.Contains(e.logBuf.String(), "level=ERROR") || !strings.Contains(e.logBuf.String(), "split_view") {
		t.Errorf("no error log for the split view:\n%s", e.logBuf.String())
	}
	li, _ := e.store.Log(ctx, l.Origin)
	if li.Evidence != 2 {
		t.Errorf("LogInfo.Evidence = %d", li.Evidence)
	}
}

func TestStatus429(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	l := journaltest.NewLog(t, "log.example/a")
	// 1440 a day is one a minute; a burst of 2.
	if err := e.store.AddLog(ctx, LogConfig{Origin: l.Origin, Keys: []string{l.VKey}, QPD: 1440, Burst: 2}); err != nil {
		t.Fatal(err)
	}
	l.Tree.Grow(3)
	e.mustCosign(l, 0, 1)
	e.mustCosign(l, 1, 2)
	resp, err := e.srv.Client().Post(e.srv.URL+"/add-checkpoint", "", bytes.NewReader(request(2, l.Tree.Proof(2, 3), l.Note(t, 3, nil))))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "60" {
		t.Fatalf("over the burst: %d Retry-After %q, want 429 and 60", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	_, err = e.client.AddCheckpoint(ctx, 2, l.Tree.Proof(2, 3), l.Note(t, 3, nil))
	var se *StatusError
	if !errors.Is(err, ErrRateLimited) || !errors.As(err, &se) || se.RetryAfter != time.Minute {
		t.Fatalf("client: %v", err)
	}
	// Requests without a valid log signature do not use the log's quota.
	e.clock.Advance(time.Minute)
	impostor := journaltest.NewLog(t, l.Origin)
	impostor.Tree = l.Tree
	for range 5 {
		if code, _, _ := e.post(request(2, nil, impostor.Note(t, 3, nil))); code != 403 {
			t.Fatalf("impostor: %d", code)
		}
	}
	e.mustCosign(l, 2, 3)
	// A limit changed by the operator applies within the TTL.
	if err := e.store.SetLimits(ctx, l.Origin, MaxQPD, 100); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Second)
	e.post(request(3, nil, l.Note(t, 3, nil))) // reads the new limits; the new rate counts from now
	l.Tree.Grow(10)
	for size := uint64(3); size < 13; size++ {
		e.clock.Advance(time.Millisecond) // 24 requests' worth at the new rate, 0 at the old
		e.mustCosign(l, size, size+1)
	}
}

// TestReplayedPublicCheckpointsDoNotStarveLog replays, as anyone can, every
// checkpoint the log published (older ones with any old size, the held one,
// a newer one with a bad proof), far more often than the log's quota, and
// checks that the log's own next checkpoint is still cosigned: the quota is
// charged only for requests that advance the log.
func TestReplayedPublicCheckpointsDoNotStarveLog(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	l := journaltest.NewLog(t, "log.example/a")
	// One a minute, a burst of 2.
	if err := e.store.AddLog(ctx, LogConfig{Origin: l.Origin, Keys: []string{l.VKey}, QPD: 1440, Burst: 2}); err != nil {
		t.Fatal(err)
	}
	l.Tree.Grow(5)
	e.mustCosign(l, 0, 1)
	e.mustCosign(l, 1, 2) // the burst is used up
	e.clock.Advance(time.Minute)
	held := l.Note(t, 2, nil)
	var heldLines string
	for i := range 20 {
		for _, r := range []struct {
			body []byte
			want int
		}{
			{request(0, nil, l.Note(t, 1, nil)), 409},
			{request(1, nil, l.Note(t, 1, nil)), 409},
			{request(2, nil, l.Note(t, 1, nil)), 400},
			{request(0, nil, held), 409},
			{request(1, l.Tree.Proof(1, 2), held), 409},
			{request(2, [][32]byte{{1}}, l.Note(t, 4, nil)), 422}, // newer, bad proof
		} {
			if code, _, body := e.post(r.body); code != r.want {
				t.Fatalf("replay %d: %d %q, want %d", i, code, body, r.want)
			}
		}
		// The held checkpoint itself is cosigned again, for free.
		code, _, lines := e.post(request(2, nil, held))
		if code != 200 {
			t.Fatalf("resubmitting the held checkpoint: %d %q", code, lines)
		}
		if i > 0 && lines != heldLines {
			t.Fatalf("resubmission in the same second gave other lines: %q then %q", heldLines, lines)
		}
		heldLines = lines
	}
	e.mustCosign(l, 2, 3) // the log's one token for this minute
	if code, _, body := e.post(request(3, l.Tree.Proof(3, 4), l.Note(t, 4, nil))); code != 429 {
		t.Fatalf("a second advance within the minute: %d %q, want 429", code, body)
	}
	evs, err := e.store.Evidence(ctx, l.Origin)
	if err != nil {
		t.Fatal(err)
	}
	// The first sighting, then repeats within the log's rate: the burst.
	if len(evs) != 1 || evs[0].Kind != EvidenceBadProof || evs[0].Count != 3 {
		t.Fatalf("evidence after 20 replays of one bad proof at a burst of 2: %d rows; want one bad_proof counted 3 times", len(evs))
	}
}

func TestMonitoringRead(t *testing.T) {
	e := newEnv(t)
	l := journaltest.NewLog(t, "log.example/a")
	e.addLog(l)
	path := "/" + OriginHash(l.Origin) + "/checkpoint"
	if code, _, _ := e.get(path); code != 404 {
		t.Fatalf("never cosigned: %d", code)
	}
	if _, err := e.client.LatestCheckpoint(context.Background(), l.Origin); !errors.Is(err, ErrNotCosigned) {
		t.Fatalf("client, never cosigned: %v", err)
	}
	l.Tree.Grow(3)
	// The submitted note carries a forged line claiming the witness's own
	// key and a line from an unknown key: neither may be stored.
	n := l.Note(t, 3, nil)
	forged := append(bytes.Clone(n), fmt.Sprintf("\u2014 %s %s\n", testWitnessName, base64.StdEncoding.EncodeToString(append(binaryKeyHash(e.cosign.KeyHash()), make([]byte, 72)...)))...)
	forged = append(forged, "\u2014 someone.example AAAAAAAAAAA=\n"...)
	code, _, lines := e.post(request(0, nil, forged))
	if code != 200 {
		t.Fatalf("add: %d %q", code, lines)
	}
	code, hdr, body := e.get(path)
	if code != 200 || hdr.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("monitoring read: %d %v", code, hdr)
	}
	want := string(n) + lines
	if body != want {
		t.Fatalf("monitoring read:\n%s\nwant the log's verified signature and the witness's only:\n%s", body, want)
	}
	logV, _ := checkpoint.NewVerifier(l.VKey)
	s, err := checkpoint.Open([]byte(body), note.VerifierList(logV, e.cosign.Verifier()))
	if err != nil || len(s.Cosignatures()) != 1 || !s.SignedBy(logV) {
		t.Fatalf("served note does not verify: %v", err)
	}
	got, err := e.client.LatestCheckpoint(context.Background(), l.Origin)
	if err != nil || string(got) != want {
		t.Fatalf("client read: %v %q", err, got)
	}
	for _, p := range []string{"/" + strings.ToUpper(OriginHash(l.Origin)) + "/checkpoint", "/abc/checkpoint", "/checkpoint"} {
		if code, _, _ := e.get(p); code != 404 {
			t.Errorf("GET %s: %d, want 404", p, code)
		}
	}
	if code, _, _ := e.get("/add-checkpoint"); code != 405 {
		t.Errorf("GET /add-checkpoint: %d, want 405", code)
	}
}

func binaryKeyHash(h uint32) []byte {
	return []byte{byte(h >> 24), byte(h >> 16), byte(h >> 8), byte(h)}
}

// TestRestartKeepsState restarts the witness on the same file.
func TestRestartKeepsState(t *testing.T) {
	e := newEnv(t)
	l := journaltest.NewLog(t, "log.example/a")
	e.addLog(l)
	l.Tree.Grow(10)
	e.mustCosign(l, 0, 10)
	code, _, before := e.get("/" + OriginHash(l.Origin) + "/checkpoint")
	if code != 200 {
		t.Fatal(code)
	}
	e.restart()
	code, ctype, body := e.post(request(0, nil, l.Note(t, 10, nil)))
	if code != 409 || ctype != ContentTypeTlogSize || body != "10\n" {
		t.Fatalf("after restart: %d %q %q", code, ctype, body)
	}
	if _, _, after := e.get("/" + OriginHash(l.Origin) + "/checkpoint"); after != before {
		t.Fatalf("monitoring read changed across restart")
	}
	l.Tree.Grow(1)
	e.mustCosign(l, 10, 11)
}

// TestPrefix serves under a prefix.
func TestPrefix(t *testing.T) {
	e := newEnv(t)
	if _, err := e.w.Handler("nope"); err == nil {
		t.Error("prefix without a leading slash accepted")
	}
	for _, p := range []string{"/a/", "/a b", "/{x}", "/a//b", "/a?b"} {
		if _, err := e.w.Handler(p); err == nil {
			t.Errorf("prefix %q accepted", p)
		}
	}
	h, err := e.w.Handler("/tlog/w")
	if err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(t, h)
	c, err := NewClient(srv+"/tlog/w/", nil)
	if err != nil {
		t.Fatal(err)
	}
	l := journaltest.NewLog(t, "log.example/a")
	e.addLog(l)
	l.Tree.Grow(1)
	if _, err := c.AddCheckpoint(context.Background(), 0, nil, l.Note(t, 1, nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.LatestCheckpoint(context.Background(), l.Origin); err != nil {
		t.Fatal(err)
	}
}

// TestOwnName refuses a log whose origin is the witness's name, and a
// witness whose name is a log's origin.
func TestOwnName(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	l := journaltest.NewLog(t, testWitnessName)
	err := e.store.AddLog(ctx, LogConfig{Origin: l.Origin, Keys: []string{l.VKey}, QPD: 10})
	if !errors.Is(err, ErrOwnName) {
		t.Fatalf("AddLog of the witness's name: %v", err)
	}
	other := journaltest.NewLog(t, "log.example/x")
	e.addLog(other)
	skey, _, err := checkpoint.GenerateCosignerKey(rand.Reader, other.Origin)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := checkpoint.NewCosigner(skey)
	if _, err := New(ctx, e.store, []*checkpoint.Cosigner{c}, Options{}); !errors.Is(err, ErrOwnName) {
		t.Fatalf("witness named like a log: %v", err)
	}
	// The schema refuses it too, whatever the code above does.
	if _, err := e.store.wdb.Exec("INSERT INTO logs(origin, origin_hash, size, root, qpd, burst, contact, added_at) VALUES (?, 'x', 0, zeroblob(32), 1, 1, '', 0)", testWitnessName); err == nil {
		t.Fatal("schema accepted a log named like the witness")
	}
}

// TestSeveralCosigners cosigns with two keys: the answer has both lines.
func TestSeveralCosigners(t *testing.T) {
	e := newEnv(t)
	skey, _, err := checkpoint.GenerateCosignerKey(rand.Reader, "witness.example/w2")
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := checkpoint.NewCosigner(skey)
	w, err := New(context.Background(), e.store, []*checkpoint.Cosigner{e.cosign, c2}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := journaltest.NewLog(t, "log.example/a")
	e.addLog(l)
	l.Tree.Grow(2)
	n := l.Note(t, 2, nil)
	req, _ := ParseAddCheckpointRequest(request(0, nil, n))
	lines, err := w.AddCheckpoint(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	logV, _ := checkpoint.NewVerifier(l.VKey)
	s, _ := checkpoint.Open(n, note.VerifierList(logV))
	s2, err := s.WithSignatures(lines, note.VerifierList(e.cosign.Verifier(), c2.Verifier()))
	if err != nil || len(s2.Cosignatures()) != 2 {
		t.Fatalf("two cosigners: %v %q", err, lines)
	}
	if _, err := New(context.Background(), e.store, []*checkpoint.Cosigner{e.cosign, e.cosign}, Options{}); err == nil {
		t.Error("the same key twice accepted")
	}
}

// TestMetrics checks the per-origin request and latency series.
func TestMetrics(t *testing.T) {
	e := newEnv(t)
	l := journaltest.NewLog(t, "log.example/a")
	e.addLog(l)
	l.Tree.Grow(2)
	e.mustCosign(l, 0, 2)
	e.post(request(0, nil, l.Note(t, 2, nil)))
	if got := testCount(t, e, `witness_add_checkpoint_requests_total{code="200",origin="log.example/a"}`); got != 1 {
		t.Errorf("200 counter = %v", got)
	}
	if got := testCount(t, e, `witness_add_checkpoint_requests_total{code="409",origin="log.example/a"}`); got != 1 {
		t.Errorf("409 counter = %v", got)
	}
	if got := testCount(t, e, `witness_add_checkpoint_duration_seconds_count{origin="log.example/a"}`); got != 2 {
		t.Errorf("latency count = %v", got)
	}
	if got := testCount(t, e, `witness_log_size{origin="log.example/a"}`); got != 2 {
		t.Errorf("size gauge = %v", got)
	}
	if got := testCount(t, e, `witness_commit_group_size_count`); got < 1 {
		t.Errorf("group size count = %v", got)
	}
}

// testCount returns the value of one sample from the registry, found by its
// exposition-format name and labels.
func testCount(t testing.TB, e *env, series string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := make([]string, 0, len(m.GetLabel()))
			for _, lp := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
			}
			name := mf.GetName()
			lbl := ""
			if len(labels) > 0 {
				lbl = "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.Counter != nil && series == name+lbl:
				return m.Counter.GetValue()
			case m.Gauge != nil && series == name+lbl:
				return m.Gauge.GetValue()
			case m.Histogram != nil && series == name+"_count"+lbl:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}

func newHTTPServer(t testing.TB, h http.Handler) string {
	t.Helper()
	srv := &http.Server{Handler: h}
	ln := listenLocal(t)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// TestStatus503 closes the state under a running server: requests are
// answered 503 without a cosignature, whether the log's configuration was
// cached or not.
func TestStatus503(t *testing.T) {
	e := newEnv(t)
	l, fresh := journaltest.NewLog(t, "log.example/a"), journaltest.NewLog(t, "log.example/b")
	e.addLog(l)
	e.addLog(fresh)
	l.Tree.Grow(2)
	fresh.Tree.Grow(1)
	e.mustCosign(l, 0, 1)
	if err := e.store.Close(); err != nil {
		t.Fatal(err)
	}
	for _, body := range [][]byte{request(1, l.Tree.Proof(1, 2), l.Note(t, 2, nil)), request(0, nil, fresh.Note(t, 1, nil))} {
		code, _, got := e.post(body)
		if code != 503 || got != "Service Unavailable\n" {
			t.Errorf("closed state: %d %q, want 503 without detail", code, got)
		}
	}
	_, err := e.client.AddCheckpoint(context.Background(), 1, l.Tree.Proof(1, 2), l.Note(t, 2, nil))
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("client: %v", err)
	}
	if code, _, _ := e.get("/" + OriginHash(l.Origin) + "/checkpoint"); code != 503 {
		t.Errorf("monitoring read of closed state: %d", code)
	}
}

// TestReplayedHeldCheckpointIsWrittenOncePerSecond: resubmissions of the held
// checkpoint are free of the log's quota, so they must not be free writes
// either: within one second they are answered from memory, and the state
// file is written at most once a second whatever their number.
func TestReplayedHeldCheckpointIsWrittenOncePerSecond(t *testing.T) {
	e := newEnv(t)
	l := journaltest.NewLog(t, "log.example/a")
	e.addLog(l)
	l.Tree.Grow(3)
	e.mustCosign(l, 0, 3)
	commits := testCount(t, e, "witness_commit_group_size_count")
	var first string
	for i := range 50 {
		code, _, lines := e.post(request(3, nil, l.Note(t, 3, nil)))
		if code != 200 || (i > 0 && lines != first) {
			t.Fatalf("resubmission %d: %d %q", i, code, lines)
		}
		first = lines
	}
	if got := testCount(t, e, "witness_commit_group_size_count"); got != commits {
		t.Fatalf("%v commits for 50 resubmissions within the second of the cosignature, want none", got-commits)
	}
	e.clock.Advance(time.Second)
	for range 50 {
		if code, _, lines := e.post(request(3, nil, l.Note(t, 3, nil))); code != 200 || lines == first {
			t.Fatalf("resubmission a second later: %d %q, want a fresh cosignature", code, lines)
		}
	}
	if got := testCount(t, e, "witness_commit_group_size_count"); got != commits+1 {
		t.Fatalf("%v commits for 50 resubmissions within the next second, want 1", got-commits)
	}
}
