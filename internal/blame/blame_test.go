package blame_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"syscall"
	"testing"

	"github.com/runseal/runseal/internal/blame"
)

func TestClient(t *testing.T) {
	live := context.Background()
	gone, cancel := context.WithCancel(live)
	cancel()
	ours := errors.New("disk full")
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"nil", gone, nil, false},
		{"body over the bound", live, fmt.Errorf("read: %w", &http.MaxBytesError{Limit: 1}), true},
		{"cancelled by the client", gone, fmt.Errorf("store: %w", context.Canceled), true},
		{"truncated body", gone, fmt.Errorf("line 3: %w", io.ErrUnexpectedEOF), true},
		{"reset", gone, fmt.Errorf("write: %w", syscall.ECONNRESET), true},
		{"truncated body on a live request", live, io.ErrUnexpectedEOF, false},
		{"cancellation of our own", live, context.Canceled, false},
		{"our failure while the client went away", gone, ours, false},
		{"our failure", live, ours, false},
	} {
		if got := blame.Client(tc.ctx, tc.err); got != tc.want {
			t.Errorf("%s: Client = %v, want %v", tc.name, got, tc.want)
		}
		want := slog.LevelError
		if tc.want {
			want = slog.LevelDebug
		}
		if got := blame.Level(tc.ctx, tc.err); got != want {
			t.Errorf("%s: Level = %v, want %v", tc.name, got, want)
		}
	}
}
