package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/keyring"
	"github.com/runseal/runseal/keyring/ringtest"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sealed"
	"github.com/runseal/runseal/store/storetest"
)

// readCounter is a tenant's store that counts what the records route
// reads of it.
type readCounter struct {
	Store
	storetest.ReadTally
}

func (c *readCounter) ReadPage(ctx context.Context, run store.RunID, from store.Seq, limit int) ([]store.Record, error) {
	recs, err := c.Store.ReadPage(ctx, run, from, limit)
	c.Count(recs)
	return recs, err
}

func (c *readCounter) ReadStored(ctx context.Context, run store.RunID, from store.Seq, limit, maxBytes int) ([]store.Record, store.Seq, error) {
	c.Asked(maxBytes)
	recs, next, err := c.Store.ReadStored(ctx, run, from, limit, maxBytes)
	c.Count(recs)
	return recs, next, err
}

// bigRun appends n records of about size bytes each to a fresh run of j.
func bigRun(t *testing.T, j store.Appender, n, size int) store.RunID {
	t.Helper()
	run := store.NewRunID()
	text := strings.Repeat("x", size-200) // the routing fields take the rest
	for range n {
		if _, err := j.Append(context.Background(), 1, []store.Append{{Run: run, Kind: "Note", Fields: []byte(`{"text":"` + text + `"}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	return run
}

func (ts *testServer) records(path string) api.Records {
	ts.t.Helper()
	code, _, body := ts.do("GET", path, "")
	if code != http.StatusOK {
		ts.t.Fatalf("GET %s = %d %s", path, code, body)
	}
	var page api.Records
	if err := json.Unmarshal([]byte(body), &page); err != nil {
		ts.t.Fatalf("GET %s: %v", path, err)
	}
	return page
}

// TestRecordsPage_LargeRecordsReadWithinBudget stops issue 27's heavy
// read: a page of 1 MiB records read a first chunk of 8 of them (8 MiB)
// whatever the 4 MiB bound, and 30 such requests took the server to
// 877 MB. A page must read from the store no more than its bound plus one
// record, and paging by "next" must still walk the whole run.
func TestRecordsPage_LargeRecordsReadWithinBudget(t *testing.T) {
	var rc *readCounter
	ts := startServer(t, func(c *Config, _ *Timeouts) {
		rc = &readCounter{Store: c.Tenants[0].Store}
		c.Tenants[0].Store = rc
	})
	const n = 10
	run := bigRun(t, ts.st, n, store.MaxRecordBytes)
	rc.Take()
	var seen []store.Seq
	for from := store.Seq(1); from != 0; {
		page := ts.records(fmt.Sprintf("/v1/runs/%s/records?from=%d&limit=1000", run, from))
		received, asked := rc.Take()
		if limit := DefaultMaxRecordsBytes + store.MaxRecordBytes; received > limit {
			t.Errorf("a page from seq %d read %d stored bytes from the store, over its bound plus one record (%d)", from, received, limit)
		}
		for _, b := range asked {
			if b > DefaultMaxRecordsBytes {
				t.Errorf("the page from seq %d asked the store for %d bytes, over its bound %d", from, b, DefaultMaxRecordsBytes)
			}
		}
		size := 0
		for _, r := range page.Records {
			seen = append(seen, r.Seq)
			size += len(r.Raw)
		}
		if len(page.Records) > 1 && size > DefaultMaxRecordsBytes {
			t.Errorf("a page from seq %d answered %d bytes of records, over its bound", from, size)
		}
		from = page.Next
	}
	if len(seen) != n || seen[0] != 1 || seen[n-1] != n {
		t.Errorf("paging by next walked seqs %v, want 1..%d", seen, n)
	}
}

// TestRecordsPage_SealedDoesNotDecrypt stops the other half of the heavy
// read: over a sealed journal a records page opened every sealed field
// (a data key unwrapped and the plaintext made, per record) and then
// answered the stored bytes, throwing the plaintext away. The page must
// unwrap nothing, and answer the stored bytes, envelopes and all.
func TestRecordsPage_SealedDoesNotDecrypt(t *testing.T) {
	ring, err := keyring.OpenFile(filepath.Join(t.TempDir(), "keys"))
	if err != nil {
		t.Fatal(err)
	}
	counter := &ringtest.Counting{Ring: ring}
	var sj *sealed.Journal
	ts := startServer(t, func(c *Config, _ *Timeouts) {
		sj = sealed.New(c.Tenants[0].Store.(store.Journal), counter, sealed.Options{})
		c.Tenants[0].Store = sj
	})
	run := store.NewRunID()
	for i := range 5 {
		if _, err := sj.Append(context.Background(), 1, []store.Append{{Run: run, Kind: "Note", Fields: []byte(fmt.Sprintf(`{"secret":"s%d"}`, i))}}); err != nil {
			t.Fatal(err)
		}
	}
	stored, err := ts.st.Read(context.Background(), run, 1)
	if err != nil {
		t.Fatal(err)
	}
	if opened, err := sj.ReadPage(context.Background(), run, 1, 5); err != nil || counter.Unwraps() == 0 || !strings.Contains(string(opened[0].Fields), "s0") {
		t.Fatalf("the counting ring does not see the sealed journal's opening: %d unwraps, %v", counter.Unwraps(), err)
	}
	counter.Reset()
	page := ts.records("/v1/runs/" + run.String() + "/records")
	if n := counter.Unwraps(); n != 0 {
		t.Errorf("a records page unwrapped %d data keys; it answers the stored bytes and must open nothing", n)
	}
	if len(page.Records) != len(stored) {
		t.Fatalf("the page has %d records, want %d", len(page.Records), len(stored))
	}
	for i, r := range page.Records {
		if string(r.Raw) != string(stored[i].Raw) || !strings.Contains(string(r.Raw), sealed.EnvelopePrefix) {
			t.Errorf("seq %d: the page does not answer the stored, sealed bytes: %.80s", r.Seq, r.Raw)
		}
	}
}

// blockingReads is a tenant's store whose record reads are held by its
// Gate, so a test can hold heavy reads in progress.
type blockingReads struct {
	Store
	*storetest.Gate
}

func (b *blockingReads) ReadPage(ctx context.Context, run store.RunID, from store.Seq, limit int) ([]store.Record, error) {
	if err := b.Hold(ctx); err != nil {
		return nil, err
	}
	return b.Store.ReadPage(ctx, run, from, limit)
}

func (b *blockingReads) ReadStored(ctx context.Context, run store.RunID, from store.Seq, limit, maxBytes int) ([]store.Record, store.Seq, error) {
	if err := b.Hold(ctx); err != nil {
		return nil, 0, err
	}
	return b.Store.ReadStored(ctx, run, from, limit, maxBytes)
}

// TestRecordsPage_ConcurrentHeavyReadsAreBounded stops issue 27's slow
// readers: 20 of them held 979 MB for a minute, since nothing bounded
// how many pages of records were in progress at once. With every slot
// held, the next records request must be answered 503 with Retry-After
// without reaching the store, and a slot freed must serve again.
func TestRecordsPage_ConcurrentHeavyReadsAreBounded(t *testing.T) {
	const slots = 3
	var br *blockingReads
	ts := startServer(t, func(c *Config, _ *Timeouts) {
		br = &blockingReads{Store: c.Tenants[0].Store, Gate: storetest.NewGate(slots + 1)}
		c.Tenants[0].Store = br
		c.MaxHeavyReads = slots
		c.HeavyReadWait = -1
	})
	run := ts.sealedRun(3)
	path := "/v1/runs/" + run.String() + "/records"
	// get asks from a goroutine of its own, so it reports a failure as a
	// status of 0 rather than stopping the test from there.
	type answer struct {
		code int
		hdr  http.Header
		body string
	}
	ask := func() answer {
		req, err := http.NewRequest("GET", ts.url+path, nil)
		if err != nil {
			return answer{body: err.Error()}
		}
		req.Header.Set("Authorization", "Bearer "+ts.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return answer{body: err.Error()}
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, resp.Header, string(b)}
	}
	get := func() <-chan int {
		done := make(chan int, 1)
		go func() { done <- ask().code }()
		return done
	}
	var held []<-chan int
	for range slots {
		held = append(held, get())
		<-br.Entered
	}
	over := make(chan answer, 1)
	go func() { over <- ask() }()
	select {
	case a := <-over:
		if a.code != http.StatusServiceUnavailable || a.hdr.Get("Retry-After") == "" || !strings.Contains(a.body, "large reads") {
			t.Errorf("with every slot held: %d, Retry-After %q, %s; want 503 with Retry-After naming the limit", a.code, a.hdr.Get("Retry-After"), a.body)
		}
	case <-br.Entered:
		close(br.Release)
		t.Fatalf("with %d heavy reads held, one more reached the store", slots)
	}
	close(br.Release)
	for _, h := range held {
		if c := <-h; c != http.StatusOK {
			t.Errorf("a held heavy read answered %d once let go", c)
		}
	}
	if c := <-get(); c != http.StatusOK {
		t.Errorf("after the slots were freed a records page answered %d", c)
	}
}

// TestRoute_HeavyTakesASlot: a Route marked Heavy shares the records
// pages' slots (the studies twins are), and one left unmarked does not.
func TestRoute_HeavyTakesASlot(t *testing.T) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	block := func(w http.ResponseWriter, r *http.Request, _ *Tenant) error {
		entered <- struct{}{}
		<-release
		writeJSON(w, http.StatusOK, struct{}{})
		return nil
	}
	light := func(w http.ResponseWriter, r *http.Request, _ *Tenant) error {
		writeJSON(w, http.StatusOK, struct{}{})
		return nil
	}
	ts := startServer(t, func(c *Config, _ *Timeouts) {
		c.MaxHeavyReads, c.HeavyReadWait = 1, -1
		c.Routes = []Route{
			{Pattern: "GET /v1/test/heavy", Role: RoleReader, Handle: block, Heavy: true},
			{Pattern: "GET /v1/test/light", Role: RoleReader, Handle: light},
		}
	})
	held := make(chan struct{})
	go func() {
		defer close(held)
		req, _ := http.NewRequest("GET", ts.url+"/v1/test/heavy", nil)
		req.Header.Set("Authorization", "Bearer "+ts.token)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	if code, hdr, body := ts.do("GET", "/v1/runs/"+store.NewRunID().String()+"/records", ""); code != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
		t.Errorf("a records page while a Heavy route holds the only slot: %d %s, want 503 with Retry-After", code, body)
	}
	if code, _, body := ts.do("GET", "/v1/test/light", ""); code != http.StatusOK {
		t.Errorf("an unmarked route while the slot is held: %d %s", code, body)
	}
	close(release)
	<-held
}
