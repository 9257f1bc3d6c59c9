package api

import (
	"errors"
	"net/http"
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
