package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/runseal/runseal/store"
)

// TestAnswer_FullDiskIs507NotInternalError: a write refused for want of
// space answers 507 with the store's message, which tells the operator
// what to do, and is logged as such, not as an anonymous 500.
func TestAnswer_FullDiskIs507NotInternalError(t *testing.T) {
	err := fmt.Errorf("append: %w", &store.StorageFullError{Err: errors.New("database or disk is full (13)")})
	status, _, msg, logAs := answer(err)
	if status != http.StatusInsufficientStorage || !strings.Contains(msg, "no space left") || !strings.Contains(logAs, "disk is full") {
		t.Fatalf("answer(full disk) = %d %q, logged %q; want 507 naming the full disk", status, msg, logAs)
	}
}
