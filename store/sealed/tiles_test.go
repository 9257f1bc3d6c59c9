package sealed_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sealed"
	"github.com/runseal/runseal/tiles"
)

// TestSealedJournalPublishesTiles: journal serve --keyring wraps each store
// in the sealing decorator, and /tiles must still find the log through it
// (it once answered 404: the decorator hid LogLeaves and LogNodes). The
// tiles through the decorator are the backend's own, byte for byte.
func TestSealedJournalPublishesTiles(t *testing.T) {
	ctx := context.Background()
	raw, _ := openSQLite(t)
	j := sealed.New(raw, openRing(t), sealed.Options{})
	var src tiles.Source
	if s, ok := any(j).(tiles.Source); ok {
		src = s
	} else {
		t.Fatal("the sealing decorator is not a tiles.Source")
	}
	for range 3 {
		caseRun(t, j, store.NewCaseID(), "secret")
	}
	for _, p := range []string{"tile/0/000.p/3", "tile/entries/000.p/3"} {
		r, err := tiles.ParsePath(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tiles.NewLog(src).Resource(ctx, r, 3)
		if err != nil {
			t.Fatalf("%s through the decorator: %v", p, err)
		}
		want, err := tiles.NewLog(raw).Resource(ctx, r, 3)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs through the decorator", p)
		}
	}
}
