package console

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runseal/runseal/api/server"
	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/checkpointer"
	"github.com/runseal/runseal/internal/journaltest"
	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/journalstore"
	"github.com/runseal/runseal/publish"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sqlite"
	"github.com/runseal/runseal/store/storetest"
	"github.com/runseal/runseal/witness"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fixture is a real journal served with its console: tenant "default"
// with runs in every backlog, seals, a checkpoint cosigned by a real
// witness over HTTP, a disclosure and a study; tenant "acme" with one run
// of its own; tokens for both.
type fixture struct {
	t   *testing.T
	url string
	con *Console
	// conCfg is what the console at url was built from; api is the API
	// handler behind it.
	conCfg Config
	api    http.Handler
	// sessions are the session cookies signed in at url, by token.
	sessions map[string]string
	st       *sqlite.Store
	acme     *sqlite.Store

	reader, writer, acmeReader string // token secrets
	acmeReaderID               string

	sealedRun, quarantined, cancelled, abandoned, waiting store.RunID
	acmeRun                                               store.RunID
	study                                                 lifecycle.StudyID
	disclosure                                            store.Disclosure
	witnessName                                           string
	witnessedSize                                         uint64
	apiRecords                                            int // records appended through the API
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	clk := storetest.NewFakeClock() // moved so a lease expires without waiting
	clk.Advance(time.Since(clk.Now()))
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "j.db"), sqlite.Options{Origin: "example.com/log", Now: clk.Now, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	acme, err := st.ForTenant("acme")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { acme.Close() })
	f := &fixture{t: t, st: st, acme: acme, witnessName: "w-example"}

	// The log's key, and a real witness that knows it, over HTTP.
	lk := journaltest.NewLog(t, st.Origin())
	wit := journaltest.NewWitness(t, f.witnessName)
	wst, err := witness.OpenStore(ctx, filepath.Join(t.TempDir(), "w.db"), witness.StoreOptions{Create: true})
	must(t, err)
	t.Cleanup(func() { wst.Close() })
	must(t, wst.AddLog(ctx, witness.LogConfig{Origin: st.Origin(), Keys: []string{lk.VKey}, QPD: witness.MaxQPD, Burst: witness.MaxQPD}))
	w, err := witness.New(ctx, wst, []*checkpoint.Cosigner{wit.Cosigner}, witness.Options{Logger: quiet})
	must(t, err)
	wh, err := w.Handler("")
	must(t, err)
	wsrv := httptest.NewServer(wh)
	t.Cleanup(wsrv.Close)
	wit.URL = wsrv.URL
	pol := journaltest.Policy(t, lk, wit)
	// The publisher reads the outbox's due times, which the store stamps with
	// its clock: both must share it.
	pub, err := publish.New(st, pol, lk.Verifier, publish.Options{MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Poll: 20 * time.Millisecond, Now: clk.Now, Logger: quiet})
	must(t, err)
	cp := checkpointer.New(checkpointer.Config{Store: st, Signer: lk.Signer, Queue: pub, Logger: quiet})

	acmeKey := journaltest.NewLog(t, acme.Origin()).Verifier

	// Runs in every state the pages show.
	f.sealedRun = f.run(st, "succeeded", true)
	f.quarantined = f.run(st, "quarantined", true)
	f.cancelled = f.run(st, "cancelled", true)
	_, err = st.RequestCancel(ctx, f.cancelled, store.Operator{Actor: "ops@example.com", Basis: store.Asserted}, "customer withdrew")
	must(t, err)
	f.waiting = store.NewRunID()
	l, err := st.Acquire(ctx, f.waiting, "worker-1", time.Hour)
	must(t, err)
	_, err = st.Append(ctx, l.Epoch, []store.Append{
		{Run: f.waiting, Kind: store.KindRunAdmitted, Fields: []byte(`{"admission_key":"wait-1","source":"test"}`)},
		{Run: f.waiting, Kind: store.KindRunSuspended, Fields: fmt.Appendf(nil, `{"awaiting":"time","until":%q}`, clk.Now().Add(time.Hour).Format(time.RFC3339))},
	})
	must(t, err)
	must(t, st.ReleaseLease(ctx, f.waiting, l.Epoch))
	f.abandoned = store.NewRunID()
	l, err = st.Acquire(ctx, f.abandoned, "worker-2", time.Second)
	must(t, err)
	_, err = st.Append(ctx, l.Epoch, []store.Append{{Run: f.abandoned, Kind: store.KindRunAdmitted, Fields: []byte(`{"admission_key":"abandon-1","source":"test"}`)}})
	must(t, err)
	clk.Advance(5 * time.Second) // worker-2 died holding the lease
	f.acmeRun = f.run(acme, "succeeded", true)

	// A study kept by the trial lifecycle.
	ls, err := journalstore.New(st)
	must(t, err)
	f.study, err = ls.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1})
	must(t, err)
	_, err = ls.ReserveAndCreateIfBudget(ctx, lifecycle.ReserveAndCreateRequest{Study: f.study, MaxTrials: 3})
	must(t, err)
	must(t, ls.Close())

	// Tokens: the console never shows their secrets.
	f.reader, _ = f.token(st, "default", store.RoleReader, "alice-console")
	f.writer, _ = f.token(st, "default", store.RoleWriter, "ci-writer")
	f.acmeReader, f.acmeReaderID = f.token(st, "acme", store.RoleReader, "acme-console")

	// Sign, and wait for the witness's cosignature to meet the policy.
	pubCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); pub.Run(pubCtx) }()
	t.Cleanup(func() { stop(); <-done })
	sc, err := cp.SignNow(ctx)
	must(t, err)
	f.witnessedSize = sc.Size
	deadline := time.Now().Add(30 * time.Second)
	for {
		wc, err := st.LatestWitnessed(ctx)
		must(t, err)
		if wc != nil && wc.Size == sc.Size {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint %d was not witnessed within 30s", sc.Size)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A disclosure in the register.
	f.disclosure = store.Disclosure{
		ID: "dsc_" + store.NewRunID().String(), At: clk.Now(), By: store.Operator{Actor: "dpo@example.com", Basis: store.Authenticated},
		Recipient: "Regulator of Examples", Runs: []store.RunID{f.sealedRun}, Checkpoint: store.Checkpoint{Origin: st.Origin(), Size: sc.Size, Root: sc.Root},
		Package: store.Digest{0xab, 0xcd, 0xef, 0x01}, Bytes: 4242, Carried: 1, Sealed: 1, Records: 3,
	}
	must(t, st.RecordDisclosure(ctx, f.disclosure))

	// The server, as 'journal serve' builds it.
	cfg := server.Config{
		Tenants: []server.Tenant{{Store: st, LogKey: lk.Verifier, Policy: pol, Signer: cp}, {Store: acme, LogKey: acmeKey}},
		Tokens:  st, Logger: quiet,
	}
	meter := server.NewMeter(nil)
	cfg.Routes = append(server.StatusRoutes(meter), server.TokenRoute(st))
	srv, err := server.New(cfg)
	must(t, err)
	f.api = meter.Observe(srv)
	f.conCfg = Config{Tenants: cfg.Tenants, Tokens: st, Meter: meter, Logger: quiet, FirstToken: "journal token create --role reader --name console", Heavy: srv}
	f.serve()

	// Writes through the API, so the Activity page has something to plot.
	f.apiAppendAndSeal()
	return f
}

// serve serves a console built from f.conCfg in front of the API, at f.url.
func (f *fixture) serve() {
	t := f.t
	t.Helper()
	con, err := New(f.conCfg)
	must(t, err)
	hs := httptest.NewServer(con.Handler(f.api))
	t.Cleanup(hs.Close)
	f.url, f.con, f.sessions = hs.URL, con, map[string]string{}
}

// with is f with a console of its own over the same journal and API,
// built from f's console config changed by change.
func (f *fixture) with(change func(*Config)) *fixture {
	f.t.Helper()
	g := *f
	change(&g.conCfg)
	g.serve()
	return &g
}

// apiServer is the API server over tenants, as 'journal serve' builds it
// in front of a console, for the console's heavy-read slots.
func apiServer(t *testing.T, tenants []server.Tenant, tokens store.TokenStore) *server.Server {
	t.Helper()
	srv, err := server.New(server.Config{Tenants: tenants, Tokens: tokens, Logger: quiet})
	must(t, err)
	return srv
}

// noRedirect is a client that shows a redirect instead of following it.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// do sends req, without following redirects, and reads the answer.
func do(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := noRedirect.Do(req)
	must(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// run writes a concluded run with a payload and seals it when seal.
func (f *fixture) run(st *sqlite.Store, outcome string, seal bool) store.RunID {
	t, ctx := f.t, context.Background()
	t.Helper()
	run := store.NewRunID()
	l, err := st.Acquire(ctx, run, "worker", time.Hour)
	must(t, err)
	_, err = st.Append(ctx, l.Epoch, []store.Append{
		{Run: run, Kind: store.KindRunAdmitted, Fields: fmt.Appendf(nil, `{"admission_key":"k-%s","source":"test"}`, run)},
		{Run: run, Kind: "ToolCalled", Fields: []byte(`{"tool":"search","query":"quarterly report"}`)},
		{Run: run, Kind: store.KindRunConcluded, Fields: fmt.Appendf(nil, `{"outcome":%q}`, outcome)},
	})
	must(t, err)
	if seal {
		_, err = st.Seal(ctx, run, l.Epoch, outcome)
		must(t, err)
	}
	return run
}

func (f *fixture) token(st *sqlite.Store, tenant, role, name string) (secret, id string) {
	f.t.Helper()
	id, secret, hash, err := server.NewToken()
	must(f.t, err)
	must(f.t, st.CreateToken(context.Background(), store.Token{ID: id, Tenant: tenant, Role: role, Name: name, Hash: hash, Created: time.Now().UTC()}))
	return secret, id
}

// apiAppendAndSeal appends a run of three records and seals it through
// the HTTP API with the writer token.
func (f *fixture) apiAppendAndSeal() {
	t := f.t
	t.Helper()
	run := store.NewRunID()
	do := func(method, path, body string) string {
		req, err := http.NewRequest(method, f.url+path, strings.NewReader(body))
		must(t, err)
		req.Header.Set("Authorization", "Bearer "+f.writer)
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return string(b)
	}
	lease := do("POST", "/v1/runs/"+run.String()+"/lease", `{"owner":"api","ttl_seconds":60}`)
	var epoch uint64
	if _, err := fmt.Sscanf(lease[strings.Index(lease, `"epoch":`)+len(`"epoch":`):], "%d", &epoch); err != nil {
		t.Fatalf("lease answer %s: %v", lease, err)
	}
	lines := fmt.Sprintf(`{"run":%q,"kind":"RunAdmitted","admission_key":"api-1","source":"api"}
{"run":%q,"kind":"Step","n":1}
{"run":%q,"kind":"RunConcluded","outcome":"succeeded"}
`, run, run, run)
	do("POST", fmt.Sprintf("/v1/append?epoch=%d", epoch), lines)
	f.apiRecords = 3
	do("POST", "/v1/runs/"+run.String()+"/seal", fmt.Sprintf(`{"epoch":%d,"outcome":"succeeded"}`, epoch))
}

// get fetches path in a session signed in with tok ("" for none) and
// returns the answer and its body; redirects are not followed.
func (f *fixture) get(path, tok string) (*http.Response, string) {
	f.t.Helper()
	if tok == "" {
		return f.getCookie(path, "")
	}
	return f.getCookie(path, f.session(tok))
}

// getCookie fetches path with the session cookie value ("" for none).
func (f *fixture) getCookie(path, value string) (*http.Response, string) {
	f.t.Helper()
	req, err := http.NewRequest("GET", f.url+path, nil)
	must(f.t, err)
	if value != "" {
		req.AddCookie(&http.Cookie{Name: CookieName, Value: value})
	}
	return do(f.t, req)
}

// session returns the session cookie value of a sign-in with tok, signing
// in the first time.
func (f *fixture) session(tok string) string {
	f.t.Helper()
	if v, ok := f.sessions[tok]; ok {
		return v
	}
	resp, body := f.signIn(tok)
	ck := sessionCookie(resp)
	if resp.StatusCode != http.StatusSeeOther || ck == nil {
		f.t.Fatalf("sign in: %d, no session cookie\n%s", resp.StatusCode, body)
	}
	f.sessions[tok] = ck.Value
	return ck.Value
}

// sessionCookie is the session cookie an answer sets, under either name,
// or nil.
func sessionCookie(resp *http.Response) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == CookieName || c.Name == SecureCookieName {
			return c
		}
	}
	return nil
}

// signInHandler signs in to h with tok and returns the session cookie.
func signInHandler(t *testing.T, h http.Handler, tok string) *http.Cookie {
	t.Helper()
	req := httptest.NewRequest("POST", "/console/signin", strings.NewReader(url.Values{"token": {tok}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	ck := sessionCookie(rec.Result())
	if rec.Code != http.StatusSeeOther || ck == nil {
		t.Fatalf("sign in: %d, no session cookie\n%s", rec.Code, rec.Body.String())
	}
	return ck
}

// signIn posts the sign-in form and returns the answer.
func (f *fixture) signIn(tok string, header ...string) (*http.Response, string) {
	f.t.Helper()
	req, err := http.NewRequest("POST", f.url+"/console/signin", strings.NewReader(url.Values{"token": {tok}}.Encode()))
	must(f.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return do(f.t, req)
}
