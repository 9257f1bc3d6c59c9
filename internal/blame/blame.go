// Package blame tells a request's failure that its client caused from one
// of the server's own, so that servers log only their own at ERROR: a
// client that disconnects mid-request, or sends a body cut short or over
// its bound, can otherwise write as many ERROR lines as it has requests.
//
// It is the one classification every server of the module uses (the API,
// the console, the witness, the tiles).
package blame

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"syscall"
)

// Client reports whether err, met while serving a request whose context is
// ctx, is the client's doing:
//   - a body over the server's bound (*http.MaxBytesError), always;
//   - once ctx is done (net/http ends a request's context when reading
//     its connection fails: closed, reset, or too slow for ReadTimeout), a
//     cancellation or deadline, a body cut short (io.ErrUnexpectedEOF,
//     io.EOF), a reset, broken or closed connection, or a read deadline
//     passed: the consequences of the client going away.
//
// A failure of the server's own (a corrupt row, a full disk, a database
// unreachable) is not the client's even when the client has gone
// meanwhile: only errors of the kinds above are excused.
func Client(ctx context.Context, err error) bool {
	if err == nil {
		return false
	}
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return true
	}
	if ctx.Err() == nil {
		return false
	}
	for _, target := range []error{context.Canceled, context.DeadlineExceeded, io.ErrUnexpectedEOF, io.EOF,
		syscall.ECONNRESET, syscall.EPIPE, net.ErrClosed, os.ErrDeadlineExceeded} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// Level is the level to log err at: slog.LevelDebug when the client caused
// it (an operator can still watch such failures), slog.LevelError when the
// server did.
func Level(ctx context.Context, err error) slog.Level {
	if Client(ctx, err) {
		return slog.LevelDebug
	}
	return slog.LevelError
}
