package witness

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/runseal/runseal/internal/blame"
)

// Content types of the tlog-witness protocol.
const (
	// ContentTypeTlogSize is the type of a 409 answer: the witness's size
	// in decimal and a newline.
	ContentTypeTlogSize = "text/x.tlog.size"
	contentTypeText     = "text/plain; charset=utf-8"
)

// Handler returns the witness's HTTP API under prefix (empty, or a path
// starting with "/", not ending in "/", of letters, digits and "-._~/"), the
// witness's submission and monitoring prefix:
//
//	POST <prefix>/add-checkpoint           C2SP tlog-witness add-checkpoint
//	GET  <prefix>/<origin hash>/checkpoint latest cosigned checkpoint of a log
//
// where <origin hash> is the lowercase hex SHA-256 of the log's origin.
// Anything else is 404, or 405 for another method on these paths.
func (w *Witness) Handler(prefix string) (http.Handler, error) {
	if prefix != "" && (!strings.HasPrefix(prefix, "/") || strings.HasSuffix(prefix, "/") || strings.Contains(prefix, "//") ||
		strings.IndexFunc(prefix, func(r rune) bool { return !isPathRune(r) }) >= 0) {
		return nil, fmt.Errorf("witness: prefix %q must be empty or start with '/', not end with '/', and hold only letters, digits and -._~/", prefix)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+prefix+"/add-checkpoint", w.serveAddCheckpoint)
	mux.HandleFunc("GET "+prefix+"/{hash}/checkpoint", w.serveCheckpoint)
	return mux, nil
}

func (w *Witness) serveAddCheckpoint(rw http.ResponseWriter, r *http.Request) {
	start := time.Now()
	lines, origin, err := w.handleAdd(r)
	code := StatusCode(err)
	w.metrics.observeRequest(origin, code, time.Since(start))
	h := rw.Header()
	switch {
	case err == nil:
		h.Set("Content-Type", contentTypeText)
		rw.WriteHeader(http.StatusOK)
		rw.Write(lines)
		return
	case code == http.StatusConflict:
		if ce, ok := errors.AsType[*ConflictError](err); ok {
			h.Set("Content-Type", ContentTypeTlogSize)
			rw.WriteHeader(http.StatusConflict)
			fmt.Fprintf(rw, "%d\n", ce.Size)
			return
		}
	case code == http.StatusTooManyRequests:
		retry := time.Second
		if rl, ok := errors.AsType[*RateLimitError](err); ok {
			retry = rl.RetryAfter
		}
		h.Set("Retry-After", strconv.FormatInt(int64((retry+time.Second-1)/time.Second), 10))
	}
	msg := err.Error()
	switch {
	case code >= 500:
		// Details of our own failures are for the operator, not the client;
		// a client that went away is not a failure of ours (internal/blame).
		w.log.Log(r.Context(), blame.Level(r.Context(), err), "witness: add-checkpoint failed", "origin", origin, "status", code, "err", err)
		msg = http.StatusText(code)
	case code != http.StatusTooManyRequests:
		// Refusals are the client's business; at debug level an operator
		// can watch them without a flood of 429s in the default log.
		w.log.Debug("witness: add-checkpoint refused", "origin", origin, "status", code, "err", err, "remote", r.RemoteAddr)
	}
	h.Set("Content-Type", contentTypeText)
	h.Set("X-Content-Type-Options", "nosniff")
	rw.WriteHeader(code)
	io.WriteString(rw, msg+"\n")
}

// handleAdd reads, parses and runs one add-checkpoint request.
func (w *Witness) handleAdd(r *http.Request) ([]byte, string, error) {
	if r.ContentLength > MaxRequestSize {
		return nil, "", errBodyTooLarge
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxRequestSize+1))
	if err != nil {
		return nil, "", &RequestSyntaxError{Reason: "reading body: " + err.Error()}
	}
	req, err := ParseAddCheckpointRequest(body)
	if err != nil {
		return nil, "", err
	}
	return w.addCheckpoint(r.Context(), req)
}

func (w *Witness) serveCheckpoint(rw http.ResponseWriter, r *http.Request) {
	hash := r.PathValue("hash")
	h := rw.Header()
	if !isOriginHash(hash) {
		http.NotFound(rw, r)
		return
	}
	cp, err := w.LatestCheckpoint(r.Context(), hash)
	if err != nil {
		code := StatusCode(err)
		if code >= 500 {
			w.log.Log(r.Context(), blame.Level(r.Context(), err), "witness: monitoring read failed", "origin_hash", hash, "err", err)
		}
		h.Set("Content-Type", contentTypeText)
		rw.WriteHeader(code)
		io.WriteString(rw, http.StatusText(code)+"\n")
		return
	}
	h.Set("Content-Type", contentTypeText)
	// C2SP lets this lag; a few seconds of caching spare the store from
	// monitors polling through a CDN without hiding a fork for long.
	h.Set("Cache-Control", "public, max-age=5")
	rw.Write(cp)
}

func isPathRune(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("-._~/", r)
}

// isOriginHash reports whether s is 64 lowercase hexadecimal digits.
func isOriginHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
