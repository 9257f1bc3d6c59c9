package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/runseal/runseal/connlimit"
	"github.com/runseal/runseal/witness"
)

// Defaults of "witness serve".
const (
	defaultListen        = "localhost:7380"
	defaultMetricsListen = "localhost:7381"
	shutdownGrace        = 15 * time.Second
)

func (a *app) serveCmd() *cobra.Command {
	var (
		listen, metricsListen, prefix string
		keys                          []string
		conns                         connlimit.Config
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the tlog-witness API",
		Long: `Serve the C2SP tlog-witness API until interrupted (SIGINT or SIGTERM):

  POST <prefix>/add-checkpoint            cosign a checkpoint
  GET  <prefix>/<origin hash>/checkpoint  latest cosigned checkpoint of a log
                                          (origin hash: hex SHA-256 of the origin)

and Prometheus metrics at http://<metrics-listen>/metrics.

Defaults: --listen ` + defaultListen + `, --metrics-listen ` + defaultMetricsListen + `, no prefix,
the state file and key file of the root help. Both listen on loopback only: put
a TLS reverse proxy (or an https-bastion) in front to serve the Internet.

Every answer to add-checkpoint is sent after the new checkpoint is on disk.
On SIGINT or SIGTERM the witness stops accepting connections, finishes the
requests in flight (up to 15s), and closes the state file.

Logs, keys and limits can be changed with the other commands while the
witness runs; it picks up changes within a second (a removed key at once).`,
		Example: `  witness serve
  witness serve --listen :7380 --metrics-listen 127.0.0.1:9100 --log-format json
  witness serve --key w1.key --key w2.key --prefix /tlog-witness`,
		Args: cobra.NoArgs,
		RunE: wrapRun(func(cmd *cobra.Command, _ []string) error {
			if err := conns.Check(); err != nil {
				return usageErrorf("--max-conns, --max-conns-per-addr: %v", err)
			}
			return a.serve(cmd.Context(), listen, metricsListen, prefix, keyPaths(keys), conns)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", defaultListen, "address for the witness API")
	f.StringVar(&metricsListen, "metrics-listen", defaultMetricsListen, `address for /metrics; "" disables metrics`)
	f.StringVar(&prefix, "prefix", "", `URL path prefix of the API, such as /tlog-witness ("" for none)`)
	f.IntVar(&conns.MaxConns, "max-conns", 0, "most client connections open at once; over it a connection is answered 503 and closed (0: half the open-file limit, at most 4096)")
	f.IntVar(&conns.MaxPerAddr, "max-conns-per-addr", 0, "most connections open at once from one client address (IPv6: one /64); 0: an eighth of --max-conns; -1: no bound, as behind a reverse proxy")
	f.StringArrayVar(&keys, "key", nil, "witness key file, repeatable: one cosignature line per key (default $"+envKey+", else ./"+defaultKey+")")
	return cmd
}

func (a *app) serve(ctx context.Context, listen, metricsListen, prefix string, keyFiles []string, conns connlimit.Config) error {
	cosigners, err := a.loadCosigners(keyFiles)
	if err != nil {
		return err
	}
	return a.withStore(ctx, func(st *witness.Store) error {
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		m, err := witness.NewMetrics(reg)
		if err != nil {
			return err
		}
		w, err := witness.New(ctx, st, cosigners, witness.Options{Logger: a.log, Metrics: m})
		if err != nil {
			return err
		}
		h, err := w.Handler(prefix)
		if err != nil {
			return usageErrorf("--prefix: %v", err)
		}
		inner, err := net.Listen("tcp", listen)
		if err != nil {
			return err
		}
		conns.Name, conns.Logger = "api", a.log
		ln := connlimit.New(inner, conns)
		srv := newHTTPServer(h, a.log)
		srv.ConnState = ln.ConnState // at the bound, idle connections make room
		servers := []*http.Server{srv}
		errc := make(chan error, 2)
		go func() { errc <- srv.Serve(ln) }()
		var vkeys []string
		for _, v := range w.Verifiers() {
			vkeys = append(vkeys, v.String())
		}
		attrs := []any{"addr", ln.Addr().String(), "prefix", prefix, "db", a.dbPath(), "vkeys", vkeys,
			"max_conns", ln.Config().MaxConns, "max_conns_per_addr", ln.Config().MaxPerAddr}
		if metricsListen != "" {
			minner, err := net.Listen("tcp", metricsListen)
			if err != nil {
				srv.Close()
				return err
			}
			mln := connlimit.New(minner, connlimit.Config{Name: "metrics", Logger: a.log})
			mux := http.NewServeMux()
			mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
			msrv := newHTTPServer(mux, a.log)
			msrv.ConnState = mln.ConnState
			servers = append(servers, msrv)
			go func() { errc <- msrv.Serve(mln) }()
			attrs = append(attrs, "metrics_addr", mln.Addr().String())
		}
		a.log.Info("witness: serving", attrs...)

		var serveErr error
		select {
		case <-ctx.Done():
		case serveErr = <-errc:
		}
		a.log.Info("witness: shutting down; finishing requests in flight")
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
		defer cancel()
		for _, s := range servers {
			if err := s.Shutdown(sctx); err != nil {
				a.log.Warn("witness: shutdown", "err", err)
				s.Close()
			}
		}
		if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
			return fmt.Errorf("serve: %w", serveErr)
		}
		a.log.Info("witness: stopped")
		return nil
	})
}

// newHTTPServer sets the timeouts a public server needs: a slow client
// cannot hold a connection (or a log's turn) for long.
func newHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       5 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}
