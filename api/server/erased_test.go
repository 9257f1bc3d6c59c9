package server

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/keyring"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sealed"
)

// TestAppend_ErasedScopeIsConflictNamingIt stops issue 27's erased-case
// 500: an append whose fields would be sealed under an erased scope was
// answered 500 "internal error", as if the server had failed. It is the
// case's (or the run's) state that refuses it, for good: 409, naming the
// erasure and the field, and nothing written.
func TestAppend_ErasedScopeIsConflictNamingIt(t *testing.T) {
	ring, err := keyring.OpenFile(filepath.Join(t.TempDir(), "keys"))
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, func(c *Config, _ *Timeouts) {
		c.Tenants[0].Store = sealed.New(c.Tenants[0].Store.(store.Journal), ring, sealed.Options{})
	})
	ctx := context.Background()
	cs := store.NewCaseID()
	for _, tt := range []struct {
		name, field, scope string
		run                store.RunID
		line               func(run store.RunID) string
	}{
		{name: "case", field: "case", run: store.NewRunID(), scope: sealed.CaseScope(store.DefaultTenant, cs),
			line: func(run store.RunID) string {
				return line(run, "Note", `"case":"`+cs.String()+`","text":"secret"`)
			}},
		{name: "run", field: "run", line: func(run store.RunID) string { return line(run, "Note", `"text":"secret"`) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			run := tt.run
			if run.IsZero() {
				run = store.NewRunID()
			}
			scope := tt.scope
			if scope == "" {
				scope = sealed.RunScope(store.DefaultTenant, run)
			}
			l, err := ts.c.Acquire(ctx, run, "w", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ts.c.Append(ctx, l.Epoch, []byte(tt.line(run))); err != nil {
				t.Fatal(err)
			}
			if _, err := ring.Erase(ctx, scope); err != nil {
				t.Fatal(err)
			}
			code, _, body := ts.do("POST", "/v1/append?epoch="+strconv.FormatUint(uint64(l.Epoch), 10), tt.line(run))
			var eb api.ErrorBody
			_ = json.Unmarshal([]byte(body), &eb)
			if code != http.StatusConflict || eb.Field != tt.field || !strings.Contains(eb.Error, "erased") || !strings.Contains(eb.Error, scope) {
				t.Errorf("append to an erased %s = %d %s; want 409 on field %q naming the erasure of %s", tt.name, code, body, tt.field, scope)
			}
			if h, err := ts.st.Head(ctx, run); err != nil || h.Seq != 1 {
				t.Errorf("the refused append wrote something: head seq %d, %v", h.Seq, err)
			}
		})
	}
}
