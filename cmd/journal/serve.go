package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/publish"
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
--public, the checkpoint and proof reads. SIGINT or SIGTERM drains requests
and stops.`

// serveConfig is what 'journal serve' is started with.
type serveConfig struct {
	listen    string
	storeArg  string
	policy    string
	public    bool
	interval  time.Duration
	every     int
	minRetry  time.Duration
	maxRetry  time.Duration
	pollEvery time.Duration
	tenants   []string          // served besides --tenant
	ready     func(addr string) // tests learn the bound address
}

func (a *app) serveCmd() *cobra.Command {
	var c serveConfig
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the journal's HTTP API, sign checkpoints, publish to witnesses",
		Long:  serveLong,
		Example: `  journal serve
  journal serve --listen :8443 --store /var/lib/runseal/journal.db --policy witnesses.policy --public
  journal serve --store postgres://runseal@db/runseal --key /etc/runseal/log.key`,
		Args: cobra.NoArgs,
		RunE: wrapRun(func(cmd *cobra.Command, _ []string) error {
			if c.interval <= 0 || c.every < 1 {
				return usageErrorf("--checkpoint-interval must be positive and --checkpoint-every at least 1")
			}
			c.ready = a.onServe
			c.storeArg = a.storeArg
			return a.serve(cmd.Context(), c)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&c.listen, "listen", "127.0.0.1:8080", "address to listen on")
	f.StringSliceVar(&c.tenants, "tenants", nil, "more tenants to serve besides --tenant (comma-separated); requests name theirs with ?tenant=")
	f.StringVar(&c.policy, "policy", "", "tlog-policy file naming the witnesses (with URLs) and the quorum")
	f.BoolVar(&c.public, "public", false, "answer checkpoint and proof reads without a token")
	f.DurationVar(&c.interval, "checkpoint-interval", time.Minute, "sign a checkpoint this often")
	f.IntVar(&c.every, "checkpoint-every", 100, "sign a checkpoint after this many seals")
	f.DurationVar(&c.minRetry, "retry-min", time.Second, "first retry delay after a witness failure")
	f.DurationVar(&c.maxRetry, "retry-max", 5*time.Minute, "longest retry delay for a witness")
	f.DurationVar(&c.pollEvery, "publish-poll", 5*time.Second, "how often publishers look for checkpoints queued elsewhere")
	_ = f.MarkHidden("publish-poll")
	return cmd
}

func (a *app) serve(ctx context.Context, c serveConfig) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	var pol *checkpoint.Policy
	if c.policy != "" {
		p, err := checkpoint.LoadPolicy(c.policy)
		if err != nil {
			return usageErrorf("--policy: %v", err)
		}
		pol = p
	}
	tenants := []string{a.tenant}
	for _, t := range c.tenants {
		if t != "" && !slices.Contains(tenants, t) {
			tenants = append(tenants, t)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "runseal_http_requests_total", Help: "HTTP API requests by route and status code.",
	}, []string{"route", "code"})
	reg.MustRegister(reqs)
	closing := make(chan struct{})

	// One server per tenant, each over its own store handle, signer and
	// publisher; one listener routes each request by its tenant parameter.
	var servers []*server
	defer func() {
		for _, s := range servers {
			s.st.Close()
		}
	}()
	for _, tenant := range tenants {
		a.tenant = tenant
		s, err := a.tenantServer(ctx, c, pol, reg, reqs, closing)
		if err != nil {
			return fmt.Errorf("tenant %s: %w", tenant, err)
		}
		servers = append(servers, s)
	}
	a.tenant = tenants[0]
	byTenant := make(map[string]http.Handler, len(servers))
	for _, s := range servers {
		byTenant[s.tenant] = s.routes()
	}
	first := byTenant[servers[0].tenant]
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h, ok := byTenant[r.URL.Query().Get("tenant")]; ok {
			h.ServeHTTP(w, r)
			return
		}
		// No tenant named (the default), or one not served: the first
		// server authenticates and, for a tenant it does not serve,
		// answers 404 after the token is checked.
		first.ServeHTTP(w, r)
	})

	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelWarn)}
	for _, s := range servers {
		a.log.Info("serve: serving tenant", "tenant", s.tenant, "origin", s.origin, "witnesses", s.pub != nil)
	}
	a.log.Info("serve: listening", "addr", ln.Addr().String(), "public", c.public)
	fmt.Fprintf(a.stderr, "journal: serving %s (origin %s) on http://%s\n", a.dbPathOr(c.storeArg), servers[0].origin, ln.Addr())
	if c.ready != nil {
		c.ready(ln.Addr().String())
	}

	bg, cancelBG := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Go(func() { s.runSigner(bg, c.interval, c.every) })
		if s.pub != nil {
			wg.Go(func() {
				if err := s.pub.Run(bg); err != nil {
					a.log.Error("serve: publisher stopped", "tenant", s.tenant, "err", err)
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
	close(closing)
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

// tenantServer opens a.tenant's store (creating the journal and key on
// first start) and makes its server, signer and publisher.
func (a *app) tenantServer(ctx context.Context, c serveConfig, pol *checkpoint.Policy, reg *prometheus.Registry, reqs *prometheus.CounterVec, closing chan struct{}) (*server, error) {
	js, created, err := a.openStore(ctx, c.storeArg, true)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*server, error) {
		js.Close()
		return nil, err
	}
	if created {
		a.log.Info("serve: created a new journal and its log key", "journal", a.dbPath(), "key", a.keyPath(), "origin", js.Origin())
		fmt.Fprintf(a.stderr, "journal: created journal at %s and its log key at %s (origin %s)\n", a.dbPath(), a.keyPath(), js.Origin())
	}
	st, ok := js.(serveStore)
	if !ok {
		return fail(fmt.Errorf("this store cannot serve: it keeps no witness publications or tokens"))
	}
	if isDSN(c.storeArg) {
		// A database has no file beside which a key could live: the key
		// path must be named, and on first start the key is made there.
		if a.key == "" && os.Getenv(envKey) == "" {
			return fail(usageErrorf("with a postgres:// --store, name the log key file with --key or $%s", envKey))
		}
		if _, err := os.Stat(a.keyPath()); errors.Is(err, fs.ErrNotExist) {
			if _, err := createKey(a.keyPath(), js.Origin()); err != nil {
				return fail(err)
			}
			a.log.Info("serve: created the log key", "key", a.keyPath(), "origin", js.Origin())
			fmt.Fprintf(a.stderr, "journal: created the log key at %s (origin %s)\n", a.keyPath(), js.Origin())
		}
	}
	signer, vkey, err := loadSigner(a.keyPath(), js.Origin())
	if err != nil {
		return fail(err)
	}
	logKey, err := checkpoint.NewVerifier(vkey)
	if err != nil {
		return fail(err)
	}
	s := &server{
		st: st, tenant: js.Tenant(), origin: js.Origin(), public: c.public, signer: signer, logKey: logKey, policy: pol,
		log: a.log.With("tenant", js.Tenant()), reg: reg, reqs: reqs,
		sealed: make(chan struct{}, 1024), closing: closing,
	}
	if pol != nil {
		if err := checkPolicyLog(pol, logKey, js.Origin()); err != nil {
			return fail(usageErrorf("--policy: %v", err))
		}
		s.pub, err = publish.New(st, pol, logKey, publish.Options{
			MinBackoff: c.minRetry, MaxBackoff: c.maxRetry, Poll: c.pollEvery, Logger: s.log,
			Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"tenant": js.Tenant()}, reg),
		})
		if err != nil {
			return fail(usageErrorf("--policy: %v", err))
		}
	}
	return s, nil
}

func (a *app) dbPathOr(storeArg string) string {
	if storeArg != "" {
		if isDSN(storeArg) {
			return "postgres"
		}
		return storeArg
	}
	return a.dbPath()
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
