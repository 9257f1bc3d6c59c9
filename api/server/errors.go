package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/store"
)

func badRequest(field, format string, args ...any) error {
	return &api.Error{Status: http.StatusBadRequest, Field: field, Message: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &api.Error{Status: http.StatusNotFound, Message: fmt.Sprintf(format, args...)}
}

var errUnauthorized = &api.Error{Status: http.StatusUnauthorized, Message: "a valid bearer token is required"}

// answer is how the server answers err: its status, the field at fault, the
// message to send, and what to log for the operator ("" when nothing). This
// switch is the one place an error meets a status.
func answer(err error) (status int, field, msg, logAs string) {
	var ae *api.Error
	var ia *store.InvalidArgumentError
	var mb *http.MaxBytesError
	var ee *store.ErasedError
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
	case errors.Is(err, store.ErrErased):
		// 409, as for a sealed run: the request is sound, the case's (or
		// run's) state refuses it for good, and its records still read.
		// Not 410: the case is not gone, and 410 reads as a removed
		// endpoint and may be cached.
		field := "case"
		if errors.As(err, &ee) && ee.Case.IsZero() {
			field = "run"
		}
		return http.StatusConflict, field, err.Error(), ""
	case errors.Is(err, store.ErrCorrupt):
		// A broken chain or row is the answer a reader asked for, not a
		// detail to hide; it is also logged, since someone must act on it.
		return http.StatusInternalServerError, "", err.Error(), "serve: the store is corrupt"
	case errors.Is(err, store.ErrStorageFull):
		// The operator's to fix, and the client's to retry once fixed.
		return http.StatusInsufficientStorage, "", err.Error(), "serve: the journal's disk is full"
	case errors.Is(err, store.ErrClosed):
		return http.StatusServiceUnavailable, "", "shutting down", ""
	}
	return http.StatusInternalServerError, "", "internal error", "serve: request failed"
}
