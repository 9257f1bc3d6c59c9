package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/runseal/runseal/api/server"
	"github.com/runseal/runseal/console"
	"github.com/runseal/runseal/store"
)

// withConsole mounts the operator console (package console) at / and
// /console/ in front of the API server, counting the API's appends and
// seals for its Activity page and taking the API's heavy-read slots for
// its Run page; routes are the console's JSON twins, to serve with the
// API. behindTLS says clients come over HTTPS through a proxy, so the
// console's cookie is the Secure __Host- one.
func withConsole(cfg *server.Config, tokens store.TokenStore, firstToken string, behindTLS bool) (mount func(*server.Server) (http.Handler, error)) {
	meter := server.NewMeter(nil)
	cfg.Routes = append(cfg.Routes, server.StatusRoutes(meter)...)
	cfg.Routes = append(cfg.Routes, server.TokenRoute(tokens))
	return func(h *server.Server) (http.Handler, error) {
		con, err := console.New(console.Config{Tenants: cfg.Tenants, Tokens: tokens, Meter: meter, Logger: cfg.Logger, FirstToken: firstToken, SecureCookie: behindTLS, Heavy: h})
		if err != nil {
			return nil, err
		}
		return con.Handler(meter.Observe(h)), nil
	}
}

// firstTokenCommand is the exact command that creates a console token for
// the journal serve was started on.
func firstTokenCommand(loc location, tenant string) string {
	var b strings.Builder
	b.WriteString("journal token create --role reader --name console")
	switch {
	case loc.dsn != "":
		b.WriteString(" --store 'postgres://…'  # the same --store as serve")
	case loc.path != defaultDB:
		fmt.Fprintf(&b, " --db %s", shellQuote(loc.path))
	}
	if tenant != store.DefaultTenant {
		fmt.Fprintf(&b, " --tenant %s", shellQuote(tenant))
	}
	return b.String()
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=:,@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// hintFirstToken tells the operator of a journal with no token how to
// create one: nothing but /healthz (and --public reads) answers without.
func (a *app) hintFirstToken(ctx context.Context, tokens store.TokenStore, cmd, addr string) {
	toks, err := tokens.Tokens(ctx)
	if err != nil || len(toks) > 0 {
		return
	}
	a.log.Warn("serve: the journal has no API token yet; create one to sign in to the console", "command", cmd)
	fmt.Fprintf(a.stderr, "journal: no API token yet. Create one, then open http://%s/ and paste it:\n  %s\n", addr, cmd)
}
