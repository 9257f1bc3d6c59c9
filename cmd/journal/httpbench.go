package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/api/server"
	"github.com/runseal/runseal/internal/appendload"
	"github.com/runseal/runseal/internal/benchappend"
	"github.com/runseal/runseal/store"
)

// httpBenchPoint is 'journal bench --http' at one client count: the most
// journal serve takes (closed loop), the latency of an open-loop load below
// that, and the store's own rate at the same concurrency without HTTP.
type httpBenchPoint struct {
	Clients int               `json:"clients"`
	Max     appendload.Result `json:"saturated"` // closed loop: the round of median rate
	Open    appendload.Result `json:"open_loop"` // offered at 80% of Max, latency from the schedule
	// Rounds are the saturated rounds, journal serve and the peer
	// alternating (the peer first in every other round), each with the
	// machine's load when it started.
	Rounds []appendload.Round `json:"rounds"`
	Store  measurement        `json:"store_ceiling"`
	// Ratio is the saturated HTTP rate over the in-process store's rate at
	// the same concurrency: what HTTP, auth and JSON cost.
	Ratio float64 `json:"ratio"`
	// Tessera is the peer at the same client count, measured right after
	// journal serve in the same run (with --tessera-posix).
	Tessera *peerPoint `json:"tessera_posix,omitempty"`
}

// peerPoint is a peer log driven the same way: the same clients, record
// bytes and schedule, each request one POST /add.
type peerPoint struct {
	Max  appendload.Result `json:"saturated"`
	Open appendload.Result `json:"open_loop"`
	// Ratio is journal serve's saturated rate over the peer's: the target
	// is >= 1 at 512 clients.
	Ratio float64 `json:"journal_vs_peer"`
	// RoundRatio is the median of the rounds' own ratios: each compares
	// two runs minutes apart at most, so it drifts less with the load of
	// a busy machine than the ratio of medians.
	RoundRatio float64 `json:"journal_vs_peer_per_round_median"`
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
	var tesseraAdd string
	if o.tessera != "" {
		add, stopT, err := startTesseraChild(ctx, o.tessera, filepath.Join(dir, "tessera"))
		if err != nil {
			return err
		}
		defer stopT()
		tesseraAdd = add
	}
	rep := httpBenchReport{
		Machine: machineInfo{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, NumCPU: runtime.NumCPU(), GoVersion: runtime.Version(), LoadBefore: loadAverage()},
		Payload: o.payload, Seconds: o.duration.Seconds(),
		LoadNote: "the load generator runs on the same machine as the server and shares its CPUs",
	}
	fields := benchappend.Fields(o.payload)
	if rep.Record, err = benchappend.RecordBytes(fields); err != nil {
		return err
	}
	rounds := max(o.rounds, 1)
	for _, c := range o.concurrency {
		a.log.Info("bench --http", "clients", c)
		p := httpBenchPoint{Clients: c}
		// The store's ceiling first, in this process, on its own file.
		w, err := benchappend.JournalWorkload(ctx, dir, c, 1, fields, nil)
		if err != nil {
			return err
		}
		r, err := benchappend.RunSlice(w.Steps, o.duration)
		w.Close()
		if err != nil {
			return err
		}
		p.Store = r.Summarize()
		journal := appendload.Config{BaseURL: base, Token: token, Clients: c, Duration: o.duration, Payload: o.payload}
		peer := appendload.Config{AddURL: tesseraAdd, Clients: c, Duration: o.duration, Payload: o.payload}
		m, err := appendload.Compare(ctx, journal, peer, rounds, loadAverage, func(round int, isPeer bool) {
			a.log.Info("bench --http: saturated round", "clients", c, "round", round, "tessera", isPeer)
		})
		if err != nil {
			return err
		}
		p.Max, p.Open, p.Rounds = m.Max, m.Open, m.Rounds
		p.Ratio = benchappend.Ratio(p.Max.Throughput, p.Store.RecordsPerSec)
		if tesseraAdd != "" {
			p.Tessera = &peerPoint{Max: m.PeerMax, Open: m.PeerOpen, Ratio: benchappend.Ratio(p.Max.Throughput, m.PeerMax.Throughput), RoundRatio: m.RoundRatio()}
		}
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
	id, secret, hash, err := server.NewToken()
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
		printRounds(w, p)
	}
	for _, p := range r.Points {
		if p.Max.Failed+p.Open.Failed > 0 {
			fmt.Fprintf(w, "clients %d: %d requests failed, first: %s %s\n", p.Clients, p.Max.Failed+p.Open.Failed, p.Max.FirstError, p.Open.FirstError)
		}
	}
	if len(r.Points) == 0 || r.Points[0].Tessera == nil {
		return
	}
	fmt.Fprintln(w, "Tessera POSIX log, POST /add of the same record bytes, same clients, rounds alternating with journal serve (medians):")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "clients\tsaturated/s\tp50\tp99\topen-loop offered/s\tachieved/s\tp50\tp99\tp99.9\tjournal/tessera\t")
	for _, p := range r.Points {
		t := p.Tessera
		fmt.Fprintf(tw, "%d\t%.0f\t%s\t%s\t%.0f\t%.0f\t%s\t%s\t%s\t%.2f\t\n", p.Clients, t.Max.Throughput, ms(t.Max.P50), ms(t.Max.P99),
			t.Open.Offered, t.Open.Throughput, ms(t.Open.P50), ms(t.Open.P99), ms(t.Open.P999), t.Ratio)
	}
	tw.Flush()
	for _, p := range r.Points {
		if t := p.Tessera; t.Max.Failed+t.Open.Failed > 0 {
			fmt.Fprintf(w, "tessera, clients %d: %d requests failed, first: %s %s\n", p.Clients, t.Max.Failed+t.Open.Failed, t.Max.FirstError, t.Open.FirstError)
		}
	}
}

// printRounds prints one point's saturated rounds: each side's rates, their
// spread around the median, the ratio within each round, and the load.
func printRounds(w io.Writer, p httpBenchPoint) {
	var js, ps, rs, ls []string
	var jv, pv []float64
	for _, rd := range p.Rounds {
		js = append(js, fmt.Sprintf("%.0f", rd.Journal))
		jv = append(jv, rd.Journal)
		ls = append(ls, fmt.Sprintf("%.1f", rd.Load))
		if rd.Peer > 0 {
			first := ""
			if rd.PeerFirst {
				first = "*"
			}
			ps = append(ps, fmt.Sprintf("%.0f%s", rd.Peer, first))
			pv = append(pv, rd.Peer)
			rs = append(rs, fmt.Sprintf("%.2f", rd.Journal/rd.Peer))
		}
	}
	spread := func(v []float64) string {
		lo, hi := slices.Min(v), slices.Max(v)
		s := slices.Sorted(slices.Values(v))
		m := s[len(s)/2]
		return fmt.Sprintf("median %.0f, %.0f to %.0f (%+.0f%%/%+.0f%%)", m, lo, hi, 100*(lo-m)/m, 100*(hi-m)/m)
	}
	fmt.Fprintf(w, "%d clients, %d saturated rounds: journal serve %s/s: %s; load average %s\n", p.Clients, len(p.Rounds), strings.Join(js, " "), spread(jv), strings.Join(ls, " "))
	if len(pv) > 0 {
		fmt.Fprintf(w, "  tessera posix %s/s (* went first): %s; journal/tessera per round %s (median %.2f), of medians %.2f\n", strings.Join(ps, " "), spread(pv), strings.Join(rs, " "), p.Tessera.RoundRatio, p.Tessera.Ratio)
	}
}

// startTesseraChild runs a Tessera POSIX log server binary (built from
// github.com/transparency-dev/tessera/cmd/conformance/posix, which is not a
// dependency of this module) over a fresh directory with a fresh note key,
// on a free loopback port, and returns its POST /add URL once it answers.
func startTesseraChild(ctx context.Context, bin, dir string) (string, func(), error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	skey, _, err := note.GenerateKey(rand.Reader, "runseal-bench-tessera")
	if err != nil {
		return "", nil, err
	}
	keyFile := filepath.Join(dir, "log.key")
	if err := os.WriteFile(keyFile, []byte(skey), 0o600); err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.CommandContext(ctx, bin, "--storage_dir", filepath.Join(dir, "log"), "--listen", addr, "--private_key", keyFile)
	var stderr bytes.Buffer
	cmd.Stderr = &limitedWriter{w: &stderr, n: 4096}
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start tessera posix %s: %w", bin, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop := func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}
	base := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/checkpoint")
		if err == nil {
			resp.Body.Close()
			return base + "/add", stop, nil
		}
		select {
		case <-exited:
			return "", nil, fmt.Errorf("tessera posix %s exited: %s", bin, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("tessera posix %s did not answer on %s within 30s: %s", bin, addr, stderr.String())
		}
	}
}

// limitedWriter keeps the first n bytes written to it and drops the rest.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(l.n, len(p))
		l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}
