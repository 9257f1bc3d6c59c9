package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/runseal/runseal/store"
)

// Classes of refusal, one per HTTP status a caller branches on. An *Error
// matches the class of its status with errors.Is.
var (
	ErrBadRequest   = errors.New("bad request")
	ErrUnauthorized = errors.New("unauthorized")
	ErrForbidden    = errors.New("forbidden")
	ErrNotFound     = errors.New("not found")
	ErrConflict     = errors.New("conflict")
	ErrTooLarge     = errors.New("request too large")
	ErrUnavailable  = errors.New("unavailable")
	ErrServer       = errors.New("server error")
)

// Error is a refusal with its HTTP status: what a handler returns to answer
// with that status, and what a Client returns for an answer that is not 2xx.
type Error struct {
	Status  int
	Field   string // the request field at fault, when one is
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return http.StatusText(e.Status)
	}
	return e.Message
}

// Is matches the class of e's status.
func (e *Error) Is(target error) bool { return classOf(e.Status) == target }

func classOf(status int) error {
	switch {
	case status == http.StatusBadRequest:
		return ErrBadRequest
	case status == http.StatusUnauthorized:
		return ErrUnauthorized
	case status == http.StatusForbidden:
		return ErrForbidden
	case status == http.StatusNotFound:
		return ErrNotFound
	case status == http.StatusConflict:
		return ErrConflict
	case status == http.StatusRequestEntityTooLarge:
		return ErrTooLarge
	case status == http.StatusServiceUnavailable:
		return ErrUnavailable
	case status >= 500:
		return ErrServer
	}
	return nil
}

func badRequest(field, format string, args ...any) error {
	return &Error{Status: http.StatusBadRequest, Field: field, Message: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &Error{Status: http.StatusNotFound, Message: fmt.Sprintf(format, args...)}
}

var errUnauthorized = &Error{Status: http.StatusUnauthorized, Message: "a valid bearer token is required"}

// answer is how the server answers err: its status, the field at fault, the
// message to send, and what to log for the operator ("" when nothing). This
// switch is the one place an error meets a status.
func answer(err error) (status int, field, msg, logAs string) {
	var ae *Error
	var ia *store.InvalidArgumentError
	var mb *http.MaxBytesError
	switch {
	case errors.As(err, &ae):
		return ae.Status, ae.Field, ae.Error(), ""
	case errors.As(err, &ia):
		return http.StatusBadRequest, ia.Field, err.Error(), ""
	case errors.Is(err, store.ErrRecordTooLarge):
		return http.StatusRequestEntityTooLarge, "", err.Error(), ""
	case errors.As(err, &mb):
		return http.StatusRequestEntityTooLarge, "", fmt.Sprintf("body over %d bytes", mb.Limit), ""
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, "", err.Error(), ""
	case errors.Is(err, store.ErrFenced), errors.Is(err, store.ErrLeaseHeld), errors.Is(err, store.ErrLeaseNotHeld),
		errors.Is(err, store.ErrRunSealed), errors.Is(err, store.ErrDuplicateEffect), errors.Is(err, store.ErrDuplicateAdmission):
		return http.StatusConflict, "", err.Error(), ""
	case errors.Is(err, store.ErrCorrupt):
		// A broken chain or row is the answer a reader asked for, not a
		// detail to hide; it is also logged, since someone must act on it.
		return http.StatusInternalServerError, "", err.Error(), "serve: the store is corrupt"
	case errors.Is(err, store.ErrClosed):
		return http.StatusServiceUnavailable, "", "shutting down", ""
	}
	return http.StatusInternalServerError, "", "internal error", "serve: request failed"
}
