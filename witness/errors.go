package witness

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Sentinel errors, one per outcome of the tlog-witness protocol. The server
// side (Witness.AddCheckpoint) and the client side (Client.AddCheckpoint)
// return errors that wrap exactly one of them, so a caller branches with
// [errors.Is] whichever side it is on, and the HTTP status follows from the
// sentinel (see [StatusCode]).
var (
	// ErrMalformedRequest reports a request that does not follow the
	// add-checkpoint format, or a checkpoint or note that does not parse
	// (HTTP 400; 413 for a body over the cap). Retrying cannot help.
	ErrMalformedRequest = errors.New("malformed add-checkpoint request")

	// ErrOldTooLarge reports an old size larger than the checkpoint's size
	// (HTTP 400). It wraps ErrMalformedRequest.
	ErrOldTooLarge = fmt.Errorf("%w: old size larger than the checkpoint size", ErrMalformedRequest)

	// ErrUnknownLog reports a checkpoint origin the witness does not
	// witness (HTTP 404).
	ErrUnknownLog = errors.New("unknown log origin")

	// ErrNotTrusted reports a checkpoint without a valid signature from a
	// key the witness trusts for its origin, or with an invalid signature
	// from such a key (HTTP 403).
	ErrNotTrusted = errors.New("no valid signature from a trusted log key")

	// ErrConflict reports an old size other than the size the witness last
	// cosigned (HTTP 409). The error is a *ConflictError carrying that size.
	ErrConflict = errors.New("old size does not match the witness's size")

	// ErrInconsistent reports a checkpoint that cannot follow the one the
	// witness holds: a consistency proof that does not verify, a proof
	// sent with old size 0 or between equal sizes, a size-0 checkpoint
	// without the empty root, or a second root for the size the witness
	// holds (HTTP 422).
	ErrInconsistent = errors.New("checkpoint inconsistent with the witness's view")

	// ErrSplitView reports a validly signed checkpoint of the size the
	// witness holds but with another root: proof that the log signed two
	// trees of one size. It wraps ErrInconsistent (HTTP 422); the witness
	// keeps the checkpoint as evidence.
	ErrSplitView = fmt.Errorf("%w: another root for the same size (split view)", ErrInconsistent)

	// ErrRateLimited reports a request over the log's rate limit (HTTP
	// 429). The error is a *RateLimitError or, on the client, a
	// *StatusError, both carrying when to retry.
	ErrRateLimited = errors.New("rate limited")

	// ErrUnavailable reports a witness that cannot answer now: shutting
	// down, or its storage failed (HTTP 503). Retrying later may help.
	ErrUnavailable = errors.New("witness unavailable")

	// ErrNotCosigned reports, for the monitoring read, an origin the
	// witness has never cosigned (HTTP 404).
	ErrNotCosigned = errors.New("no cosigned checkpoint for this origin")

	// ErrUnexpectedResponse reports, on the client, an answer outside the
	// protocol: an unknown status, or a body of the wrong shape.
	ErrUnexpectedResponse = errors.New("unexpected response from witness")
)

// A ConflictError is the 409 answer: the witness's latest cosigned size for
// the origin differs from the request's old size. A log publisher retries
// with a consistency proof from Size. It unwraps to ErrConflict.
type ConflictError struct {
	Size uint64 // the size the witness last cosigned (0 if it never did)
}

// Error reports the witness's size.
func (e *ConflictError) Error() string {
	return "witness: " + ErrConflict.Error() + ": witness is at size " + strconv.FormatUint(e.Size, 10)
}

// Unwrap returns ErrConflict.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// A RateLimitError is the 429 answer: the log used up its quota. It
// unwraps to ErrRateLimited.
type RateLimitError struct {
	Origin     string        // the log over its quota
	RetryAfter time.Duration // when a request would be allowed again
}

// Error names the log and the wait.
func (e *RateLimitError) Error() string {
	return fmt.Sprintf("witness: %s: log %q may retry after %v", ErrRateLimited, e.Origin, e.RetryAfter)
}

// Unwrap returns ErrRateLimited.
func (e *RateLimitError) Unwrap() error { return ErrRateLimited }

// A StatusError is a non-200 answer received by a Client. It wraps the
// sentinel that its status code stands for (ErrMalformedRequest for 400 and
// 413, ErrNotTrusted for 403, ErrUnknownLog for 404, ErrInconsistent for 422
// and for a 409 without a size, ErrRateLimited for 429, ErrUnavailable for
// 503, ErrUnexpectedResponse otherwise). A 409 that carries the witness's
// size is a *ConflictError instead.
type StatusError struct {
	StatusCode int // the HTTP status of the answer
	// Body is the start of the response body, for diagnostics only.
	Body string
	// RetryAfter is the Retry-After header of a 429 or 503, zero if absent.
	RetryAfter time.Duration

	err error // the sentinel
}

// Error gives the status and the witness's explanation.
func (e *StatusError) Error() string {
	s := fmt.Sprintf("witness: HTTP %d: %v", e.StatusCode, e.err)
	if e.Body != "" {
		s += ": " + strconv.Quote(e.Body)
	}
	return s
}

// Unwrap returns the sentinel the status stands for.
func (e *StatusError) Unwrap() error { return e.err }

// sentinelForStatus maps an HTTP status of an add-checkpoint answer to its
// sentinel; it is the inverse of StatusCode.
func sentinelForStatus(code int) error {
	switch code {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return ErrMalformedRequest
	case http.StatusForbidden:
		return ErrNotTrusted
	case http.StatusNotFound:
		return ErrUnknownLog
	case http.StatusConflict:
		return ErrConflict
	case http.StatusUnprocessableEntity:
		return ErrInconsistent
	case http.StatusTooManyRequests:
		return ErrRateLimited
	case http.StatusServiceUnavailable:
		return ErrUnavailable
	}
	return ErrUnexpectedResponse
}

// StatusCode returns the HTTP status the tlog-witness protocol gives err:
// 200 for nil, the status of the sentinel err wraps, and 500 for anything
// else (a fault of the witness, not of the request).
func StatusCode(err error) int {
	switch {
	case err == nil:
		return http.StatusOK
	case errors.Is(err, errBodyTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrMalformedRequest):
		return http.StatusBadRequest
	case errors.Is(err, ErrUnknownLog), errors.Is(err, ErrNotCosigned):
		return http.StatusNotFound
	case errors.Is(err, ErrNotTrusted):
		return http.StatusForbidden
	case errors.Is(err, ErrConflict):
		return http.StatusConflict
	case errors.Is(err, ErrInconsistent):
		return http.StatusUnprocessableEntity
	case errors.Is(err, ErrRateLimited):
		return http.StatusTooManyRequests
	case errors.Is(err, ErrUnavailable):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// errBodyTooLarge marks a request body over MaxRequestSize; it wraps
// ErrMalformedRequest but is answered 413, the status HTTP has for it.
var errBodyTooLarge = fmt.Errorf("%w: body larger than %d bytes", ErrMalformedRequest, MaxRequestSize)

// A RequestSyntaxError says where an add-checkpoint request body departs
// from the format. It unwraps to ErrMalformedRequest.
type RequestSyntaxError struct {
	Line   int    // 1-based line of the request body; 0 if not tied to a line
	Reason string // what is wrong, in a few words
}

// Error formats the error as "malformed add-checkpoint request: line <n>: <reason>".
func (e *RequestSyntaxError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%v: line %d: %s", ErrMalformedRequest, e.Line, e.Reason)
	}
	return fmt.Sprintf("%v: %s", ErrMalformedRequest, e.Reason)
}

// Unwrap returns ErrMalformedRequest.
func (e *RequestSyntaxError) Unwrap() error { return ErrMalformedRequest }
