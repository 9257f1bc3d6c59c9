package console

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runseal/runseal/api/server"
	"github.com/runseal/runseal/internal/journaltest"
	"github.com/runseal/runseal/keyring"
	"github.com/runseal/runseal/keyring/ringtest"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sealed"
	"github.com/runseal/runseal/store/sqlite"
	"github.com/runseal/runseal/store/storetest"
)

// heavyServer is a journal served as 'journal serve' serves it: the
// console in front of the API server whose heavy-read slots it shares.
type heavyServer struct {
	t      *testing.T
	url    string
	st     *sqlite.Store
	token  string       // a reader token's secret, for the API
	cookie *http.Cookie // a console session of that token
}

// startHeavy serves a fresh journal; store makes the tenant's store from
// the journal (nil: the journal itself), and cfg changes the API's config.
func startHeavy(t *testing.T, wrap func(*sqlite.Store) server.Store, cfg func(*server.Config)) *heavyServer {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "j.db"), sqlite.Options{Origin: "example.com/log", Logger: quiet})
	must(t, err)
	t.Cleanup(func() { st.Close() })
	var ts server.Store = st
	if wrap != nil {
		ts = wrap(st)
	}
	id, tok, hash, err := server.NewToken()
	must(t, err)
	must(t, st.CreateToken(ctx, store.Token{ID: id, Tenant: "default", Role: store.RoleReader, Hash: hash, Created: time.Now().UTC()}))
	c := server.Config{Tenants: []server.Tenant{{Store: ts, LogKey: journaltest.NewLog(t, st.Origin()).Verifier}}, Tokens: st, Logger: quiet}
	if cfg != nil {
		cfg(&c)
	}
	srv, err := server.New(c)
	must(t, err)
	con, err := New(Config{Tenants: c.Tenants, Tokens: st, Logger: quiet, Heavy: srv})
	must(t, err)
	h := con.Handler(srv)
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return &heavyServer{t: t, url: hs.URL, st: st, token: tok, cookie: signInHandler(t, h, tok)}
}

// tenantStore is what a Run page reads of a tenant's store: the API's
// Store, and the log positions of the run's seal.
type tenantStore interface {
	server.Store
	LogPositions(ctx context.Context, runs []store.RunID) ([]*store.Position, error)
}

// answer is one HTTP answer, or in body why there was none (code 0).
type answer struct {
	code int
	hdr  http.Header
	body string
}

// get fetches path: a console page with the session cookie, an API path
// with the bearer token. It reports a failure in its answer rather than
// stopping the test, so it may run on a goroutine of its own.
func (h *heavyServer) get(path string) answer {
	req, err := http.NewRequest("GET", h.url+path, nil)
	if err != nil {
		return answer{body: err.Error()}
	}
	if strings.HasPrefix(path, "/console/") {
		req.AddCookie(h.cookie)
	} else {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		return answer{body: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

// page fetches a console page that must answer 200.
func (h *heavyServer) page(path string) string {
	h.t.Helper()
	a := h.get(path)
	if a.code != http.StatusOK {
		h.t.Fatalf("GET %s: %d %.300s", path, a.code, a.body)
	}
	return a.body
}

// readCounter is a tenant's store that counts what is read of it through
// the record reads a Run page may use.
type readCounter struct {
	tenantStore
	storetest.ReadTally
}

func (c *readCounter) Read(ctx context.Context, run store.RunID, from store.Seq) ([]store.Record, error) {
	recs, err := c.tenantStore.Read(ctx, run, from)
	c.Count(recs)
	return recs, err
}

func (c *readCounter) ReadPage(ctx context.Context, run store.RunID, from store.Seq, limit int) ([]store.Record, error) {
	recs, err := c.tenantStore.ReadPage(ctx, run, from, limit)
	c.Count(recs)
	return recs, err
}

func (c *readCounter) ReadStored(ctx context.Context, run store.RunID, from store.Seq, limit, maxBytes int) ([]store.Record, store.Seq, error) {
	c.Asked(maxBytes)
	recs, next, err := c.tenantStore.ReadStored(ctx, run, from, limit, maxBytes)
	c.Count(recs)
	return recs, next, err
}

var (
	laterLink = regexp.MustCompile(`href="\?from=(\d+)">later records`)
	seqCell   = regexp.MustCompile(`<td class="num">(\d+)</td>`)
)

// TestRunPage_LargeRecordsReadWithinBudget stops issue 27's heavy read on
// the console: the Run page read records in chunks of 8 whatever their
// size, 8 MiB from the store for a page of 1 MiB records whose bound is
// 1 MiB. A page must read no more than its bound plus one record, ask the
// store for no more than its bound, and paging by its "later records"
// link must still show every record once.
func TestRunPage_LargeRecordsReadWithinBudget(t *testing.T) {
	var rc *readCounter
	h := startHeavy(t, func(st *sqlite.Store) server.Store { rc = &readCounter{tenantStore: st}; return rc }, nil)
	const n = 10
	run := store.NewRunID()
	text := strings.Repeat("x", store.MaxRecordBytes-200) // the routing fields take the rest
	for range n {
		_, err := h.st.Append(context.Background(), 1, []store.Append{{Run: run, Kind: "Note", Fields: []byte(`{"text":"` + text + `"}`)}})
		must(t, err)
	}
	rc.Take()
	var seen []int
	for from, pages := "1", 0; from != ""; pages++ {
		if pages > n {
			t.Fatalf("more than %d pages for %d records", n, n)
		}
		body := h.page("/console/runs/" + run.String() + "?from=" + from)
		received, asked := rc.Take()
		if limit := recordsPageBytes + store.MaxRecordBytes; received > limit {
			t.Errorf("the page from seq %s read %d stored bytes from the store, over its bound plus one record (%d)", from, received, limit)
		}
		for _, b := range asked {
			if b > recordsPageBytes {
				t.Errorf("the page from seq %s asked the store for %d bytes, over its bound %d", from, b, recordsPageBytes)
			}
		}
		for _, m := range seqCell.FindAllStringSubmatch(body, -1) {
			seq, _ := strconv.Atoi(m[1])
			seen = append(seen, seq)
		}
		from = ""
		if m := laterLink.FindStringSubmatch(body); m != nil {
			from = m[1]
		}
	}
	if len(seen) != n || seen[0] != 1 || seen[n-1] != n {
		t.Errorf("paging by the later-records link showed seqs %v, want 1..%d", seen, n)
	}
}

// TestRunPage_SealedFieldsAreNotOpenedToBeMarked stops the Run page's
// other heavy read: over a sealed journal it opened every sealed field (a
// data key unwrapped and the plaintext made, per record) only to show the
// field as "sealed" or "erased" and throw the plaintext away. The page
// must unwrap nothing and still mark each field right, erased ones from
// the key ring's erasure state.
func TestRunPage_SealedFieldsAreNotOpenedToBeMarked(t *testing.T) {
	ctx := context.Background()
	ring, err := keyring.OpenFile(filepath.Join(t.TempDir(), "keys"))
	must(t, err)
	counter := &ringtest.Counting{Ring: ring}
	var j *sealed.Journal
	h := startHeavy(t, func(st *sqlite.Store) server.Store { j = sealed.New(st, counter, sealed.Options{}); return j }, nil)
	runOf := func(c store.CaseID, n int) store.RunID {
		run := store.NewRunID()
		l, err := j.Acquire(ctx, run, "w", time.Hour)
		must(t, err)
		for i := range n {
			_, err = j.Append(ctx, l.Epoch, []store.Append{{Run: run, Case: c, Kind: "Note", Fields: fmt.Appendf(nil, `{"secret":"Secret%d","source":"intake"}`, i)}})
			must(t, err)
		}
		return run
	}
	gone, kept := store.NewCaseID(), store.NewCaseID()
	goneRun, keptRun := runOf(gone, 5), runOf(kept, 5)
	_, err = j.Erase(ctx, sealed.Erasure{Scope: sealed.Scope(j.Tenant(), gone, goneRun), Actor: store.Operator{Actor: "dpo", Basis: store.Asserted}, Reason: "art. 17"})
	must(t, err)
	if opened, err := j.ReadPage(ctx, keptRun, 1, 5); err != nil || counter.Unwraps() == 0 || !strings.Contains(string(opened[0].Fields), "Secret0") {
		t.Fatalf("the counting ring does not see the sealed journal's opening: %d unwraps, %v", counter.Unwraps(), err)
	}
	for run, want := range map[store.RunID]string{goneRun: fieldErased, keptRun: fieldSealed} {
		counter.Reset()
		body := h.page("/console/runs/" + run.String())
		if n := counter.Unwraps(); n != 0 {
			t.Errorf("run %s: the Run page unwrapped %d data keys; it shows no plaintext and must open nothing", run, n)
		}
		if got := strings.Count(body, `<span class="fname">secret</span> <span class="pill `+want+`">`+want+`</span>`); got != 5 {
			t.Errorf("run %s: %d of 5 secret fields shown as %s", run, got, want)
		}
		if strings.Contains(body, "Secret0") {
			t.Errorf("run %s: the page shows plaintext", run)
		}
	}
}

// blockingReads is a tenant's store whose record reads are held by its
// Gate, so a test can hold a page in progress.
type blockingReads struct {
	tenantStore
	*storetest.Gate
}

func (b *blockingReads) ReadPage(ctx context.Context, run store.RunID, from store.Seq, limit int) ([]store.Record, error) {
	if err := b.Hold(ctx); err != nil {
		return nil, err
	}
	return b.tenantStore.ReadPage(ctx, run, from, limit)
}

func (b *blockingReads) ReadStored(ctx context.Context, run store.RunID, from store.Seq, limit, maxBytes int) ([]store.Record, store.Seq, error) {
	if err := b.Hold(ctx); err != nil {
		return nil, 0, err
	}
	return b.tenantStore.ReadStored(ctx, run, from, limit, maxBytes)
}

// TestRunPage_TakesAHeavyReadSlot stops slow readers of the console: its
// Run page held up to its bound of records (and their HTML) outside the
// API's heavy-read slots, so Run pages in progress were unbounded in
// number. The page must take one of the same slots as the API's records
// pages: with the one slot held by either, the other is answered 503 with
// Retry-After without reaching the store, and once it is let go both
// answer again.
func TestRunPage_TakesAHeavyReadSlot(t *testing.T) {
	var br *blockingReads
	h := startHeavy(t, func(st *sqlite.Store) server.Store {
		br = &blockingReads{tenantStore: st, Gate: storetest.NewGate(16)}
		return br
	}, func(c *server.Config) { c.MaxHeavyReads, c.HeavyReadWait = 1, -1 })
	run := store.NewRunID()
	_, err := h.st.Append(context.Background(), 1, []store.Append{{Run: run, Kind: "Note", Fields: []byte(`{"text":"hello"}`)}})
	must(t, err)
	console, records := "/console/runs/"+run.String(), "/v1/runs/"+run.String()+"/records"
	start := func(path string) <-chan answer {
		done := make(chan answer, 1)
		go func() { done <- h.get(path) }()
		return done
	}
	// reading waits for path's request to reach the store's records.
	reading := func(path string, done <-chan answer) {
		t.Helper()
		select {
		case <-br.Entered:
		case a := <-done:
			t.Fatalf("GET %s answered %d without reading records: %.300s", path, a.code, a.body)
		}
	}
	for _, c := range []struct{ holder, other string }{{records, console}, {console, records}} {
		held := start(c.holder)
		reading(c.holder, held) // the holder is reading, in its slot
		over := start(c.other)
		select {
		case a := <-over:
			if a.code != http.StatusServiceUnavailable || a.hdr.Get("Retry-After") == "" || !strings.Contains(a.body, "large reads") {
				t.Errorf("GET %s with %s holding the slot: %d, Retry-After %q, %.300s; want 503 with Retry-After naming the limit", c.other, c.holder, a.code, a.hdr.Get("Retry-After"), a.body)
			}
		case <-br.Entered:
			close(br.Release) // let every read go
			<-over
			<-held
			t.Fatalf("GET %s reached the store while %s held the one heavy-read slot", c.other, c.holder)
		}
		br.Release <- struct{}{}
		if a := <-held; a.code != http.StatusOK {
			t.Errorf("GET %s answered %d once let go: %.300s", c.holder, a.code, a.body)
		}
	}
	for _, p := range []string{console, records} {
		done := start(p)
		reading(p, done)
		br.Release <- struct{}{}
		if a := <-done; a.code != http.StatusOK {
			t.Errorf("GET %s after the slot was freed: %d", p, a.code)
		}
	}
}
