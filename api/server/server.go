package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/appendinput"
	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/checkpointer"
	"github.com/runseal/runseal/internal/blame"
	"github.com/runseal/runseal/store"
)

// MaxAppendBody caps an append's body: many records, well above one
// record's store.MaxRecordBytes, but finite.
const MaxAppendBody = 16 << 20

// DefaultMaxRecordsBytes is the default bound on the records of one answer
// to GET /v1/runs/{run}/records (spec/http.md).
const DefaultMaxRecordsBytes = 4 << 20

// Store is what the server needs of one tenant's journal: the roles its
// routes call (append, read, lease, seal, cancel), the run listings, the
// log's proofs, the signed checkpoints with the cosignatures kept for them,
// and the log's origin. It is narrower than store.Journal on purpose (the
// server never asks whether a store is shared, seals payloads or offers
// its transaction, nor writes checkpoints or publications), so a double or
// a decorator implements what is called and nothing else.
type Store interface {
	store.Appender
	store.Reader
	store.Leaser
	store.Sealer
	store.Canceller
	RunLister
	LogProver
	CheckpointReader
	// Tenant names the tenant whose rows the store reaches.
	Tenant() string
	// Origin is the tenant's log origin.
	Origin() string
}

// RunLister is the part of store.Finder the run listings
// (GET /v1/runs) use.
type RunLister interface {
	RunsByOutcome(ctx context.Context, outcome string, limit int) ([]store.RunID, error)
	RecentRuns(ctx context.Context, after *store.Activity, limit int) ([]store.Activity, error)
	RecentRunsFrom(ctx context.Context, source string, after *store.Activity, limit int) ([]store.Activity, error)
	RunsByID(ctx context.Context, after *store.RunID, limit int) ([]store.RunID, error)
	WaitingRuns(ctx context.Context, limit int) ([]store.WaitingRun, error)
}

// LogProver is the part of store.LogReader the proof routes use: the
// current checkpoint, consistency proofs, and inclusion proofs at a size.
type LogProver interface {
	Checkpoint(ctx context.Context) (store.Checkpoint, error)
	ConsistencyProof(ctx context.Context, oldSize, newSize uint64) ([]store.Digest, error)
	InclusionProofAt(ctx context.Context, run store.RunID, size uint64) (*store.Inclusion, error)
}

// CheckpointReader reads the log's signed checkpoints and the witness
// cosignatures kept for them (the reading side of store.CheckpointStore
// and store.PublicationStore).
type CheckpointReader interface {
	LatestCheckpoint(ctx context.Context) (*store.SignedCheckpoint, error)
	SignedCheckpointAt(ctx context.Context, size uint64) (*store.SignedCheckpoint, error)
	LatestWitnessed(ctx context.Context) (*store.SignedCheckpoint, error)
	Cosignatures(ctx context.Context, size uint64) (map[string][]byte, error)
}

// Tenant is one tenant served: its store and what verifies its log.
type Tenant struct {
	Store  Store
	LogKey note.Verifier      // verifies the log's checkpoints
	Policy *checkpoint.Policy // the witness policy; nil: no witnesses
	// Signer signs on POST /v1/checkpoint and hears of every seal; nil
	// refuses POST /v1/checkpoint.
	Signer *checkpointer.Signer
}

// Role is what a route asks of the caller's token.
type Role int

const (
	RolePublic Role = iota // anyone when Config.Public, else a reader
	RoleReader             // a reader or writer token of the tenant
	RoleWriter             // a writer token of the tenant
	RoleAny                // any valid token of any tenant (metrics)
)

// HandlerFunc answers one request for tenant t (nil for RoleAny, which is
// not tenant-scoped); an error is answered by the server's one mapping of
// errors to statuses.
type HandlerFunc func(w http.ResponseWriter, r *http.Request, t *Tenant) error

// Route is an extra route to serve (a tile endpoint, say), authorized and
// counted like the built-in ones.
type Route struct {
	Pattern string // an http.ServeMux pattern, e.g. "GET /v1/tile/{path...}"
	Role    Role
	Handle  HandlerFunc
	// Heavy counts the route's requests against the heavy-read slots
	// (Config.MaxHeavyReads): set it for a route that may hold MiBs.
	Heavy bool
}

// Config is what a Server is built from.
type Config struct {
	// Tenants served; the first answers /healthz. Requests name theirs
	// with ?tenant=, "default" when absent.
	Tenants []Tenant
	// Tokens authenticates bearer tokens; tokens are server-wide rows
	// naming their tenant.
	Tokens store.TokenStore
	// Public answers the checkpoint and proof reads without a token.
	Public bool
	// Logger receives failures the operator must act on; slog.Default()
	// when nil.
	Logger *slog.Logger
	// Registry is served on /metrics, and the request counter is
	// registered in it; a fresh registry when nil.
	Registry *prometheus.Registry
	// Routes are served besides spec/http.md's.
	Routes []Route
	// MaxRecordsBytes bounds the record bytes of one records answer;
	// DefaultMaxRecordsBytes when zero.
	MaxRecordsBytes int
	// MaxHeavyReads bounds the requests that may hold MiBs at once (pages
	// of records, and Routes marked Heavy); over it a request waits up to
	// HeavyReadWait, then is answered 503 with Retry-After. Zero:
	// DefaultHeavyReadMemory over (MaxRecordsBytes + one record), 12 with
	// the default bound.
	MaxHeavyReads int
	// HeavyReadWait is how long a heavy read waits for a slot, never past
	// its request's context: DefaultHeavyReadWait when zero; below zero,
	// it does not wait.
	HeavyReadWait time.Duration
	// TokenCacheTTL is how long a successful token check is trusted
	// before the token store is asked again, which bounds how long a
	// revoked token keeps working: DefaultTokenCacheTTL when zero; below
	// zero, every request asks the store.
	TokenCacheTTL time.Duration
}

// Server is the journal's HTTP API over its tenants. It is an
// http.Handler; Drain makes it refuse new requests while the listener
// shuts down.
type Server struct {
	cfg      Config
	byName   map[string]*Tenant
	log      *slog.Logger
	reqs     *prometheus.CounterVec
	mux      *http.ServeMux
	closing  chan struct{}
	maxBytes int
	tokens   *tokenCache
	// heavyReads bounds the requests that may hold MiBs at once.
	heavyReads *heavyReads
}

// New builds a Server.
func New(cfg Config) (*Server, error) {
	if len(cfg.Tenants) == 0 {
		return nil, errors.New("api: no tenant to serve")
	}
	if cfg.Tokens == nil {
		return nil, errors.New("api: no token store")
	}
	s := &Server{cfg: cfg, byName: map[string]*Tenant{}, log: cfg.Logger, closing: make(chan struct{}), maxBytes: cfg.MaxRecordsBytes}
	for i := range cfg.Tenants {
		t := &s.cfg.Tenants[i]
		if t.Store == nil || t.LogKey == nil {
			return nil, fmt.Errorf("api: tenant %d has no store or log key", i)
		}
		name := t.Store.Tenant()
		if _, dup := s.byName[name]; dup {
			return nil, fmt.Errorf("api: tenant %q given twice", name)
		}
		s.byName[name] = t
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.cfg.Registry == nil {
		s.cfg.Registry = prometheus.NewRegistry()
	}
	if s.maxBytes <= 0 {
		s.maxBytes = DefaultMaxRecordsBytes
	}
	s.heavyReads = newHeavyReads(cfg, s.maxBytes)
	if cfg.TokenCacheTTL == 0 {
		cfg.TokenCacheTTL = DefaultTokenCacheTTL
	}
	s.tokens = newTokenCache(cfg.TokenCacheTTL, nil)
	s.reqs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "runseal_http_requests_total", Help: "HTTP API requests by route and status code.",
	}, []string{"route", "code"})
	if err := s.cfg.Registry.Register(s.reqs); err != nil {
		return nil, fmt.Errorf("api: register metrics: %w", err)
	}
	s.mux = s.routes()
	return s, nil
}

// ServeHTTP implements http.Handler. Every answer carries
// X-Content-Type-Options: nosniff, so a browser never runs a record, a
// tile or an error body as something other than its declared type.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	s.mux.ServeHTTP(w, r)
}

// Drain makes every later request answer 503 "shutting down", for the
// moments between a stop signal and the listener's close.
func (s *Server) Drain() {
	select {
	case <-s.closing:
	default:
		close(s.closing)
	}
}

// Timeouts for the http.Server that carries the API (NewHTTPServer). They
// bound what one client can hold: a connection that drips its headers or
// body, or idles, is closed.
type Timeouts struct {
	ReadHeader time.Duration // 10 s when zero
	Read       time.Duration // the whole request, body included; 60 s when zero
	Write      time.Duration // 60 s when zero
	Idle       time.Duration // 2 min when zero
}

// NewHTTPServer returns an http.Server for h with t's timeouts and a 16 KiB
// header bound; errorLog receives the server's own complaints. Timeouts
// bound how long a connection is held, not how many: serve it on a
// connlimit.Listener, with its ConnState, as 'journal serve' does.
func NewHTTPServer(h http.Handler, t Timeouts, errorLog *slog.Logger) *http.Server {
	or := func(d, def time.Duration) time.Duration {
		if d <= 0 {
			return def
		}
		return d
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: or(t.ReadHeader, 10*time.Second),
		ReadTimeout:       or(t.Read, 60*time.Second),
		WriteTimeout:      or(t.Write, 60*time.Second),
		IdleTimeout:       or(t.Idle, 2*time.Minute),
		MaxHeaderBytes:    16 << 10,
	}
	if errorLog != nil {
		srv.ErrorLog = slog.NewLogLogger(errorLog.Handler(), slog.LevelWarn)
	}
	return srv
}

func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	h := func(pattern string, need Role, fn HandlerFunc) {
		mux.Handle(pattern, s.instrument(pattern, s.authorize(need, fn)))
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if _, err := s.cfg.Tenants[0].Store.Checkpoint(r.Context()); err != nil {
			s.fail(w, r, err)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	mux.Handle("GET /metrics", s.authorize(RoleAny, func(w http.ResponseWriter, r *http.Request, _ *Tenant) error {
		promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{}).ServeHTTP(w, r)
		return nil
	}))
	// Public read surface (spec/http.md §2).
	h("GET /v1/checkpoint", RolePublic, getCheckpoint)
	h("GET /v1/checkpoint/witnessed", RolePublic, getWitnessed)
	h("GET /v1/checkpoint/{size}", RolePublic, getCheckpointAt)
	h("GET /v1/proof/consistency", RolePublic, getConsistency)
	h("GET /v1/proof/inclusion", RolePublic, getInclusion)
	// Readers.
	h("GET /v1/runs", RoleReader, listRuns)
	h("GET /v1/runs/{run}/records", RoleReader, s.heavy(s.readRecords))
	h("GET /v1/runs/{run}/head", RoleReader, getHead)
	h("GET /v1/runs/{run}/verify", RoleReader, verifyRun)
	h("GET /v1/runs/{run}/cancellation", RoleReader, getCancellation)
	// Writers.
	h("POST /v1/append", RoleWriter, postAppend)
	h("POST /v1/runs/{run}/lease", RoleWriter, postAcquire)
	h("POST /v1/runs/{run}/lease/renew", RoleWriter, postRenew)
	h("POST /v1/runs/{run}/lease/release", RoleWriter, postRelease)
	h("POST /v1/runs/{run}/seal", RoleWriter, postSeal)
	h("POST /v1/runs/{run}/cancel", RoleWriter, postCancel)
	h("POST /v1/checkpoint", RoleWriter, postCheckpoint)
	for _, rt := range s.cfg.Routes {
		if rt.Heavy {
			rt.Handle = s.heavy(rt.Handle)
		}
		h(rt.Pattern, rt.Role, rt.Handle)
	}
	return mux
}

// instrument counts requests by route pattern and status, never by raw
// path, so a client cannot create series at will.
func (s *Server) instrument(route string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(sw, r)
		s.reqs.WithLabelValues(route, strconv.Itoa(sw.code)).Inc()
	})
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// Flush passes on to the connection, so a streamed answer is sent as it is
// written.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// principal checks the request's bearer token: nil, nil when there is none.
func (s *Server) principal(r *http.Request) (*store.Token, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return nil, nil
	}
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return nil, errUnauthorized
	}
	return s.tokens.authenticate(r.Context(), s.cfg.Tokens, tok)
}

func (s *Server) authorize(need Role, fn HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-s.closing:
			s.fail(w, r, &api.Error{Status: http.StatusServiceUnavailable, Message: "shutting down"})
			return
		default:
		}
		name := r.PathValue("tenant") // a route's own tenant segment (/tiles/{tenant}/...)
		if name == "" {
			name = queryValue(r.URL.RawQuery, "tenant")
		}
		if name == "" {
			name = store.DefaultTenant
		}
		t, err := s.principal(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		switch {
		case t == nil && need == RolePublic && s.cfg.Public:
		case t == nil:
			s.fail(w, r, errUnauthorized)
			return
		case need == RoleAny:
		case t.Tenant != name:
			s.fail(w, r, &api.Error{Status: http.StatusForbidden, Message: fmt.Sprintf("the token is for tenant %s, not %s", appendinput.Quote(t.Tenant), appendinput.Quote(name))})
			return
		case need == RoleWriter && t.Role != store.RoleWriter:
			s.fail(w, r, &api.Error{Status: http.StatusForbidden, Message: "the token's role is " + t.Role + "; this needs writer"})
			return
		}
		ten := s.byName[name]
		if need != RoleAny && ten == nil {
			s.fail(w, r, notFound("tenant %s is not served here", appendinput.Quote(name)))
			return
		}
		if err := fn(w, r, ten); err != nil {
			s.fail(w, r, err)
		}
	})
}

// fail writes err as spec/http.md's JSON error with its status. A failure
// the client caused (it went away, or cut its body short) is logged at
// DEBUG and answered 400, so a client can neither write ERROR lines nor
// raise the count of 5xx answers.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, field, msg, logAs := answer(err)
	if blame.Client(r.Context(), err) && status == http.StatusInternalServerError {
		status, msg = http.StatusBadRequest, "the request ended before it was answered"
	}
	if logAs != "" {
		s.log.Log(r.Context(), blame.Level(r.Context(), err), logAs, "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="runseal"`)
	}
	writeJSON(w, status, api.ErrorBody{Error: msg, Field: field})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// writeNote answers a signed checkpoint. Checkpoint answers are never
// cached (spec/http.md): a cache would serve a stale view of the log to
// a monitor that must see the newest one.
func writeNote(w http.ResponseWriter, n []byte) error {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, err := w.Write(n)
	return err
}

// ---- public read surface ----------------------------------------------------

func getCheckpoint(w http.ResponseWriter, r *http.Request, t *Tenant) error {
	sc, err := t.Store.LatestCheckpoint(r.Context())
	if err != nil {
		return err
	}
	if sc == nil {
		return notFound("no checkpoint was signed yet")
	}
	return writeNote(w, sc.Note)
}

func getWitnessed(w http.ResponseWriter, r *http.Request, t *Tenant) error {
	sc, err := t.Store.LatestWitnessed(r.Context())
	if err != nil {
		return err
	}
	if sc == nil {
		return notFound("no checkpoint is witnessed yet")
	}
	if t.Policy != nil {
		// Kept under an earlier policy is not witnessed under this one:
		// check again rather than vouch for it.
		if _, err := t.Policy.Verify(sc.Note, PolicyLogArgs(t.Policy, t.LogKey)...); err != nil {
			return fmt.Errorf("the kept witnessed checkpoint %d does not meet the configured policy: %w", sc.Size, err)
		}
	}
	return writeNote(w, sc.Note)
}

// PolicyLogArgs returns the log verifiers to pass Policy.Verify besides
// the policy's own: logKey, unless the policy already lists it.
func PolicyLogArgs(p *checkpoint.Policy, logKey note.Verifier) []note.Verifier {
	for _, l := range p.Logs() {
		if l.Name() == logKey.Name() && l.KeyHash() == logKey.KeyHash() {
			return nil
		}
	}
	return []note.Verifier{logKey}
}

func parseSize(field, v string) (uint64, error) {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, badRequest(field, "%s %s is not a non-negative integer", field, appendinput.Quote(v))
	}
	return n, nil
}

func getCheckpointAt(w http.ResponseWriter, r *http.Request, t *Tenant) error {
	size, err := parseSize("size", r.PathValue("size"))
	if err != nil {
		return err
	}
	sc, err := t.Store.SignedCheckpointAt(r.Context(), size)
	if err != nil {
		return err
	}
	if sc == nil {
		return notFound("size %d was never signed", size)
	}
	cos, err := t.Store.Cosignatures(r.Context(), size)
	if err != nil {
		return err
	}
	// The kept lines were verified before they were kept; checking them
	// again against the log key costs little and means a corrupt row is
	// never served as a signature.
	msg := bytes.Clone(sc.Note)
	for _, id := range slices.Sorted(maps.Keys(cos)) {
		msg = append(msg, cos[id]...)
	}
	known := []note.Verifier{t.LogKey}
	if t.Policy != nil {
		for _, wt := range t.Policy.Witnesses() {
			known = append(known, wt.Verifier)
		}
	}
	signed, err := checkpoint.Open(msg, note.VerifierList(known...))
	if err != nil {
		return fmt.Errorf("kept checkpoint %d does not verify: %w", size, err)
	}
	return writeNote(w, signed.Note())
}

func getConsistency(w http.ResponseWriter, r *http.Request, t *Tenant) error {
	q := r.URL.Query()
	oldSize, err := parseSize("old", q.Get("old"))
	if err != nil {
		return err
	}
	newSize, err := parseSize("new", q.Get("new"))
	if err != nil {
		return err
	}
	p, err := t.Store.ConsistencyProof(r.Context(), oldSize, newSize)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.ConsistencyProof{OldSize: oldSize, NewSize: newSize, Proof: api.EncodeHashes(p)})
	return nil
}

func getInclusion(w http.ResponseWriter, r *http.Request, t *Tenant) error {
	q := r.URL.Query()
	run, err := store.ParseRunID(q.Get("run"))
	if err != nil {
		return badRequest("run", "run %s is not a run id", appendinput.Quote(q.Get("run")))
	}
	size, err := parseSize("size", q.Get("size"))
	if err != nil {
		return err
	}
	inc, err := t.Store.InclusionProofAt(r.Context(), run, size)
	if err != nil {
		return err
	}
	if inc == nil {
		return notFound("run %s has no leaf in the log below size %d", run, size)
	}
	writeJSON(w, http.StatusOK, api.InclusionProof{Run: run, Index: inc.Index, Size: inc.Size, Leaf: api.EncodeHash(inc.Leaf), Proof: api.EncodeHashes(inc.Proof)})
	return nil
}

// ---- readers ----------------------------------------------------------------

func runParam(r *http.Request) (store.RunID, error) {
	run, err := store.ParseRunID(r.PathValue("run"))
	if err != nil {
		return run, badRequest("run", "run %s is not a run id", appendinput.Quote(r.PathValue("run")))
	}
	return run, nil
}

func limitParam(r *http.Request, def int) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || store.ValidateLimit(n) != nil {
		return 0, badRequest("limit", "limit %s must be from 1 to %d", appendinput.Quote(v), store.MaxLimit)
	}
	return n, nil
}

func getHead(w http.ResponseWriter, r *http.Request, t *Tenant) error {
	run, err := runParam(r)
	if err != nil {
		return err
	}
	h, err := t.Store.Head(r.Context(), run)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.Head{Run: run, Seq: h.Seq, Hash: h.Hash})
	return nil
}

func verifyRun(w http.ResponseWriter, r *http.Request, t *Tenant) error {
	run, err := runParam(r)
	if err != nil {
		return err
	}
	d, err := t.Store.Verify(r.Context(), run)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.Verified{Run: run, OK: true, Head: d})
	return nil
}

func getCancellation(w http.ResponseWriter, r *http.Request, t *Tenant) error {
	run, err := runParam(r)
	if err != nil {
		return err
	}
	c, err := t.Store.Cancellation(r.Context(), run)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.CancellationState{Run: run, Cancellation: c})
	return nil
}

// listRuns lists runs: by=id (default, after=RUN), by=recent (after=AT:RUN,
// source=S), by=outcome (outcome=O), by=waiting or by=abandoned.
func listRuns(w http.ResponseWriter, r *http.Request, t *Tenant) error {
	q := r.URL.Query()
	limit, err := limitParam(r, 100)
	if err != nil {
		return err
	}
	ctx := r.Context()
	switch by := q.Get("by"); by {
	case "", "id":
		var after *store.RunID
		if v := q.Get("after"); v != "" {
			a, err := store.ParseRunID(v)
			if err != nil {
				return badRequest("after", "after %s is not a run id", appendinput.Quote(v))
			}
			after = &a
		}
		return writeRuns[store.RunID](w)(t.Store.RunsByID(ctx, after, limit))
	case "recent":
		var after *store.Activity
		if v := q.Get("after"); v != "" {
			at, run, ok := strings.Cut(v, ":")
			n, err1 := strconv.ParseUint(at, 10, 64)
			id, err2 := store.ParseRunID(run)
			if !ok || err1 != nil || err2 != nil {
				return badRequest("after", "after %s is not AT:RUN", appendinput.Quote(v))
			}
			after = &store.Activity{Run: id, At: n}
		}
		if src := q.Get("source"); src != "" {
			return writeRuns[store.Activity](w)(t.Store.RecentRunsFrom(ctx, src, after, limit))
		}
		return writeRuns[store.Activity](w)(t.Store.RecentRuns(ctx, after, limit))
	case "outcome":
		o := q.Get("outcome")
		if o == "" {
			return badRequest("outcome", "by=outcome needs outcome")
		}
		return writeRuns[store.RunID](w)(t.Store.RunsByOutcome(ctx, o, limit))
	case "waiting":
		return writeRuns[store.WaitingRun](w)(t.Store.WaitingRuns(ctx, limit))
	case "abandoned":
		return writeRuns[store.RunID](w)(t.Store.AbandonedRuns(ctx, limit))
	default:
		return badRequest("by", "by %s: want id, recent, outcome, waiting or abandoned", appendinput.Quote(by))
	}
}

// writeRuns answers a listing, [] rather than null when it is empty.
func writeRuns[T any](w http.ResponseWriter) func([]T, error) error {
	return func(runs []T, err error) error {
		if err != nil {
			return err
		}
		if runs == nil {
			runs = []T{}
		}
		writeJSON(w, http.StatusOK, api.Runs[T]{Runs: runs})
		return nil
	}
}

// ---- writers ----------------------------------------------------------------

// postAppend takes the same JSON Lines as 'journal append', with the epoch
// as a query parameter. Batches (consecutive lines of one run) commit in
// order; on a refusal the answer says which were committed.
func postAppend(w http.ResponseWriter, r *http.Request, t *Tenant) error {
	e, err := strconv.ParseUint(queryValue(r.URL.RawQuery, "epoch"), 10, 64)
	if err != nil || store.ValidateEpoch(store.Epoch(e)) != nil {
		return badRequest("epoch", "epoch must be from 1 to 2^62")
	}
	body := http.MaxBytesReader(w, r.Body, MaxAppendBody)
	batches, err := appendinput.Split(body, store.Epoch(e))
	if err != nil {
		return inputError(err)
	}
	n := 0
	for _, b := range batches {
		n += len(b.Lines)
	}
	acks := make([]api.Ack, 0, n)
	for _, b := range batches {
		recs, err := t.Store.Append(r.Context(), store.Epoch(e), b.Appends)
		if err != nil {
			if len(acks) == 0 {
				// Split left a lone batch's records to the store; a line
				// at fault is named as Parse would have named it.
				if cerr := appendinput.Check(batches, store.Epoch(e)); cerr != nil {
					return inputError(cerr)
				}
				return err
			}
			return fmt.Errorf("%w (%s refused; %d records of earlier batches were committed)", err, b.Describe(), len(acks))
		}
		for i, rec := range recs {
			acks = append(acks, api.Ack{Line: b.Lines[i], Run: rec.Run, Seq: rec.Seq, Hash: rec.Hash})
		}
	}
	writeAppended(w, api.Appended{Records: acks})
	return nil
}

// inputError is the answer to an append body that appendinput refused:
// nothing of it was written.
func inputError(err error) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe), errors.Is(err, store.ErrRecordTooLarge):
		return err
	case errors.Is(err, appendinput.ErrLineTooLong):
		return &api.Error{Status: http.StatusRequestEntityTooLarge, Message: err.Error() + "; nothing was written"}
	}
	return badRequest("", "%v; nothing was written", err)
}

// leaseTTL turns ttl_seconds into a Duration, refusing a count the store would
// not take before multiplying: a count near 2^64/1e9 seconds would wrap
// into a small, valid-looking TTL and be granted as something nobody asked.
func leaseTTL(req api.LeaseRequest) (time.Duration, error) {
	if req.TTL < 1 || req.TTL > int64(store.MaxTTL/time.Second) {
		return 0, &store.InvalidArgumentError{Field: "ttl_seconds", Detail: fmt.Sprintf("%d is not from 1 to %d", req.TTL, int64(store.MaxTTL/time.Second))}
	}
	return time.Duration(req.TTL) * time.Second, nil
}

// leaseRequest reads the run and a strict LeaseRequest body; with owned,
// the owner and ttl must be valid too.
func leaseRequest(w http.ResponseWriter, r *http.Request, owned bool) (store.RunID, api.LeaseRequest, time.Duration, error) {
	var req api.LeaseRequest
	run, err := runParam(r)
	if err != nil {
		return run, req, 0, err
	}
	if err := decodeBody(w, r, &req); err != nil {
		return run, req, 0, err
	}
	if !owned {
		return run, req, 0, nil
	}
	if err := checkText("owner", req.Owner); err != nil {
		return run, req, 0, err
	}
	ttl, err := leaseTTL(req)
	return run, req, ttl, err
}

func postAcquire(w http.ResponseWriter, r *http.Request, t *Tenant) error {
	run, req, ttl, err := leaseRequest(w, r, true)
	if err != nil {
		return err
	}
	l, err := t.Store.Acquire(r.Context(), run, req.Owner, ttl)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, l)
	return nil
}

func postRenew(w http.ResponseWriter, r *http.Request, t *Tenant) error {
	run, req, ttl, err := leaseRequest(w, r, true)
	if err != nil {
		return err
	}
	l, err := t.Store.Renew(r.Context(), run, req.Owner, store.Epoch(req.Epoch), ttl)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, l)
	return nil
}

func postRelease(w http.ResponseWriter, r *http.Request, t *Tenant) error {
	run, req, _, err := leaseRequest(w, r, false)
	if err != nil {
		return err
	}
	if err := t.Store.ReleaseLease(r.Context(), run, store.Epoch(req.Epoch)); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.Released{Run: run, Released: true})
	return nil
}

func postSeal(w http.ResponseWriter, r *http.Request, t *Tenant) error {
	run, err := runParam(r)
	if err != nil {
		return err
	}
	var req api.SealRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	d, err := t.Store.Seal(r.Context(), run, store.Epoch(req.Epoch), req.Outcome)
	if err != nil {
		return err
	}
	if t.Signer != nil {
		t.Signer.Sealed()
	}
	writeJSON(w, http.StatusOK, api.Sealed{Run: run, Outcome: req.Outcome, Leaf: d})
	return nil
}

func postCancel(w http.ResponseWriter, r *http.Request, t *Tenant) error {
	run, err := runParam(r)
	if err != nil {
		return err
	}
	var req api.CancelRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	if req.Reason == "" || len(req.Reason) > 4096 {
		return badRequest("reason", "reason must be 1 to 4096 bytes")
	}
	if err := checkText("actor", req.Actor); err != nil {
		return err
	}
	// The token authenticated the caller, but not the actor name it gives.
	op := store.Operator{Actor: req.Actor, Basis: store.Asserted}
	if err := op.Validate(); err != nil {
		return err
	}
	created, err := t.Store.RequestCancel(r.Context(), run, op, req.Reason)
	if err != nil {
		return err
	}
	c, err := t.Store.Cancellation(r.Context(), run)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.Cancelled{Run: run, Created: created, Cancellation: c})
	return nil
}

// postCheckpoint signs the current checkpoint now, without waiting for the
// interval, and queues it for the witnesses.
func postCheckpoint(w http.ResponseWriter, r *http.Request, t *Tenant) error {
	if t.Signer == nil {
		return &api.Error{Status: http.StatusNotFound, Message: "this server does not sign checkpoints"}
	}
	sc, err := t.Signer.SignNow(r.Context())
	if err != nil {
		return err
	}
	if sc == nil {
		return &api.Error{Status: http.StatusConflict, Message: "the log is empty; nothing to sign"}
	}
	return writeNote(w, sc.Note)
}
