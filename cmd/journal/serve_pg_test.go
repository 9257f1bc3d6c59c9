package main

import (
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/runseal/runseal/internal/pgtest"
	"github.com/runseal/runseal/store"
)

// TestServePostgres: serve runs on a postgres:// store, creating the log
// key on first start; tokens, seals and the signed checkpoint work there.
func TestServePostgres(t *testing.T) {
	dsn := pgtest.Single(t)
	if !isDSN(dsn) {
		// --store takes the URL form: a keyword/value DSN could be a path.
		cfg, err := pgconn.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		q := url.Values{"host": {cfg.Host}, "port": {fmt.Sprint(cfg.Port)}, "sslmode": {"disable"}}
		if cfg.Password != "" {
			q.Set("password", cfg.Password)
		}
		dsn = (&url.URL{Scheme: "postgres", User: url.User(cfg.User), Path: "/" + cfg.Database, RawQuery: q.Encode()}).String()
	}
	tenant := "serve" + strings.ToLower(store.NewRunID().String())
	key := filepath.Join(t.TempDir(), "log.key")
	if r := cli(t, "", "", "--tenant", tenant, "serve", "--store", dsn); r.code != exitUsage || !strings.Contains(r.stderr, "--key") {
		t.Fatalf("serve on a DSN without --key: exit %d %s", r.code, r.stderr)
	}
	tok := strings.TrimSpace(mustCLI(t, "", "", "--tenant", tenant, "token", "create", "--role", "writer", "--store", dsn))
	// A second tenant is served over the first one's connection pool.
	tenant2 := tenant + "b"
	tok2 := strings.TrimSpace(mustCLI(t, "", "", "--tenant", tenant2, "token", "create", "--role", "writer", "--store", dsn))
	sv := startServeArgs(t, "--tenant", tenant, "--key", key, "serve", "--store", dsn, "--tenants", tenant2)
	sv.tenant = tenant
	if !strings.Contains(sv.stderr.String(), "created the log key at "+key) {
		t.Errorf("serve did not say it created the key:\n%s", sv.stderr.String())
	}
	sv.sealViaAPI(tok)
	pollUntil(t, "a checkpoint is signed", func() bool {
		code, b := sv.do("GET", "/v1/checkpoint", tok, "")
		return code == http.StatusOK && strings.Contains(b, "\n1\n")
	})
	sv.tenant = tenant2
	sv.sealViaAPI(tok2)
	sv.sealViaAPI(tok2)
	pollUntil(t, "the second tenant's size 2 is signed", func() bool {
		code, b := sv.do("GET", "/v1/checkpoint", tok2, "")
		return code == http.StatusOK && strings.Contains(b, "/"+tenant2+"\n2\n")
	})
	sv.stop()

	// Restarted with --wait-warm, serve reads both tenants' proof pages in
	// before it listens: the warm's lines come before "serving".
	sv = startServeArgs(t, "--tenant", tenant, "--key", key, "serve", "--store", dsn, "--tenants", tenant2, "--wait-warm")
	errs := sv.stderr.String()
	serving := strings.Index(errs, "journal: serving")
	for _, tn := range []string{tenant, tenant2} {
		at := strings.Index(errs, "tenant "+tn+": proofs' pages warmed in ")
		if at < 0 || serving < 0 || at > serving {
			t.Errorf("--wait-warm: no warm line for %s before listening:\n%s", tn, errs)
		}
	}
	sv.tenant = tenant
	if code, b := sv.do("GET", "/v1/checkpoint", tok, ""); code != http.StatusOK || !strings.Contains(b, "\n1\n") {
		t.Errorf("checkpoint after a warm start: %d %s", code, b)
	}
	sv.stop()

	// The other commands reach the same database with --store.
	pg := []string{"--tenant", tenant, "--store", dsn, "--key", key}
	out := mustCLI(t, "", "", append(pg, "checkpoint")...)
	if !strings.Contains(out, "\n1\n") {
		t.Errorf("journal checkpoint on postgres: %s", out)
	}
	mustCLI(t, "", "", append(pg, "verify", "--all")...)
	if r := cli(t, "", "", append(pg, "witnessed")...); r.code != exitFailure || !strings.Contains(r.stderr, "no checkpoint is witnessed") {
		t.Errorf("journal witnessed with no policy: exit %d %s", r.code, r.stderr)
	}
}
