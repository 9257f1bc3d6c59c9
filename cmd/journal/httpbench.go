package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/internal/appendload"
	"github.com/runseal/runseal/store"
)

// httpBenchPoint is 'journal bench --http' at one client count: the most
// journal serve takes (closed loop), the latency of an open-loop load below
// that, and the store's own rate at the same concurrency without HTTP.
type httpBenchPoint struct {
	Clients int               `json:"clients"`
	Max     appendload.Result `json:"saturated"` // closed loop: each client back to back
	Open    appendload.Result `json:"open_loop"` // offered at 80% of Max, latency from the schedule
	Store   measurement       `json:"store_ceiling"`
	// Ratio is the saturated HTTP rate over the in-process store's rate at
	// the same concurrency: what HTTP, auth and JSON cost.
	Ratio float64 `json:"ratio"`
}

type httpBenchReport struct {
	Machine  machineInfo      `json:"machine"`
	Payload  int              `json:"payload_bytes"`
	Record   int              `json:"record_bytes"`
	Seconds  float64          `json:"seconds_per_run"`
	Points   []httpBenchPoint `json:"points"`
	LoadNote string           `json:"note"`
}

// benchHTTP starts 'journal serve' on loopback in a child process over a
// fresh journal and drives it with appendload at each client count.
func (a *app) benchHTTP(ctx context.Context, o benchOptions) error {
	dir, err := os.MkdirTemp(o.dir, "runseal-bench-http-")
	if err != nil {
		return fmt.Errorf("bench directory: %w", err)
	}
	if !o.keep {
		defer os.RemoveAll(dir)
	}
	path := filepath.Join(dir, "journal.db")
	if _, _, err := a.createJournal(ctx, path, path+".key", store.DefaultTenant, ""); err != nil {
		return err
	}
	token, err := a.benchToken(ctx, path)
	if err != nil {
		return err
	}
	base, stop, err := startServeChild(ctx, path, o.serveProfile)
	if err != nil {
		return err
	}
	defer stop()
	rep := httpBenchReport{
		Machine: machineInfo{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, NumCPU: runtime.NumCPU(), GoVersion: runtime.Version(), LoadBefore: loadAverage()},
		Payload: o.payload, Seconds: o.duration.Seconds(),
		LoadNote: "the load generator runs on the same machine as the server and shares its CPUs",
	}
	fields := benchFields(o.payload)
	if rep.Record, err = benchRecordBytes(fields); err != nil {
		return err
	}
	for _, c := range o.concurrency {
		a.log.Info("bench --http", "clients", c)
		p := httpBenchPoint{Clients: c}
		// The store's ceiling first, in this process, on its own file.
		w, err := journalWorkload(ctx, dir, c, 1, fields)
		if err != nil {
			return err
		}
		r, err := runSlice(w.steps, o.duration)
		w.close()
		if err != nil {
			return err
		}
		p.Store = r.summarize()
		cfg := appendload.Config{BaseURL: base, Token: token, Clients: c, Duration: o.duration, Payload: o.payload}
		if p.Max, err = appendload.Run(ctx, cfg); err != nil {
			return err
		}
		cfg.Rate = 0.8 * p.Max.Throughput
		if cfg.Rate > 0 {
			if p.Open, err = appendload.Run(ctx, cfg); err != nil {
				return err
			}
		}
		p.Ratio = ratio(p.Max.Throughput, p.Store.RecordsPerSec)
		rep.Points = append(rep.Points, p)
	}
	rep.Machine.LoadAfter = loadAverage()
	if o.asJSON {
		return writeJSON(a.stdout, rep)
	}
	printHTTPBench(a.stdout, rep)
	return nil
}

// benchToken makes a writer token in the bench journal.
func (a *app) benchToken(ctx context.Context, path string) (string, error) {
	js, _, err := a.openStore(ctx, location{path: path, key: path + ".key"}, store.DefaultTenant, false)
	if err != nil {
		return "", err
	}
	defer js.Close()
	id, secret, hash, err := api.NewToken()
	if err != nil {
		return "", err
	}
	ts, ok := js.(store.TokenStore)
	if !ok {
		return "", fmt.Errorf("the bench store keeps no tokens")
	}
	return secret, ts.CreateToken(ctx, store.Token{ID: id, Tenant: store.DefaultTenant, Role: store.RoleWriter, Name: "bench", Hash: hash})
}

// startServeChild runs this program's 'serve' over path on a loopback port
// and returns its base URL once it listens.
func startServeChild(ctx context.Context, path, cpuProfile string) (string, func(), error) {
	exe, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	args := []string{"serve", "--db", path, "--listen", "127.0.0.1:0", "--checkpoint-interval", "1h", "--checkpoint-every", "1000000", "--log-level", "error"}
	if cpuProfile != "" {
		args = append(args, "--cpuprofile", cpuProfile)
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = os.Environ()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}
	br := bufio.NewReader(stderr)
	for {
		l, err := br.ReadString('\n')
		if i := strings.Index(l, " on http://"); i >= 0 {
			go io.Copy(io.Discard, br)
			return strings.TrimSpace(l[i+len(" on "):]), stop, nil
		}
		if err != nil {
			stop()
			return "", nil, fmt.Errorf("journal serve did not start: %v %s", err, l)
		}
	}
}

func printHTTPBench(w io.Writer, r httpBenchReport) {
	fmt.Fprintf(w, "journal serve appends over loopback HTTP: one record of about %d bytes per request, each client on its own leased run\n", r.Record)
	fmt.Fprintf(w, "%s/%s, %d CPUs, %s; load average %.2f before, %.2f after (%s)\n", r.Machine.GOOS, r.Machine.GOARCH, r.Machine.NumCPU, r.Machine.GoVersion, r.Machine.LoadBefore, r.Machine.LoadAfter, r.LoadNote)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "clients\tsaturated/s\tp50\tp99\topen-loop offered/s\tachieved/s\tp50\tp99\tp99.9\tstore (no HTTP)/s\tratio\t")
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000) }
	for _, p := range r.Points {
		fmt.Fprintf(tw, "%d\t%.0f\t%s\t%s\t%.0f\t%.0f\t%s\t%s\t%s\t%.0f\t%.2f\t\n", p.Clients, p.Max.Throughput, ms(p.Max.P50), ms(p.Max.P99),
			p.Open.Offered, p.Open.Throughput, ms(p.Open.P50), ms(p.Open.P99), ms(p.Open.P999), p.Store.RecordsPerSec, p.Ratio)
	}
	tw.Flush()
	for _, p := range r.Points {
		if p.Max.Failed+p.Open.Failed > 0 {
			fmt.Fprintf(w, "clients %d: %d requests failed, first: %s %s\n", p.Clients, p.Max.Failed+p.Open.Failed, p.Max.FirstError, p.Open.FirstError)
		}
	}
}
