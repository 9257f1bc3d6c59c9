package tiles

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/runseal/runseal/internal/blame"
)

// Cache-Control values (spec/tiles.md): tiles and bundles never change, a
// checkpoint changes with every signing. A tile of a log that needs a token
// to read is private: a shared cache (a CDN, a corporate proxy) that kept it
// would serve it to anyone without one.
const (
	CacheImmutable        = "public, max-age=31536000, immutable"
	CacheImmutablePrivate = "private, max-age=31536000, immutable"
	CacheNoStore          = "no-store"
)

// Handler serves one log's layout over HTTP: mount it under the prefix
// with http.StripPrefix so that the request path is "checkpoint",
// "checkpoint-witnessed" or a tile path. Only GET and HEAD are answered.
// Each request reads the newest signed checkpoint first, so a tile the
// checkpoint does not imply is 404, never served early.
type Handler struct {
	Log    *Log
	Logger *slog.Logger // nil: slog.Default()
	// Public lets shared caches keep tiles (CacheImmutable): set it only
	// when anyone may read the log. Otherwise tiles are sent
	// CacheImmutablePrivate.
	Public bool
}

// NewHandler returns a Handler for l.
func NewHandler(l *Log, logger *slog.Logger) *Handler {
	return &Handler{Log: l, Logger: logger}
}

func (h *Handler) logger() *slog.Logger {
	if h.Logger != nil {
		return h.Logger
	}
	return slog.Default()
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	p := strings.TrimPrefix(r.URL.Path, "/")
	ctx := r.Context()
	switch p {
	case CheckpointPath, WitnessedPath:
		get := h.Log.Checkpoint
		if p == WitnessedPath {
			get = h.Log.Witnessed
		}
		sc, err := get(ctx)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		serve(w, r, sc.Note, "text/plain; charset=utf-8", CacheNoStore)
		return
	}
	ref, err := ParsePath(p)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	sc, err := h.Log.Checkpoint(ctx)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	b, err := h.Log.Resource(ctx, ref, sc.Size)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	cache := CacheImmutablePrivate
	if h.Public {
		cache = CacheImmutable
	}
	serve(w, r, b, "application/octet-stream", cache)
}

// serve writes body with a strong ETag (its SHA-256) and lets
// http.ServeContent answer conditional, range and HEAD requests.
func serve(w http.ResponseWriter, r *http.Request, body []byte, ctype, cache string) {
	sum := sha256.Sum256(body)
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Cache-Control", cache)
	w.Header().Set("ETag", `"`+base64.RawURLEncoding.EncodeToString(sum[:18])+`"`)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	w.Header().Set("Cache-Control", CacheNoStore)
	switch {
	case errors.Is(err, ErrNoCheckpoint):
		http.Error(w, "the log has no signed checkpoint yet", http.StatusNotFound)
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrMalformed):
		// A path outside the layout is simply not there, as for a static
		// file server; the body says why.
		http.Error(w, err.Error(), http.StatusNotFound)
	default:
		// A client that went away is not a failure of ours (internal/blame).
		h.logger().Log(r.Context(), blame.Level(r.Context(), err), "tiles: serving", "path", r.URL.Path, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
	}
}
