package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/storetest"
)

func harness() storetest.Harness {
	return storetest.Harness{Open: func(tb testing.TB) (store.Journal, storetest.Clock) {
		clk := storetest.NewFakeClock()
		s, err := Open(context.Background(), filepath.Join(tb.TempDir(), "journal.db"), Options{Now: clk.Now})
		if err != nil {
			tb.Fatalf("open: %v", err)
		}
		tb.Cleanup(func() { s.Close() })
		return s, clk
	}}
}

func TestConformance(t *testing.T) {
	storetest.Run(t, harness())
}
