package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
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
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/publish"
	"github.com/runseal/runseal/store"
)

// maxBody caps a request body: an append of many records, well above one
// record's 1 MiB, but finite.
const maxBody = 16 << 20

// serveStore is what serve needs of a backend beyond journalStore: the
// publication outbox and the tokens.
type serveStore interface {
	journalStore
	store.PublicationStore
	store.TokenStore
}

// server is the HTTP API of one tenant's journal (spec/http.md).
type server struct {
	st      serveStore
	tenant  string
	origin  string
	public  bool // the read surface of spec/http.md §2 answers without a token
	signer  note.Signer
	logKey  note.Verifier
	policy  *checkpoint.Policy // nil: no witnesses configured
	pub     *publish.Publisher // nil: no witnesses configured
	log     *slog.Logger
	reg     *prometheus.Registry
	reqs    *prometheus.CounterVec
	sealed  chan struct{} // one send per seal, for the signer
	signMu  sync.Mutex
	closing chan struct{}
}

// Roles a route needs; rolePublic routes answer everyone when s.public.
type role int

const (
	rolePublic role = iota
	roleReader
	roleWriter
	roleAny // any valid token of any tenant (metrics)
)

func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	h := func(pattern string, need role, fn func(w http.ResponseWriter, r *http.Request) error) {
		mux.Handle(pattern, s.instrument(pattern, s.authorize(need, fn)))
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := s.health(r.Context()); err != nil {
			s.fail(w, r, err)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	mux.Handle("GET /metrics", s.authorize(roleAny, func(w http.ResponseWriter, r *http.Request) error {
		promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
		return nil
	}))
	// Public read surface (spec/http.md §2).
	h("GET /v1/checkpoint", rolePublic, s.getCheckpoint)
	h("GET /v1/checkpoint/witnessed", rolePublic, s.getWitnessed)
	h("GET /v1/checkpoint/{size}", rolePublic, s.getCheckpointAt)
	h("GET /v1/proof/consistency", rolePublic, s.getConsistency)
	h("GET /v1/proof/inclusion", rolePublic, s.getInclusion)
	// Readers.
	h("GET /v1/runs", roleReader, s.listRuns)
	h("GET /v1/runs/{run}/records", roleReader, s.readRecords)
	h("GET /v1/runs/{run}/head", roleReader, s.getHead)
	h("GET /v1/runs/{run}/verify", roleReader, s.verifyRun)
	h("GET /v1/runs/{run}/cancellation", roleReader, s.getCancellation)
	// Writers.
	h("POST /v1/append", roleWriter, s.postAppend)
	h("POST /v1/runs/{run}/lease", roleWriter, s.postAcquire)
	h("POST /v1/runs/{run}/lease/renew", roleWriter, s.postRenew)
	h("POST /v1/runs/{run}/lease/release", roleWriter, s.postRelease)
	h("POST /v1/runs/{run}/seal", roleWriter, s.postSeal)
	h("POST /v1/runs/{run}/cancel", roleWriter, s.postCancel)
	h("POST /v1/checkpoint", roleWriter, s.postCheckpoint)
	return mux
}

// instrument counts requests by route pattern and status, never by raw
// path, so a client cannot create series at will.
func (s *server) instrument(route string, next http.Handler) http.Handler {
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

// apiError is an error with the HTTP status and field it maps to.
type apiError struct {
	status int
	field  string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(field, format string, args ...any) error {
	return &apiError{status: http.StatusBadRequest, field: field, msg: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &apiError{status: http.StatusNotFound, msg: fmt.Sprintf(format, args...)}
}

// Token format: "rs_" + 16 hex id + "_" + 43 base64url secret characters.
// The id finds the row; the SHA-256 of the whole token is what is stored
// and compared, so a leaked database holds no usable token.
const tokenPrefix = "rs_"

func newToken() (id, secret string, hash store.Digest, err error) {
	var b [8 + 32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", hash, err
	}
	id = hex.EncodeToString(b[:8])
	secret = tokenPrefix + id + "_" + base64.RawURLEncoding.EncodeToString(b[8:])
	return id, secret, sha256.Sum256([]byte(secret)), nil
}

// tokenID returns the id part of a well-formed token.
func tokenID(tok string) (string, bool) {
	rest, ok := strings.CutPrefix(tok, tokenPrefix)
	if !ok || len(rest) != 16+1+43 || rest[16] != '_' {
		return "", false
	}
	if _, err := hex.DecodeString(rest[:16]); err != nil {
		return "", false
	}
	return rest[:16], true
}

var errUnauthorized = &apiError{status: http.StatusUnauthorized, msg: "a valid bearer token is required"}

// principal checks the request's bearer token: nil, nil when there is none.
func (s *server) principal(r *http.Request) (*store.Token, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return nil, nil
	}
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return nil, errUnauthorized
	}
	id, ok := tokenID(tok)
	if !ok {
		return nil, errUnauthorized
	}
	t, err := s.st.TokenByID(r.Context(), id)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(tok))
	// Compare even when the id is unknown, so timing does not tell a
	// guessed id from a guessed secret.
	var want store.Digest
	if t != nil {
		want = t.Hash
	}
	if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 || t == nil || t.Revoked != nil {
		return nil, errUnauthorized
	}
	return t, nil
}

func (s *server) authorize(need role, fn func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-s.closing:
			s.fail(w, r, &apiError{status: http.StatusServiceUnavailable, msg: "shutting down"})
			return
		default:
		}
		tenant := r.URL.Query().Get("tenant")
		if tenant == "" {
			tenant = store.DefaultTenant
		}
		t, err := s.principal(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		switch {
		case t == nil && need == rolePublic && s.public:
		case t == nil:
			s.fail(w, r, errUnauthorized)
			return
		case need == roleAny:
		case t.Tenant != tenant:
			s.fail(w, r, &apiError{status: http.StatusForbidden, msg: fmt.Sprintf("the token is for tenant %q, not %q", t.Tenant, tenant)})
			return
		case need == roleWriter && t.Role != store.RoleWriter:
			s.fail(w, r, &apiError{status: http.StatusForbidden, msg: "the token's role is " + t.Role + "; this needs writer"})
			return
		}
		if need != roleAny && tenant != s.tenant {
			s.fail(w, r, notFound("tenant %q is not served here", tenant))
			return
		}
		if err := fn(w, r); err != nil {
			s.fail(w, r, err)
		}
	})
}

// fail writes err as spec/http.md's JSON error with its status. Store
// failures are logged and answered without their detail.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, field, msg := http.StatusInternalServerError, "", "internal error"
	var ae *apiError
	var ia *store.InvalidArgumentError
	var tl *store.RecordTooLargeError
	var nf *store.NotFoundError
	var fe *store.FencedError
	var lh *store.LeaseHeldError
	var ln *store.LeaseNotHeldError
	var rs *store.RunSealedError
	var de *store.DuplicateEffectError
	var da *store.DuplicateAdmissionError
	switch {
	case errors.As(err, &ae):
		status, field, msg = ae.status, ae.field, ae.msg
	case errors.As(err, &ia):
		status, field, msg = http.StatusBadRequest, ia.Field, err.Error()
	case errors.As(err, &tl):
		status, msg = http.StatusRequestEntityTooLarge, err.Error()
	case errors.As(err, &nf):
		status, msg = http.StatusNotFound, err.Error()
	case errors.As(err, &fe), errors.As(err, &lh), errors.As(err, &ln), errors.As(err, &rs), errors.As(err, &de), errors.As(err, &da):
		status, msg = http.StatusConflict, err.Error()
	case errors.As(err, new(*store.CorruptError)):
		// A broken chain or row is the answer a reader asked for, not a
		// detail to hide; it is also logged, since someone must act on it.
		status, msg = http.StatusInternalServerError, err.Error()
		s.log.Error("serve: the store is corrupt", "method", r.Method, "path", r.URL.Path, "err", err)
	case errors.Is(err, store.ErrClosed):
		status, msg = http.StatusServiceUnavailable, "shutting down"
	default:
		s.log.Error("serve: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="runseal"`)
	}
	body := map[string]string{"error": msg}
	if field != "" {
		body["field"] = field
	}
	writeJSONStatus(w, status, body)
}

func writeJSONStatus(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func writeNote(w http.ResponseWriter, n []byte) error {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, err := w.Write(n)
	return err
}

func (s *server) health(ctx context.Context) error {
	_, err := s.st.Checkpoint(ctx)
	return err
}

// ---- public read surface ----------------------------------------------------

func (s *server) getCheckpoint(w http.ResponseWriter, r *http.Request) error {
	sc, err := s.st.LatestCheckpoint(r.Context())
	if err != nil {
		return err
	}
	if sc == nil {
		return notFound("no checkpoint was signed yet")
	}
	return writeNote(w, sc.Note)
}

func (s *server) getWitnessed(w http.ResponseWriter, r *http.Request) error {
	sc, err := s.st.LatestWitnessed(r.Context())
	if err != nil {
		return err
	}
	if sc == nil {
		return notFound("no checkpoint is witnessed yet")
	}
	if s.policy != nil {
		// Kept under an earlier policy is not witnessed under this one:
		// check again rather than vouch for it.
		if _, err := s.policy.Verify(sc.Note, policyLogArgs(s.policy, s.logKey)...); err != nil {
			return fmt.Errorf("the kept witnessed checkpoint %d does not meet the configured policy: %w", sc.Size, err)
		}
	}
	return writeNote(w, sc.Note)
}

// policyLogArgs returns the log verifiers to pass Policy.Verify besides
// the policy's own: this log's key, unless the policy already lists it.
func policyLogArgs(p *checkpoint.Policy, logKey note.Verifier) []note.Verifier {
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
		return 0, badRequest(field, "%s %q is not a non-negative integer", field, v)
	}
	return n, nil
}

func (s *server) getCheckpointAt(w http.ResponseWriter, r *http.Request) error {
	size, err := parseSize("size", r.PathValue("size"))
	if err != nil {
		return err
	}
	sc, err := s.st.SignedCheckpointAt(r.Context(), size)
	if err != nil {
		return err
	}
	if sc == nil {
		return notFound("size %d was never signed", size)
	}
	cos, err := s.st.Cosignatures(r.Context(), size)
	if err != nil {
		return err
	}
	// The kept lines were verified before they were kept; checking them
	// again against the log key costs little and means a corrupt row is
	// never served as a signature.
	msg := bytes.Clone(sc.Note)
	for _, id := range sortedKeys(cos) {
		msg = append(msg, cos[id]...)
	}
	known := []note.Verifier{s.logKey}
	if s.policy != nil {
		for _, wt := range s.policy.Witnesses() {
			known = append(known, wt.Verifier)
		}
	}
	signed, err := checkpoint.Open(msg, note.VerifierList(known...))
	if err != nil {
		return fmt.Errorf("kept checkpoint %d does not verify: %w", size, err)
	}
	return writeNote(w, signed.Note())
}

func (s *server) getConsistency(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	oldSize, err := parseSize("old", q.Get("old"))
	if err != nil {
		return err
	}
	newSize, err := parseSize("new", q.Get("new"))
	if err != nil {
		return err
	}
	p, err := s.st.ConsistencyProof(r.Context(), oldSize, newSize)
	if err != nil {
		return err
	}
	writeJSONStatus(w, http.StatusOK, map[string]any{"old_size": oldSize, "new_size": newSize, "proof": b64s(p)})
	return nil
}

func (s *server) getInclusion(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	run, err := store.ParseRunID(q.Get("run"))
	if err != nil {
		return badRequest("run", "run %q is not a run id", q.Get("run"))
	}
	size, err := parseSize("size", q.Get("size"))
	if err != nil {
		return err
	}
	inc, err := s.st.InclusionProofAt(r.Context(), run, size)
	if err != nil {
		return err
	}
	if inc == nil {
		return notFound("run %s has no leaf in the log below size %d", run, size)
	}
	writeJSONStatus(w, http.StatusOK, map[string]any{"run": run, "index": inc.Index, "size": inc.Size, "leaf": b64(inc.Leaf), "proof": b64s(inc.Proof)})
	return nil
}

// ---- readers ----------------------------------------------------------------

func runParam(r *http.Request) (store.RunID, error) {
	run, err := store.ParseRunID(r.PathValue("run"))
	if err != nil {
		return run, badRequest("run", "run %q is not a run id", r.PathValue("run"))
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
		return 0, badRequest("limit", "limit %q must be from 1 to %d", v, store.MaxLimit)
	}
	return n, nil
}

type recordJSON struct {
	Seq      store.Seq       `json:"seq"`
	PrevHash store.Digest    `json:"prev_hash"`
	Hash     store.Digest    `json:"hash"`
	Raw      json.RawMessage `json:"raw"`
}

func (s *server) readRecords(w http.ResponseWriter, r *http.Request) error {
	run, err := runParam(r)
	if err != nil {
		return err
	}
	from := uint64(1)
	if v := r.URL.Query().Get("from"); v != "" {
		if from, err = parseSize("from", v); err != nil || from == 0 {
			return badRequest("from", "from must be a seq from 1")
		}
	}
	limit, err := limitParam(r, 1000)
	if err != nil {
		return err
	}
	recs, err := s.st.ReadPage(r.Context(), run, store.Seq(from), limit)
	if err != nil {
		return err
	}
	out := make([]recordJSON, len(recs))
	for i, rec := range recs {
		out[i] = recordJSON{Seq: rec.Seq, PrevHash: rec.PrevHash, Hash: rec.Hash, Raw: rec.Raw}
	}
	writeJSONStatus(w, http.StatusOK, map[string]any{"run": run, "records": out})
	return nil
}

func (s *server) getHead(w http.ResponseWriter, r *http.Request) error {
	run, err := runParam(r)
	if err != nil {
		return err
	}
	h, err := s.st.Head(r.Context(), run)
	if err != nil {
		return err
	}
	writeJSONStatus(w, http.StatusOK, map[string]any{"run": run, "seq": h.Seq, "hash": h.Hash})
	return nil
}

func (s *server) verifyRun(w http.ResponseWriter, r *http.Request) error {
	run, err := runParam(r)
	if err != nil {
		return err
	}
	d, err := s.st.Verify(r.Context(), run)
	if err != nil {
		return err
	}
	writeJSONStatus(w, http.StatusOK, map[string]any{"run": run, "ok": true, "head": d})
	return nil
}

func (s *server) getCancellation(w http.ResponseWriter, r *http.Request) error {
	run, err := runParam(r)
	if err != nil {
		return err
	}
	c, err := s.st.Cancellation(r.Context(), run)
	if err != nil {
		return err
	}
	writeJSONStatus(w, http.StatusOK, map[string]any{"run": run, "cancellation": c})
	return nil
}

// listRuns lists runs: by=id (default, after=RUN), by=recent (after=AT:RUN,
// source=S), by=outcome (outcome=O), by=waiting or by=abandoned.
func (s *server) listRuns(w http.ResponseWriter, r *http.Request) error {
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
				return badRequest("after", "after %q is not a run id", v)
			}
			after = &a
		}
		runs, err := s.st.RunsByID(ctx, after, limit)
		if err != nil {
			return err
		}
		writeJSONStatus(w, http.StatusOK, map[string]any{"runs": orEmpty(runs)})
	case "recent":
		var after *store.Activity
		if v := q.Get("after"); v != "" {
			at, run, ok := strings.Cut(v, ":")
			n, err1 := strconv.ParseUint(at, 10, 64)
			id, err2 := store.ParseRunID(run)
			if !ok || err1 != nil || err2 != nil {
				return badRequest("after", "after %q is not AT:RUN", v)
			}
			after = &store.Activity{Run: id, At: n}
		}
		var acts []store.Activity
		if src := q.Get("source"); src != "" {
			acts, err = s.st.RecentRunsFrom(ctx, src, after, limit)
		} else {
			acts, err = s.st.RecentRuns(ctx, after, limit)
		}
		if err != nil {
			return err
		}
		writeJSONStatus(w, http.StatusOK, map[string]any{"runs": orEmpty(acts)})
	case "outcome":
		o := q.Get("outcome")
		if o == "" {
			return badRequest("outcome", "by=outcome needs outcome")
		}
		runs, err := s.st.RunsByOutcome(ctx, o, limit)
		if err != nil {
			return err
		}
		writeJSONStatus(w, http.StatusOK, map[string]any{"runs": orEmpty(runs)})
	case "waiting":
		runs, err := s.st.WaitingRuns(ctx, limit)
		if err != nil {
			return err
		}
		writeJSONStatus(w, http.StatusOK, map[string]any{"runs": orEmpty(runs)})
	case "abandoned":
		runs, err := s.st.AbandonedRuns(ctx, limit)
		if err != nil {
			return err
		}
		writeJSONStatus(w, http.StatusOK, map[string]any{"runs": orEmpty(runs)})
	default:
		return badRequest("by", "by %q: want id, recent, outcome, waiting or abandoned", by)
	}
	return nil
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// ---- writers ----------------------------------------------------------------

func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("", "request body: %v", err)
	}
	if dec.More() {
		return badRequest("", "request body: trailing data")
	}
	return nil
}

// postAppend takes the same JSON Lines as 'journal append', with the epoch
// as a query parameter. Batches (consecutive lines of one run) commit in
// order; on a refusal the answer says which were committed.
func (s *server) postAppend(w http.ResponseWriter, r *http.Request) error {
	e, err := strconv.ParseUint(r.URL.Query().Get("epoch"), 10, 64)
	if err != nil || store.ValidateEpoch(store.Epoch(e)) != nil {
		return badRequest("epoch", "epoch must be from 1 to 2^62")
	}
	body := http.MaxBytesReader(w, r.Body, maxBody)
	batches, err := parseAppends(body, store.Epoch(e))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &apiError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("body over %d bytes", maxBody)}
		}
		var tl *store.RecordTooLargeError
		if errors.As(err, &tl) {
			return err
		}
		return badRequest("", "%v; nothing was written", err)
	}
	var acks []ackLine
	for _, b := range batches {
		recs, err := s.st.Append(r.Context(), store.Epoch(e), b.appends)
		if err != nil {
			if len(acks) == 0 {
				return err
			}
			return fmt.Errorf("%w (%s refused; %d records of earlier batches were committed)", err, b.describe(), len(acks))
		}
		for i, rec := range recs {
			acks = append(acks, ackLine{Line: b.lines[i], Run: rec.Run, Seq: rec.Seq, Hash: rec.Hash})
		}
	}
	writeJSONStatus(w, http.StatusOK, map[string]any{"records": acks})
	return nil
}

type leaseReq struct {
	Owner string `json:"owner"`
	Epoch uint64 `json:"epoch"`
	TTL   int64  `json:"ttl_seconds"`
}

// ttl turns ttl_seconds into a Duration, refusing a count the store would
// not take before multiplying: a count near 2^64/1e9 seconds would wrap
// into a small, valid-looking TTL and be granted as something nobody asked.
func (req leaseReq) ttl() (time.Duration, error) {
	if req.TTL < 1 || req.TTL > int64(store.MaxTTL/time.Second) {
		return 0, &store.InvalidArgumentError{Field: "ttl_seconds", Detail: fmt.Sprintf("%d is not from 1 to %d", req.TTL, int64(store.MaxTTL/time.Second))}
	}
	return time.Duration(req.TTL) * time.Second, nil
}

func (s *server) postAcquire(w http.ResponseWriter, r *http.Request) error {
	run, err := runParam(r)
	if err != nil {
		return err
	}
	var req leaseReq
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	ttl, err := req.ttl()
	if err != nil {
		return err
	}
	l, err := s.st.Acquire(r.Context(), run, req.Owner, ttl)
	if err != nil {
		return err
	}
	writeJSONStatus(w, http.StatusOK, l)
	return nil
}

func (s *server) postRenew(w http.ResponseWriter, r *http.Request) error {
	run, err := runParam(r)
	if err != nil {
		return err
	}
	var req leaseReq
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	ttl, err := req.ttl()
	if err != nil {
		return err
	}
	l, err := s.st.Renew(r.Context(), run, req.Owner, store.Epoch(req.Epoch), ttl)
	if err != nil {
		return err
	}
	writeJSONStatus(w, http.StatusOK, l)
	return nil
}

func (s *server) postRelease(w http.ResponseWriter, r *http.Request) error {
	run, err := runParam(r)
	if err != nil {
		return err
	}
	var req leaseReq
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if err := s.st.ReleaseLease(r.Context(), run, store.Epoch(req.Epoch)); err != nil {
		return err
	}
	writeJSONStatus(w, http.StatusOK, map[string]any{"run": run, "released": true})
	return nil
}

func (s *server) postSeal(w http.ResponseWriter, r *http.Request) error {
	run, err := runParam(r)
	if err != nil {
		return err
	}
	var req struct {
		Epoch   uint64 `json:"epoch"`
		Outcome string `json:"outcome"`
	}
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	d, err := s.st.Seal(r.Context(), run, store.Epoch(req.Epoch), req.Outcome)
	if err != nil {
		return err
	}
	select {
	case s.sealed <- struct{}{}:
	default: // the signer is busy; it counts what it can, and the interval catches the rest
	}
	writeJSONStatus(w, http.StatusOK, map[string]any{"run": run, "outcome": req.Outcome, "leaf": d})
	return nil
}

func (s *server) postCancel(w http.ResponseWriter, r *http.Request) error {
	run, err := runParam(r)
	if err != nil {
		return err
	}
	var req struct {
		Actor  string `json:"actor"`
		Reason string `json:"reason"`
	}
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if req.Reason == "" || len(req.Reason) > 4096 {
		return badRequest("reason", "reason must be 1 to 4096 bytes")
	}
	// The token authenticated the caller, but not the actor name it gives.
	op := store.Operator{Actor: req.Actor, Basis: store.Asserted}
	if err := op.Validate(); err != nil {
		return err
	}
	created, err := s.st.RequestCancel(r.Context(), run, op, req.Reason)
	if err != nil {
		return err
	}
	c, err := s.st.Cancellation(r.Context(), run)
	if err != nil {
		return err
	}
	writeJSONStatus(w, http.StatusOK, map[string]any{"run": run, "created": created, "cancellation": c})
	return nil
}

// postCheckpoint signs the current checkpoint now, without waiting for the
// interval, and queues it for the witnesses.
func (s *server) postCheckpoint(w http.ResponseWriter, r *http.Request) error {
	sc, err := s.signNow(r.Context())
	if err != nil {
		return err
	}
	if sc == nil {
		return &apiError{status: http.StatusConflict, msg: "the log is empty; nothing to sign"}
	}
	return writeNote(w, sc.Note)
}

// ---- signer -----------------------------------------------------------------

// signNow signs and keeps the current checkpoint and queues it for the
// witnesses; nil for an empty log, which no one needs witnessed.
func (s *server) signNow(ctx context.Context) (*store.SignedCheckpoint, error) {
	s.signMu.Lock()
	defer s.signMu.Unlock()
	cur, err := s.st.Checkpoint(ctx)
	if err != nil || cur.Size == 0 {
		return nil, err
	}
	sc, err := signAndKeep(ctx, s.st, s.signer)
	if err != nil {
		return nil, err
	}
	if s.pub != nil {
		if err := s.pub.Enqueue(ctx, sc.Size); err != nil {
			return nil, fmt.Errorf("queue checkpoint %d for the witnesses: %w", sc.Size, err)
		}
	}
	return &sc, nil
}

// runSigner signs on every interval and after every `every` seals, until
// ctx ends.
func (s *server) runSigner(ctx context.Context, interval time.Duration, every int) {
	sign := func() {
		if _, err := s.signNow(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("serve: signing a checkpoint", "err", err)
		}
	}
	sign()
	t := time.NewTicker(interval)
	defer t.Stop()
	seals := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			seals = 0
			sign()
		case <-s.sealed:
			if seals++; seals >= every {
				seals = 0
				sign()
			}
		}
	}
}

func sortedKeys(m map[string][]byte) []string { return slices.Sorted(maps.Keys(m)) }
