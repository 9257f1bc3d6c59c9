// Package loadtest drives a tlog-witness with simulated logs at increasing
// request rates until its latency passes a bound, and reports the rate it
// sustained beside the machine's ceilings measured in the same run: Ed25519
// signing and verification, and single-row durable SQLite commits.
//
// Each simulated log keeps a real RFC 6962 tree (package log), signs each
// new checkpoint with its own Ed25519 key, and sends it with a consistency
// proof from the size the witness last cosigned, one request at a time, as
// a real log does. The load is open-loop: requests are due on a fixed
// schedule, latency counts from the due time, and answers that arrive after
// a step ends still count for it (see driver.step), so a witness that falls
// behind shows it in its latency instead of being sent less. So every request costs the witness what a real one
// costs: a signature verification, a proof check, a cosignature and a
// durable write; and it costs the load generator a signature (and a
// verification of the answer, see Config.VerifyEvery), which on one machine
// share the same cores.
package loadtest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/witness"
)

// Config configures a load test. Zero fields take the defaults given.
type Config struct {
	// URL is the submission prefix of the witness to test. Empty starts a
	// witness in this process, on a fresh state file in Dir, served over
	// loopback HTTP with the same code and durability as "witness serve".
	URL string
	// DB is the state file of the witness at URL, where the simulated logs
	// are registered (the witness reads new logs from its file). Required
	// with URL. The logs stay: a witness never forgets a log, so test a
	// scratch witness, not a production one.
	DB string
	// WitnessVKeys are the verifier keys of the witness at URL, to verify
	// its cosignatures. Without them only the answers' shape is checked.
	WitnessVKeys []string
	// Dir holds the in-process witness's state file; a temporary
	// directory (removed afterwards) when empty. Put it on the disk whose
	// fsync you want measured.
	Dir string

	Logs     int           // simulated logs; 128
	StartQPS float64       // rate of the first step; 250
	Factor   float64       // each step's rate is the previous one's times this; 1.25
	MaxQPS   float64       // no step above this rate; 50000
	Step     time.Duration // length of each step; 5s
	// MaxP99 is the latency bound: the test stops after the first step
	// whose 99th percentile exceeds it; 250ms.
	MaxP99 time.Duration
	// Leaves is how many leaves each log appends between checkpoints; 1.
	Leaves int
	// VerifyEvery verifies every n-th cosignature (1: all, the default;
	// negative: none), so that the generator's own CPU use can be traded
	// for checking the witness's answers.
	VerifyEvery int
	// Ceiling is how long each ceiling measurement runs; 1s.
	Ceiling time.Duration
	// Refine is how many steps bisect between the last rate sustained and
	// the first that failed, once the escalation stops on a failure; 0
	// takes the default 3 (a factor of 1.25 then resolves to about 3%),
	// negative none.
	Refine int

	// Logger receives progress; slog.Default() when nil.
	Logger *slog.Logger
}

func (c *Config) defaults() {
	def := func(v *float64, d float64) {
		if *v <= 0 {
			*v = d
		}
	}
	if c.Logs <= 0 {
		c.Logs = 128
	}
	def(&c.StartQPS, 250)
	if c.Factor <= 1 {
		c.Factor = 1.25
	}
	def(&c.MaxQPS, 50000)
	if c.Step <= 0 {
		c.Step = 5 * time.Second
	}
	if c.MaxP99 <= 0 {
		c.MaxP99 = 250 * time.Millisecond
	}
	if c.Leaves <= 0 {
		c.Leaves = 1
	}
	if c.VerifyEvery == 0 {
		c.VerifyEvery = 1
	}
	if c.Ceiling <= 0 {
		c.Ceiling = time.Second
	}
	if c.Refine == 0 {
		c.Refine = 3
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// A Report is the result of a load test, ready to print as JSON.
type Report struct {
	Witness    string `json:"witness"`    // "in-process, over loopback HTTP" or the tested URL
	Durability string `json:"durability"` // what an answer promises about the disk
	Logs       int    `json:"logs"`       // simulated logs
	CPUs       int    `json:"cpus"`       // GOMAXPROCS of the run
	Go         string `json:"go"`         // Go version
	// LoadBefore and LoadAfter are the machine's 1-minute load average
	// when the run started and ended (Linux only): a load above the CPU
	// count means other work shared the machine and every figure is low.
	LoadBefore float64 `json:"load_avg_1m_before,omitempty"`
	LoadAfter  float64 `json:"load_avg_1m_after,omitempty"`
	BoundP99Ms float64 `json:"latency_bound_p99_ms"` // the latency bound of the run
	// SustainedQPS is the highest rate of cosigned answers of a step that
	// kept p99 within the bound with at most 1% errors, latency counted
	// from each request's scheduled time; P50Ms and P99Ms are that step's.
	// The escalation also stops at the first step that falls short of 90%
	// of its target: the witness is saturated. Then a few steps bisect
	// between the last rate held and the first that failed (Config.Refine),
	// and count too.
	SustainedQPS float64 `json:"sustained_qps"`
	P50Ms        float64 `json:"p50_ms"` // median latency at the sustained step
	P99Ms        float64 `json:"p99_ms"` // 99th percentile latency at the sustained step
	// CPUUsPerRequest is the sustained step's CPU time per request (see
	// Step), and CryptoShare the part of it that is Ed25519 work
	// (Ceilings.CryptoUsPerRequest over it): the fraction of the crypto
	// bound the run would reach with the cores all its own. On a busy
	// machine it is the steadier figure beside SustainedQPS/CryptoBoundQPS.
	// In process only: against a URL the witness's CPU is not ours to see.
	CPUUsPerRequest float64 `json:"cpu_us_per_request"`
	CryptoShare     float64 `json:"crypto_share"`
	// ErrorsByStatus counts the answers other than 200 over the whole
	// run, by HTTP status ("transport" for no answer, "bad_answer" for a
	// 200 whose body is not signature lines, "bad_cosignature" for one
	// whose cosignature did not verify).
	ErrorsByStatus map[string]int64 `json:"errors_by_status"`
	Requests       int64            `json:"requests"`        // scheduled, all steps
	StoppedBecause string           `json:"stopped_because"` // why the escalation ended
	// RefinedBetween is the rate held and the rate that failed, closest
	// together, after the bisection that follows the escalation (see
	// Config.Refine); absent when there was none.
	RefinedBetween []float64 `json:"refined_between_qps,omitempty"`
	Steps          []Step    `json:"steps"`    // every step, in order
	Ceilings       Ceilings  `json:"ceilings"` // the machine, measured before the steps
	// Commit reports the in-process witness's group commit.
	Commit *CommitStats `json:"commit,omitempty"`
}

// A Step is one rate of the escalation.
type Step struct {
	TargetQPS   float64 `json:"target_qps"`   // the rate asked for
	AchievedQPS float64 `json:"achieved_qps"` // cosigned answers to the step's schedule, per second of the step
	Requests    int64   `json:"requests"`     // scheduled in the step
	P50Ms       float64 `json:"p50_ms"`       // median latency of the 200 answers, from the scheduled time
	P99Ms       float64 `json:"p99_ms"`       // 99th percentile; -1 if none
	MaxMs       float64 `json:"max_ms"`       // slowest 200 answer
	// CPUUsPerRequest is the CPU time (user and system, all threads) this
	// process spent during the step per request scheduled: generator and,
	// in process, witness. Unlike the rates it barely depends on what else
	// the machine runs, so it is the figure to compare across runs.
	CPUUsPerRequest float64          `json:"cpu_us_per_request"`
	Errors          map[string]int64 `json:"errors,omitempty"` // other answers by status; "late": not sent within the drain time
	Pass            bool             `json:"pass"`             // p99 within the bound, at most 1% errors
	Refine          bool             `json:"refine,omitempty"` // a bisection step, after the escalation
}

// Ceilings are the machine's limits measured in the same run.
type Ceilings struct {
	// Ed25519SignVerifyPerSec is sign-then-verify pairs per second on all
	// cores: the witness needs one pair per request (verify the log's
	// signature, sign the cosignature).
	Ed25519SignVerifyPerSec float64 `json:"ed25519_sign_verify_per_sec"`
	Ed25519SignPerSec       float64 `json:"ed25519_sign_per_sec"`   // signatures per second, all cores
	Ed25519VerifyPerSec     float64 `json:"ed25519_verify_per_sec"` // verifications per second, all cores
	Ed25519SignCPUUs        float64 `json:"ed25519_sign_cpu_us"`    // CPU time of one signature
	Ed25519VerifyCPUUs      float64 `json:"ed25519_verify_cpu_us"`  // CPU time of one verification
	// CryptoBoundQPS is the request rate at which this machine would do
	// nothing but Ed25519, counting the generator's work too when the
	// witness runs in this process: a log signature, a verification of it
	// and a cosignature, plus the share of cosignatures verified.
	CryptoBoundQPS float64 `json:"crypto_bound_qps"`
	// CryptoUsPerRequest is the CPU time of that Ed25519 work per request,
	// from the CPU time of one signature and one verification.
	CryptoUsPerRequest float64 `json:"crypto_us_per_request"`
	// SQLiteCommitsPerSec is single-row transactions per second, one after
	// another, in WAL mode with synchronous=FULL, in the state file's
	// directory: what a witness without group commit could sustain. The
	// latencies of those commits are the floor and the tail of any durable
	// answer on this disk.
	SQLiteCommitsPerSec float64 `json:"sqlite_single_commits_per_sec"`
	SQLiteCommitP50Ms   float64 `json:"sqlite_single_commit_p50_ms"` // median single commit
	SQLiteCommitP99Ms   float64 `json:"sqlite_single_commit_p99_ms"` // 99th percentile single commit
	SQLiteCommitMaxMs   float64 `json:"sqlite_single_commit_max_ms"` // slowest single commit
}

// CommitStats describes the group commit of an in-process witness.
type CommitStats struct {
	Transactions   uint64  `json:"transactions"`                            // over the whole run
	AvgGroup       float64 `json:"avg_writes_per_transaction"`              // over the whole run
	CommitsPerSec  float64 `json:"transactions_per_sec_at_sustained"`       // during the sustained step
	SustainedGroup float64 `json:"avg_writes_per_transaction_at_sustained"` // during the sustained step
}

// Run measures the ceilings, then drives the witness step by step until a
// step fails or MaxQPS is reached, and returns the report. Cancelling ctx
// ends the test early with the steps done so far.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	lg := cfg.Logger
	rep := &Report{
		Logs: cfg.Logs, CPUs: runtime.GOMAXPROCS(0), Go: runtime.Version(),
		BoundP99Ms: ms(cfg.MaxP99), ErrorsByStatus: map[string]int64{},
		Durability: "every answer sent after its checkpoint is committed (SQLite WAL, synchronous=FULL, group commit across logs)",
		LoadBefore: loadAvg(),
	}
	defer func() { rep.LoadAfter = loadAvg() }()

	dir := cfg.Dir
	if cfg.URL == "" && dir == "" {
		d, err := os.MkdirTemp("", "witness-loadtest-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	ceilDir := dir
	if cfg.URL != "" {
		ceilDir = filepath.Dir(cfg.DB)
	}
	lg.Info("loadtest: measuring ceilings", "each", cfg.Ceiling)
	var err error
	if rep.Ceilings, err = measureCeilings(ctx, ceilDir, cfg.Ceiling); err != nil {
		return nil, err
	}
	rep.Ceilings.CryptoBoundQPS = cryptoBound(rep.Ceilings, cfg)
	rep.Ceilings.CryptoUsPerRequest = cryptoCPU(rep.Ceilings, cfg)

	// The witness under test.
	var (
		url     = cfg.URL
		st      *witness.Store
		wverifs []note.Verifier
		groups  *groupCounter
	)
	if cfg.URL == "" {
		rep.Witness = "in-process, over loopback HTTP"
		srvURL, s, vs, g, stop, err := startWitness(ctx, filepath.Join(dir, "witness.db"), lg)
		if err != nil {
			return nil, err
		}
		defer stop()
		url, st, wverifs, groups = srvURL, s, vs, g
	} else {
		rep.Witness = cfg.URL
		if cfg.DB == "" {
			return nil, errors.New("loadtest: a witness URL needs its state file (DB) to register the simulated logs")
		}
		s, err := witness.OpenStore(ctx, cfg.DB, witness.StoreOptions{Logger: lg})
		if err != nil {
			return nil, err
		}
		defer s.Close()
		st = s
		for _, k := range cfg.WitnessVKeys {
			v, err := checkpoint.NewCosignatureVerifier(k)
			if err != nil {
				return nil, fmt.Errorf("loadtest: witness key: %w", err)
			}
			wverifs = append(wverifs, v)
		}
	}

	logs, err := newLogs(ctx, st, cfg)
	if err != nil {
		return nil, err
	}
	tgt, err := newTarget(url)
	if err != nil {
		return nil, err
	}
	var cs conns
	defer cs.closeAll()
	for _, l := range logs {
		l.conn = cs.open(tgt)
	}
	d := &driver{cfg: cfg, target: tgt, verifiers: note.VerifierList(wverifs...), nverifiers: len(wverifs)}

	best := -1
	// run drives one step at target and files it in the report.
	run := func(target float64, refine bool) Step {
		g0, cpu0 := groups.snapshot(), cpuTime()
		step := d.step(ctx, logs, target)
		g1, cpu1 := groups.snapshot(), cpuTime()
		step.Refine = refine
		if step.Requests > 0 && cpu1 > cpu0 {
			step.CPUUsPerRequest = round1(float64(cpu1-cpu0) / float64(time.Microsecond) / float64(step.Requests))
		}
		step.Pass = step.P99Ms >= 0 && step.P99Ms <= ms(cfg.MaxP99) && errorRate(step) <= 0.01
		rep.Steps = append(rep.Steps, step)
		lg.Info("loadtest: step", "target_qps", round1(target), "achieved_qps", step.AchievedQPS,
			"p50_ms", step.P50Ms, "p99_ms", step.P99Ms, "errors", step.Errors, "pass", step.Pass, "refine", refine)
		for k, v := range step.Errors {
			rep.ErrorsByStatus[k] += v
		}
		rep.Requests += step.Requests
		if step.Pass && (best < 0 || step.AchievedQPS > rep.Steps[best].AchievedQPS) {
			best = len(rep.Steps) - 1
			rep.Commit = nil
			if cfg.URL == "" && g1.n > g0.n {
				rep.Commit = &CommitStats{
					CommitsPerSec:  round1(float64(g1.n-g0.n) / cfg.Step.Seconds()),
					SustainedGroup: round1(float64(g1.writes-g0.writes) / float64(g1.n-g0.n)),
				}
			}
		}
		return step
	}
	rep.StoppedBecause, rep.RefinedBetween = search(ctx, cfg, run)
	if best >= 0 {
		b := rep.Steps[best]
		rep.SustainedQPS, rep.P50Ms, rep.P99Ms = b.AchievedQPS, b.P50Ms, b.P99Ms
		rep.CPUUsPerRequest = b.CPUUsPerRequest
		if b.CPUUsPerRequest > 0 && cfg.URL == "" {
			rep.CryptoShare = math.Round(rep.Ceilings.CryptoUsPerRequest/b.CPUUsPerRequest*1000) / 1000
		}
	}
	if groups != nil {
		g := groups.snapshot()
		if rep.Commit == nil {
			rep.Commit = &CommitStats{}
		}
		rep.Commit.Transactions = g.n
		if g.n > 0 {
			rep.Commit.AvgGroup = round1(float64(g.writes) / float64(g.n))
		}
	}
	return rep, nil
}

// search escalates the rate from cfg.StartQPS by cfg.Factor, running each
// step with run, until a step fails, the witness saturates or cfg.MaxQPS is
// reached, and returns why it stopped. The escalation's steps are a factor
// apart, so it then bisects (geometrically, cfg.Refine steps at most)
// between the last rate held and the first that failed, and returns that
// pair, closest together: the sustained figure is then within a few
// percent of the witness's limit rather than up to a whole factor below.
func search(ctx context.Context, cfg Config, run func(target float64, refine bool) Step) (stopped string, refined []float64) {
	// held says whether a step sustained its target: within the bound and
	// answering at least 90% of it.
	held := func(s Step, target float64) bool { return s.Pass && s.AchievedQPS >= 0.9*target }
	target := cfg.StartQPS
	lastHeld, failed := 0.0, 0.0
	for {
		if err := ctx.Err(); err != nil {
			stopped = "interrupted"
			break
		}
		step := run(target, false)
		switch {
		case !step.Pass && step.P99Ms > ms(cfg.MaxP99):
			stopped = fmt.Sprintf("p99 %.1fms over the %.0fms bound at %.0f qps", step.P99Ms, ms(cfg.MaxP99), target)
		case !step.Pass:
			stopped = fmt.Sprintf("%.1f%% errors at %.0f qps", 100*errorRate(step), target)
		case step.AchievedQPS < 0.9*target:
			stopped = fmt.Sprintf("saturated: %.0f of %.0f qps answered within the bound", step.AchievedQPS, target)
		case target*cfg.Factor > cfg.MaxQPS:
			stopped = fmt.Sprintf("reached the maximum rate %.0f qps", cfg.MaxQPS)
		}
		if held(step, target) {
			lastHeld = target
		} else {
			failed = target
		}
		if stopped != "" {
			break
		}
		target *= cfg.Factor
	}
	if lastHeld == 0 || failed <= lastHeld {
		return stopped, nil
	}
	lo, hi := lastHeld, failed
	for i := 0; i < cfg.Refine && hi/lo > 1.02 && ctx.Err() == nil; i++ {
		mid := math.Sqrt(lo * hi)
		if held(run(mid, true), mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return stopped, []float64{round1(lo), round1(hi)}
}

func errorRate(s Step) float64 {
	var n int64
	for _, v := range s.Errors {
		n += v
	}
	if s.Requests == 0 {
		return 1
	}
	return float64(n) / float64(s.Requests)
}

// ---- the simulated logs -----------------------------------------------------

type simLog struct {
	origin   string
	signer   note.Signer
	nodes    log.MemStore
	size     uint64 // tree size
	cosigned uint64 // the size the witness holds, as far as this log knows
	n        uint64 // requests made, for VerifyEvery
	conn     *logConn
}

// newLogs creates the simulated logs and registers them with the witness's
// store, under origins unique to this run.
func newLogs(ctx context.Context, st *witness.Store, cfg Config) ([]*simLog, error) {
	var run [4]byte
	rand.Read(run[:])
	logs := make([]*simLog, cfg.Logs)
	for i := range logs {
		origin := fmt.Sprintf("loadtest.invalid/%x/%d", run, i)
		skey, vkey, err := checkpoint.GenerateLogKey(rand.Reader, origin)
		if err != nil {
			return nil, err
		}
		s, err := checkpoint.NewSigner(skey)
		if err != nil {
			return nil, err
		}
		if err := st.AddLog(ctx, witness.LogConfig{Origin: origin, Keys: []string{vkey}, QPD: witness.MaxQPD, Burst: witness.MaxQPD, Contact: "witness loadtest"}); err != nil {
			return nil, fmt.Errorf("loadtest: registering %s: %w", origin, err)
		}
		logs[i] = &simLog{origin: origin, signer: s}
	}
	return logs, nil
}

// next grows the log and returns the request for its new checkpoint, with
// a proof from the size the witness holds as far as the log knows.
func (l *simLog) next(ctx context.Context, leaves int) (request, error) {
	vals := make([]log.Hash, leaves)
	for i := range vals {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], l.size+uint64(i))
		vals[i] = sha256.Sum256(append([]byte(l.origin), b[:]...))
	}
	root, err := log.Append(ctx, &l.nodes, l.size, vals...)
	if err != nil {
		return request{}, err
	}
	l.size += uint64(leaves)
	p, err := log.ConsistencyProof(ctx, &l.nodes, l.cosigned, l.size)
	if err != nil {
		return request{}, err
	}
	msg, err := checkpoint.Sign(checkpoint.Checkpoint{Origin: l.origin, Size: l.size, Root: root}, l.signer)
	return request{old: l.cosigned, proof: p, msg: msg, size: l.size}, err
}

// ---- the driver -------------------------------------------------------------

type driver struct {
	cfg        Config
	target     *target // where a log without a connection dials
	verifiers  note.Verifiers
	nverifiers int
}

type result struct {
	lat    time.Duration // from the request's scheduled time to its answer
	status string        // "200" or the error class
}

// statusBadAnswer is the class of a 200 answer that is not cosignature
// lines.
const statusBadAnswer = "bad_answer"

// statusLate is the class of a request the generator could not even send
// within the step's drain time: the witness was too far behind.
const statusLate = "late"

// step drives the logs open-loop at target requests per second for
// cfg.Step and reports every request scheduled in it.
//
// The schedule is fixed in advance: request k of the step is due at
// start + k/target, and goes to log k mod Logs, so each log sends at
// target/Logs evenly spaced. A log sends one request at a time, as a real
// log must (each proof starts from the size the last answer gave), so a
// request whose log is still waiting for an earlier answer is sent late;
// its latency is measured from its scheduled time all the same, so a slow
// witness shows as latency rather than as fewer requests (no coordinated
// omission). The step waits for the answers of every request it scheduled,
// including those that arrive after its end; a request that could not be
// sent within the drain time (the larger of the step and ten latency
// bounds) after its due time is counted as an error, "late".
func (d *driver) step(ctx context.Context, logs []*simLog, target float64) Step {
	n := max(1, int(target*d.cfg.Step.Seconds()))
	interval := time.Duration(float64(time.Second) / target)
	drain := max(d.cfg.Step, 10*d.cfg.MaxP99)
	var (
		mu      sync.Mutex
		results = make([]result, 0, n)
		wg      sync.WaitGroup
	)
	// A short lead lets every log's goroutine be waiting before the first
	// request is due.
	start := time.Now().Add(20 * time.Millisecond)
	for i, l := range logs {
		if i >= n {
			break
		}
		wg.Go(func() {
			var mine []result
			defer func() {
				mu.Lock()
				results = append(results, mine...)
				mu.Unlock()
			}()
			for k := i; k < n; k += len(logs) {
				req, err := l.next(ctx, d.cfg.Leaves)
				if err != nil {
					mine = append(mine, result{status: "generator"})
					continue
				}
				due := start.Add(time.Duration(k) * interval)
				if wait := time.Until(due); wait > 0 {
					t := time.NewTimer(wait)
					select {
					case <-ctx.Done():
						t.Stop()
						return
					case <-t.C:
					}
				} else if -wait > drain {
					for ; k < n; k += len(logs) {
						mine = append(mine, result{status: statusLate})
					}
					return
				}
				r := d.send(ctx, l, req)
				r.lat = time.Since(due)
				mine = append(mine, r)
			}
		})
	}
	wg.Wait()
	st := Step{TargetQPS: round1(target), Requests: int64(len(results))}
	lats := make([]time.Duration, 0, len(results))
	for _, r := range results {
		if r.status == "200" {
			lats = append(lats, r.lat)
			continue
		}
		if st.Errors == nil {
			st.Errors = map[string]int64{}
		}
		st.Errors[r.status]++
	}
	// The rate of cosigned answers to the step's schedule: every request
	// due within the step counts, whenever its answer came.
	st.AchievedQPS = round1(float64(len(lats)) / d.cfg.Step.Seconds())
	slices.Sort(lats)
	st.P50Ms, st.P99Ms = ms(percentile(lats, 0.50)), ms(percentile(lats, 0.99))
	if len(lats) > 0 {
		st.MaxMs = ms(lats[len(lats)-1])
	} else {
		st.P99Ms = -1 // nothing answered: no percentile
	}
	return st
}

// A request is one add-checkpoint request of a simulated log, prepared
// before it is due.
type request struct {
	old   uint64
	proof [][32]byte
	msg   []byte
	size  uint64
}

// send makes one request for l and classifies the answer. The log's view of
// the witness's size follows the answer, as a publisher's would.
func (d *driver) send(ctx context.Context, l *simLog, req request) result {
	if l.conn == nil {
		l.conn = &logConn{t: d.target}
	}
	lines, err := l.conn.addCheckpoint(ctx, req.old, req.proof, req.msg)
	var r result
	var ce *witness.ConflictError
	var se *witness.StatusError
	switch {
	case err == nil:
		r.status = "200"
		l.cosigned = req.size
		l.n++
		if d.nverifiers > 0 && d.cfg.VerifyEvery > 0 && l.n%uint64(d.cfg.VerifyEvery) == 0 && !d.verify(req.msg, lines) {
			r.status = "bad_cosignature"
		}
	case errors.As(err, &ce):
		r.status = "409"
		l.cosigned = ce.Size
	case errors.As(err, &se) && se.StatusCode == http.StatusOK:
		// A 200 whose body is not signature lines is no cosignature:
		// counting it as one would credit the witness with an answer it
		// did not give.
		r.status = statusBadAnswer
	case errors.As(err, &se):
		r.status = strconv.Itoa(se.StatusCode)
	default:
		r.status = "transport"
	}
	return r
}

// verify checks that lines hold a valid cosignature from every witness key
// on msg's checkpoint. The log's own signature is not checked again: the
// generator made it.
func (d *driver) verify(msg, lines []byte) bool {
	i := bytes.Index(msg, []byte("\n\n"))
	if i < 0 {
		return false
	}
	s, err := checkpoint.Open(append(msg[:i+2:i+2], lines...), d.verifiers)
	return err == nil && len(s.Cosignatures()) == d.nverifiers
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e4) / 100 }

func round1(f float64) float64 { return math.Round(f*10) / 10 }

// ---- the in-process witness -------------------------------------------------

// groupCounter reads the in-process witness's group commit metrics.
type groupCounter struct{ reg *prometheus.Registry }

type groupSnap struct{ n, writes uint64 }

func (g *groupCounter) snapshot() groupSnap {
	if g == nil {
		return groupSnap{}
	}
	mfs, _ := g.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "witness_commit_group_size" && len(mf.GetMetric()) == 1 {
			h := mf.GetMetric()[0].GetHistogram()
			return groupSnap{h.GetSampleCount(), uint64(h.GetSampleSum())}
		}
	}
	return groupSnap{}
}

// startWitness runs a witness on a new state file, served on a loopback
// port, and returns its URL, its store and verifiers, and a stop function.
func startWitness(ctx context.Context, path string, lg *slog.Logger) (string, *witness.Store, []note.Verifier, *groupCounter, func(), error) {
	st, err := witness.OpenStore(ctx, path, witness.StoreOptions{Create: true, Logger: lg})
	if err != nil {
		return "", nil, nil, nil, nil, err
	}
	fail := func(err error) (string, *witness.Store, []note.Verifier, *groupCounter, func(), error) {
		st.Close()
		return "", nil, nil, nil, nil, err
	}
	skey, _, err := checkpoint.GenerateCosignerKey(rand.Reader, "loadtest.invalid/witness")
	if err != nil {
		return fail(err)
	}
	c, err := checkpoint.NewCosigner(skey)
	if err != nil {
		return fail(err)
	}
	reg := prometheus.NewRegistry()
	m, err := witness.NewMetrics(reg)
	if err != nil {
		return fail(err)
	}
	w, err := witness.New(ctx, st, []*checkpoint.Cosigner{c}, witness.Options{Logger: lg, Metrics: m})
	if err != nil {
		return fail(err)
	}
	h, err := w.Handler("")
	if err != nil {
		return fail(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	go srv.Serve(ln)
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		st.Close()
	}
	return "http://" + ln.Addr().String(), st, []note.Verifier{c.Verifier()}, &groupCounter{reg}, stop, nil
}

// ---- ceilings ---------------------------------------------------------------

// cryptoBound is the request rate at which the Ed25519 work done on this
// machine would use every core: per request, the log's signature and (in
// process) the witness's verification of it and its cosignature, plus the
// generator's verification of the share of answers it checks.
func cryptoBound(c Ceilings, cfg Config) float64 {
	signs, verifies := cryptoWork(cfg)
	// The rates are for all cores, so the core-seconds cancel out.
	return round1(1 / (signs/c.Ed25519SignPerSec + verifies/c.Ed25519VerifyPerSec))
}

// cryptoCPU is the CPU time of the Ed25519 work of one request, in
// microseconds.
func cryptoCPU(c Ceilings, cfg Config) float64 {
	signs, verifies := cryptoWork(cfg)
	return round1(signs*c.Ed25519SignCPUUs + verifies*c.Ed25519VerifyCPUUs)
}

// cryptoWork counts the Ed25519 signatures and verifications this machine
// does per request: the log's signature and (in process) the witness's
// verification of it and its cosignature, plus the generator's
// verification of the share of answers it checks.
func cryptoWork(cfg Config) (signs, verifies float64) {
	signs, verifies = 1.0, 0.0
	if cfg.URL == "" {
		signs, verifies = 2, 1
	}
	if cfg.VerifyEvery > 0 && (cfg.URL == "" || len(cfg.WitnessVKeys) > 0) {
		verifies += 1 / float64(cfg.VerifyEvery)
	}
	return signs, verifies
}

// measureCeilings measures Ed25519 on every core and durable single-row
// SQLite commits in dir, each for d.
func measureCeilings(ctx context.Context, dir string, d time.Duration) (Ceilings, error) {
	var c Ceilings
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	msg := make([]byte, 120) // about a checkpoint body with the cosignature header
	sig := ed25519.Sign(priv, msg)
	par := runtime.GOMAXPROCS(0)
	c.Ed25519SignVerifyPerSec = parallelRate(par, d, func() {
		s := ed25519.Sign(priv, msg)
		if !ed25519.Verify(pub, msg, s) {
			panic("loadtest: Ed25519 self-check failed")
		}
	})
	c.Ed25519SignPerSec, c.Ed25519SignCPUUs = parallelRateCPU(par, d, func() { ed25519.Sign(priv, msg) })
	c.Ed25519VerifyPerSec, c.Ed25519VerifyCPUUs = parallelRateCPU(par, d, func() { ed25519.Verify(pub, msg, sig) })
	lats, rate, err := sqliteCommits(ctx, dir, d)
	if err != nil {
		return c, err
	}
	c.SQLiteCommitsPerSec = rate
	c.SQLiteCommitP50Ms, c.SQLiteCommitP99Ms = ms(percentile(lats, .5)), ms(percentile(lats, .99))
	if len(lats) > 0 {
		c.SQLiteCommitMaxMs = ms(lats[len(lats)-1])
	}
	return c, nil
}

// parallelRateCPU is parallelRate that also returns the CPU time one op
// took, in microseconds, from getrusage: on a busy machine the rate falls
// but the CPU time per op hardly moves.
func parallelRateCPU(par int, d time.Duration, op func()) (perSec, cpuUs float64) {
	var n int64
	cpu0 := cpuTime()
	perSec = parallelRate(par, d, func() { op(); atomic.AddInt64(&n, 1) })
	if cpu := cpuTime() - cpu0; n > 0 && cpu > 0 {
		cpuUs = math.Round(float64(cpu)/float64(time.Microsecond)/float64(n)*100) / 100
	}
	return perSec, cpuUs
}

func parallelRate(par int, d time.Duration, op func()) float64 {
	var n atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for range par {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				for range 16 {
					op()
				}
				n.Add(16)
			}
		})
	}
	wg.Wait()
	return round1(float64(n.Load()) / time.Since(start).Seconds())
}

// sqliteCommits commits one small row per transaction, one after another,
// with the witness's durability settings, and returns the sorted commit
// latencies and the rate.
func sqliteCommits(ctx context.Context, dir string, d time.Duration) ([]time.Duration, float64, error) {
	f, err := os.CreateTemp(dir, "ceiling-*.db")
	if err != nil {
		return nil, 0, err
	}
	path := f.Name()
	f.Close()
	defer func() {
		for _, s := range []string{"", "-wal", "-shm"} {
			os.Remove(path + s)
		}
	}()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, 0, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)"); err != nil {
		return nil, 0, err
	}
	row := make([]byte, 200)
	var lats []time.Duration
	start := time.Now()
	for time.Since(start) < d {
		t0 := time.Now()
		if _, err := db.ExecContext(ctx, "INSERT INTO t(v) VALUES (?)", row); err != nil {
			return nil, 0, err
		}
		lats = append(lats, time.Since(t0))
	}
	slices.Sort(lats)
	return lats, round1(float64(len(lats)) / time.Since(start).Seconds()), nil
}

// cpuTime returns this process's user and system CPU time so far, or 0
// where getrusage is missing.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadAvg returns the 1-minute load average, or 0 where it is unknown.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _, _ := strings.Cut(string(b), " ")
	v, _ := strconv.ParseFloat(f, 64)
	return v
}
