package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/api/server"
	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/checkpointer"
	"github.com/runseal/runseal/connlimit"
	"github.com/runseal/runseal/publish"
	"github.com/runseal/runseal/store"
)

const serveLong = `Serve the journal over HTTP: appends, leases, seals, reads and listings,
the latest signed and latest witnessed checkpoint, inclusion and consistency
proofs (spec/http.md). It also signs checkpoints (every --checkpoint-interval
and after every --checkpoint-every seals) and, with --policy, publishes each
to the policy's witnesses and marks it witnessed when the quorum is met.

With no flags it serves ./runseal.db (or --db, $RUNSEAL_DB) on
127.0.0.1:8080, creating the journal and its log key on first start and
logging where. --store takes a journal path or a postgres:// DSN.

Every request needs a bearer token (see 'journal token create'), scoped to
one tenant with the role reader or writer, except /healthz and, with
--public, the checkpoint and proof reads. The operator console is at /:
sign in with a reader or writer token (spec/http.md section 6); behind a
TLS-terminating proxy, add --behind-tls so its session cookie is Secure and
__Host-. SIGINT or SIGTERM drains requests and stops.`

// serveConfig is what 'journal serve' is started with.
type serveConfig struct {
	loc       location
	tenants   []string // the first is --tenant
	tilesDir  string   // keep DIR/<tenant>/ a current tlog-tiles layout (tiles.go)
	listen    string
	policy    string
	public    bool
	interval  time.Duration
	every     int
	minRetry  time.Duration
	maxRetry  time.Duration
	pollEvery time.Duration
	tokenTTL  time.Duration     // --token-cache-ttl: how long a token check is trusted
	behindTLS bool              // --behind-tls: clients come over HTTPS through a proxy
	heavy     int               // --max-heavy-reads: record pages in progress at once (0: from the memory budget)
	conns     connlimit.Config  // --max-conns, --max-conns-per-addr
	waitWarm  bool              // --wait-warm: listen only once the stores' proofs are warm
	profile   string            // --cpuprofile (hidden): where bench --http wants the server's profile
	routes    []server.Route    // extra routes to mount (tiles, say), authorized like the API's
	ready     func(addr string) // tests learn the bound address
}

func (a *app) serveCmd() *cobra.Command {
	var c serveConfig
	var more []string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the journal's HTTP API, sign checkpoints, publish to witnesses",
		Long:  serveLong,
		Example: `  journal serve
  journal serve --listen :8443 --store /var/lib/runseal/journal.db --policy witnesses.policy --public
  journal serve --store postgres://runseal@db/runseal --key /etc/runseal/log.key
  journal serve --store postgres://runseal@db/runseal --key /etc/runseal/log.key --wait-warm`,
		Args: cobra.NoArgs,
		RunE: wrapRun(func(cmd *cobra.Command, _ []string) error {
			if c.interval <= 0 || c.every < 1 {
				return usageErrorf("--checkpoint-interval must be positive and --checkpoint-every at least 1")
			}
			if c.heavy < 0 {
				return usageErrorf("--max-heavy-reads must be 0 (from the memory budget) or more")
			}
			if err := c.conns.Check(); err != nil {
				return usageErrorf("--max-conns, --max-conns-per-addr: %v", err)
			}
			c.ready = a.onServe
			c.loc = a.location()
			c.tenants = []string{a.tenant}
			for _, t := range more {
				if t != "" && !slices.Contains(c.tenants, t) {
					c.tenants = append(c.tenants, t)
				}
			}
			return a.serve(cmd.Context(), c)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&c.listen, "listen", "127.0.0.1:8080", "address to listen on")
	f.StringSliceVar(&more, "tenants", nil, "more tenants to serve besides --tenant (comma-separated); requests name theirs with ?tenant=")
	f.StringVar(&c.policy, "policy", "", "tlog-policy file naming the witnesses (with URLs) and the quorum")
	f.BoolVar(&c.public, "public", false, "answer checkpoint and proof reads without a token")
	f.StringVar(&c.tilesDir, "tiles-dir", "", "also keep DIR/<tenant>/ a current C2SP tlog-tiles layout of each tenant's log (as 'journal tiles sync')")
	f.DurationVar(&c.interval, "checkpoint-interval", time.Minute, "sign a checkpoint this often")
	f.IntVar(&c.every, "checkpoint-every", 100, "sign a checkpoint after this many seals")
	f.DurationVar(&c.minRetry, "retry-min", time.Second, "first retry delay after a witness failure")
	f.DurationVar(&c.maxRetry, "retry-max", 5*time.Minute, "longest retry delay for a witness")
	f.DurationVar(&c.pollEvery, "publish-poll", 5*time.Second, "how often publishers look for checkpoints queued elsewhere")
	f.DurationVar(&c.tokenTTL, "token-cache-ttl", server.DefaultTokenCacheTTL, "trust a successful token check this long (a revoked token works at most this long); 0 checks every request")
	f.IntVar(&c.conns.MaxConns, "max-conns", 0, "most client connections open at once; over it a connection is answered 503 and closed (0: half the open-file limit, at most 4096)")
	f.IntVar(&c.conns.MaxPerAddr, "max-conns-per-addr", 0, "most connections open at once from one client address (IPv6: one /64); 0: an eighth of --max-conns; -1: no bound, as behind a reverse proxy")
	_ = f.MarkHidden("publish-poll")
	f.BoolVar(&c.behindTLS, "behind-tls", false, "clients reach this server over HTTPS through a TLS-terminating proxy: the console's session cookie is then __Host-runseal_console, Secure (browsers drop it over plain HTTP)")
	f.IntVar(&c.heavy, "max-heavy-reads", 0, fmt.Sprintf("pages of records answered at once (the API's, up to 4 MiB plus one record each, and the console's Run pages); more wait up to %s, then get 503 (0: %d MiB worth)", server.DefaultHeavyReadWait, server.DefaultHeavyReadMemory>>20))
	f.BoolVar(&c.waitWarm, "wait-warm", false, "start listening only after the proofs' pages are read in (seconds at 10^6 sealed runs, after a reboot or a PostgreSQL restart); without it proofs are served, slower, while they are")
	f.StringVar(&c.profile, "cpuprofile", "", "write a CPU profile of the whole serve to this file")
	_ = f.MarkHidden("cpuprofile")
	return cmd
}

// serveStore is what serve needs of a backend beyond journalStore: the
// publication outbox and the tokens.
type serveStore interface {
	journalStore
	store.PublicationStore
	store.TokenStore
}

// tenantWork is one served tenant: what the API answers with, and its
// background signer and publisher.
type tenantWork struct {
	api    server.Tenant
	signer *checkpointer.Signer
	pub    *publish.Publisher // nil: no witnesses configured
}

func (a *app) serve(ctx context.Context, c serveConfig) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if c.profile != "" {
		f, err := os.Create(c.profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var pol *checkpoint.Policy
	if c.policy != "" {
		p, err := checkpoint.LoadPolicy(c.policy)
		if err != nil {
			return usageErrorf("--policy: %v", err)
		}
		pol = p
	}
	if c.loc.dsn != "" && c.loc.key == "" {
		// A database has no file beside which a key could live: the key
		// path must be named, and on first start the key is made there.
		return usageErrorf("with a postgres:// --store, name the log key file with --key or $%s", envKey)
	}
	// One handle on the journal, viewed by every tenant served.
	a.serving = true
	stores, created, err := a.openStores(ctx, c.loc, c.tenants, true)
	if err != nil {
		return err
	}
	defer closeStores(stores)
	// The warm is the backend's own; sealing (below) wraps the stores, so
	// the waits are taken first.
	warms := warmers(stores)
	if err := a.sealStores(ctx, stores); err != nil { // sealing.go: --keyring
		return err
	}
	if created {
		a.log.Info("serve: created a new journal and its log key", "journal", c.loc.path, "key", c.loc.key, "origin", stores[0].Origin())
		fmt.Fprintf(a.stderr, "journal: created journal at %s and its log key at %s (origin %s)\n", c.loc.path, c.loc.key, stores[0].Origin())
	}
	if c.loc.dsn != "" {
		if _, err := os.Stat(c.loc.key); errors.Is(err, fs.ErrNotExist) {
			if _, err := createKey(c.loc.key, stores[0].Origin()); err != nil {
				return err
			}
			a.log.Info("serve: created the log key", "key", c.loc.key, "origin", stores[0].Origin())
			fmt.Fprintf(a.stderr, "journal: created the log key at %s (origin %s)\n", c.loc.key, stores[0].Origin())
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var work []tenantWork
	for _, js := range stores {
		tw, err := a.tenantWork(js, c, pol, reg)
		if err != nil {
			return fmt.Errorf("tenant %s: %w", js.Tenant(), err)
		}
		work = append(work, tw)
	}
	tokens, ok := stores[0].(store.TokenStore)
	if !ok {
		return fmt.Errorf("this store cannot serve: it keeps no tokens")
	}
	cfg := server.Config{Tokens: tokens, Public: c.public, Logger: a.log, Registry: reg, Routes: append(tilesRoutes(a.log, c.public), c.routes...), TokenCacheTTL: c.tokenTTL, MaxHeavyReads: c.heavy}
	if c.tokenTTL <= 0 {
		cfg.TokenCacheTTL = -1 // every request asks the store
	}
	for _, tw := range work {
		cfg.Tenants = append(cfg.Tenants, tw.api)
	}
	firstToken := firstTokenCommand(c.loc, c.tenants[0])
	mountConsole := withConsole(&cfg, tokens, firstToken, c.behindTLS) // console.go
	apiServer, err := server.New(cfg)
	if err != nil {
		return err
	}
	handler, err := mountConsole(apiServer)
	if err != nil {
		return err
	}

	if c.waitWarm {
		if err := a.waitWarm(ctx, warms); err != nil {
			return err
		}
	}
	inner, err := net.Listen("tcp", c.listen)
	if err != nil {
		return err
	}
	lim := c.conns
	lim.Name, lim.Logger = "api", a.log
	ln := connlimit.New(inner, lim)
	srv := server.NewHTTPServer(withVerifyPage(handler), server.Timeouts{}, a.log)
	srv.ConnState = ln.ConnState // at the bound, idle connections make room
	for _, tw := range work {
		a.log.Info("serve: serving tenant", "tenant", tw.api.Store.Tenant(), "origin", tw.api.Store.Origin(), "witnesses", tw.pub != nil)
	}
	a.log.Info("serve: listening", "addr", ln.Addr().String(), "public", c.public,
		"max_conns", ln.Config().MaxConns, "max_conns_per_addr", ln.Config().MaxPerAddr)
	fmt.Fprintf(a.stderr, "journal: serving %s (origin %s) on http://%s\n", c.loc, stores[0].Origin(), ln.Addr())
	a.hintFirstToken(ctx, tokens, firstToken, ln.Addr().String())
	if c.ready != nil {
		c.ready(ln.Addr().String())
	}

	bg, cancelBG := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, tw := range work {
		wg.Go(func() { tw.signer.Run(bg) })
		if c.tilesDir != "" {
			wg.Go(func() { a.keepTiles(bg, tw.api.Store, c.tilesDir) })
		}
		if tw.pub != nil {
			wg.Go(func() {
				if err := tw.pub.Run(bg); err != nil {
					a.log.Error("serve: publisher stopped", "tenant", tw.api.Store.Tenant(), "err", err)
				}
			})
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	apiServer.Drain()
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	serr := srv.Shutdown(shutCtx)
	cancelBG()
	wg.Wait()
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return serr
}

// tenantWork makes one tenant's signer and publisher over its view of
// the journal.
func (a *app) tenantWork(js journalStore, c serveConfig, pol *checkpoint.Policy, reg *prometheus.Registry) (tenantWork, error) {
	var tw tenantWork
	st, ok := js.(serveStore)
	if !ok {
		return tw, fmt.Errorf("this store cannot serve: it keeps no witness publications or tokens")
	}
	signer, vkey, err := loadSigner(c.loc.key, js.Origin())
	if err != nil {
		return tw, err
	}
	logKey, err := checkpoint.NewVerifier(vkey)
	if err != nil {
		return tw, err
	}
	log := a.log.With("tenant", js.Tenant())
	sc := checkpointer.Config{Store: st, Signer: signer, Interval: c.interval, Every: c.every, Logger: log}
	if pol != nil {
		if err := checkPolicyLog(pol, logKey, js.Origin()); err != nil {
			return tw, usageErrorf("--policy: %v", err)
		}
		tw.pub, err = publish.New(st, pol, logKey, publish.Options{
			MinBackoff: c.minRetry, MaxBackoff: c.maxRetry, Poll: c.pollEvery, Logger: log,
			Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"tenant": js.Tenant()}, reg),
		})
		if err != nil {
			return tw, usageErrorf("--policy: %v", err)
		}
		sc.Queue = tw.pub
	}
	tw.signer = checkpointer.New(sc)
	tw.api = server.Tenant{Store: st, LogKey: logKey, Policy: pol, Signer: tw.signer}
	return tw, nil
}

// checkPolicyLog refuses a policy whose log lines do not include this log's
// key: witnesses would cosign, and auditors with that policy would refuse
// every checkpoint.
func checkPolicyLog(p *checkpoint.Policy, logKey note.Verifier, origin string) error {
	logs := p.Logs()
	if len(logs) == 0 {
		return nil
	}
	for _, l := range logs {
		if l.Name() == logKey.Name() && l.KeyHash() == logKey.KeyHash() {
			return nil
		}
	}
	return fmt.Errorf("no log line is this journal's key (%s+%08x for origin %s)", logKey.Name(), logKey.KeyHash(), origin)
}
