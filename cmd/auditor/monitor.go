package main

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/disclosure"
	"github.com/runseal/runseal/log"
)

const monitorLong = `Follow a running journal serve (spec/http.md, section 3) and check that its
log only ever grows. URL is the server's base URL; a query in it (such as
?tenant=acme) is kept on every request. Each check:

  1. fetches the latest witnessed checkpoint (GET URL/v1/checkpoint/witnessed)
     and verifies the log's signature and the witness policy;
  2. compares it with the last checkpoint verified, kept in --state DIR:
     a larger size must come with a consistency proof
     (GET URL/v1/proof/consistency?old=N&new=M) that verifies; the same
     size must have the same root; a smaller size is a rollback and is
     refused;
  3. saves the new checkpoint atomically (write, fsync, rename, fsync).

The first check trusts the checkpoint it finds (there is nothing to compare
it with) and says so. A fork is the log equivocating: signing two
checkpoints that cannot both be true (the same size with another root, or a
consistency proof that reproduces the newer signed root but gives another
root for the saved size). When a proof fails otherwise, the monitor fetches
the checkpoint the log signed at the saved size (GET URL/v1/checkpoint/N):
another root there is a fork; the same root means the server sent a bad
proof, which is no verdict (exit 3) and is checked again. On a fork it writes self-contained evidence to
DIR/fork-<time>.json (mode 0600): both signed checkpoints, and the keys and
policy used, so anyone can check it without the log; then it exits 4.

Redirects are followed only to the same host and scheme (never https to
http), and credentials in URL are redacted from logs and evidence.

With --tiles URL|DIR it follows the log's C2SP tlog-tiles layout instead
(spec/tiles.md): the checkpoint from checkpoint-witnessed (else checkpoint),
and the consistency proof built from tiles, each authenticated against the
new checkpoint's root; a tile that is malformed or does not lead to that
root is named and gives no verdict (3), never a fork.

With --once it checks once and exits (for cron). Otherwise it checks every
--interval, logs each result, serves Prometheus metrics on --metrics-addr,
keeps going after errors (they are logged and counted), exits 0 on SIGINT or
SIGTERM, and exits 4 on a fork.

Exit codes (--once): 0 the log is consistent with the state (or the state
was started); 1 the log served a checkpoint that does not verify, changed
origin, or rolled back; 3 no verdict (network error, quorum not met, a bad
proof, state unreadable); 4 fork, evidence written; 2 usage error.`

const monitorExample = `  auditor monitor https://log.example/acme --state /var/lib/runseal-monitor/acme \
      --log-key @log.vkey --witness @w1.vkey --witness @w2.vkey --quorum 2 --once
  auditor monitor https://log.example/acme --state ./mon --log-key @log.vkey \
      --policy witnesses.policy --interval 1m --metrics-addr 127.0.0.1:9464`

// State files in the state directory.
const (
	stateFile = "checkpoint" // the last verified signed checkpoint note
	lockFile  = "lock"
)

func (a *app) monitorCmd() *cobra.Command {
	var tf trustFlags
	var stateDir, metricsAddr, tilesLoc string
	var once, asJSON bool
	var interval, timeout time.Duration
	cmd := &cobra.Command{
		Use:     "monitor (URL | --tiles URL|DIR) --state DIR",
		Short:   "Follow a running log: verify every checkpoint's consistency, detect forks",
		Long:    monitorLong,
		Example: monitorExample,
		Args:    cobra.MaximumNArgs(1),
		RunE: wrapRun(func(cmd *cobra.Command, args []string) error {
			if stateDir == "" {
				return usageErrorf("--state DIR is required")
			}
			var c logSource
			switch {
			case tilesLoc != "" && len(args) == 0:
				ts, err := newTilesSource(tilesLoc, timeout)
				if err != nil {
					return err
				}
				c = ts
			case tilesLoc == "" && len(args) == 1:
				ac, err := api.NewClient(args[0], api.ClientOptions{HTTPClient: &http.Client{Timeout: timeout}, UserAgent: "runseal-auditor"})
				if err != nil {
					return usageErrorf("URL: %v", err)
				}
				c = ac
			default:
				return usageErrorf("give either the journal's URL or --tiles URL|DIR")
			}
			if interval < time.Second {
				return usageErrorf("--interval %s: at least 1s", interval)
			}
			tr, err := tf.load()
			if err != nil {
				return err
			}
			if err := os.MkdirAll(stateDir, 0o700); err != nil {
				return unverifiablef("state dir: %v", err)
			}
			unlock, err := lockDir(filepath.Join(stateDir, lockFile))
			if err != nil {
				return unverifiablef("state dir %s: %v", stateDir, err)
			}
			defer unlock()
			m := &monitor{c: c, tr: tr, dir: stateDir, log: a.log, now: time.Now, metrics: newMetrics()}
			ctx := cmd.Context()
			if once {
				res := m.check(ctx)
				m.report(res)
				if asJSON {
					if err := writeJSON(a.stdout, res); err != nil {
						return err
					}
				} else {
					fmt.Fprintf(a.stdout, "%s: %s\n", res.Result, res.Message)
				}
				if res.Code != exitSound {
					return verdictError(res.Code, "%s", res.Message)
				}
				return nil
			}
			return m.loop(ctx, interval, metricsAddr)
		}),
	}
	tf.register(cmd.Flags())
	cmd.Flags().StringVar(&tilesLoc, "tiles", "", "follow the log's C2SP tlog-tiles layout (a URL prefix or a directory) instead of its API, building proofs from tiles (spec/tiles.md)")
	cmd.Flags().StringVar(&stateDir, "state", "", "directory for the last verified checkpoint, the lock and fork evidence (created 0700 if missing)")
	cmd.Flags().BoolVar(&once, "once", false, "check once and exit with the result's code (for cron)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "with --once, print the result as JSON")
	cmd.Flags().DurationVar(&interval, "interval", 5*time.Minute, "time between checks when running continuously")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "HTTP request timeout")
	cmd.Flags().StringVar(&metricsAddr, "metrics-addr", "127.0.0.1:9464", "where to serve Prometheus metrics (/metrics) when running continuously; empty for none")
	return cmd
}

// monitor follows one log.
type monitor struct {
	c       logSource
	tr      *trust
	dir     string
	log     *slog.Logger
	now     func() time.Time
	metrics *metrics
}

// checkResult is the outcome of one check.
type checkResult struct {
	Result   string `json:"result"` // started, advanced, unchanged, invalid, origin_changed, rollback, fork, bad_proof, unverifiable
	Code     int    `json:"exit_code"`
	Message  string `json:"message"`
	Size     uint64 `json:"size,omitempty"` // the verified size after the check
	Evidence string `json:"evidence,omitempty"`
}

func (m *monitor) loop(ctx context.Context, interval time.Duration, metricsAddr string) error {
	if metricsAddr != "" {
		ln, err := net.Listen("tcp", metricsAddr)
		if err != nil {
			return usageErrorf("--metrics-addr %s: %v", metricsAddr, err)
		}
		srv := &http.Server{Handler: m.metrics.handler(), ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln)
		defer srv.Close()
		m.log.Info("serving metrics", "addr", ln.Addr().String())
	}
	for {
		res := m.check(ctx)
		m.report(res)
		if res.Code == exitFork {
			return verdictError(exitFork, "%s", res.Message)
		}
		select {
		case <-ctx.Done():
			m.log.Info("stopping")
			return nil
		case <-time.After(interval):
		}
	}
}

// report logs a result and counts it.
func (m *monitor) report(res checkResult) {
	m.metrics.observe(res, m.now())
	attrs := []any{"result", res.Result, "size", res.Size, "url", m.c.Base()}
	if res.Evidence != "" {
		attrs = append(attrs, "evidence", res.Evidence)
	}
	switch res.Code {
	case exitSound:
		m.log.Info(res.Message, attrs...)
	case exitUnverifiable:
		m.log.Warn(res.Message, attrs...)
	default:
		m.log.Error(res.Message, attrs...)
	}
}

func result(kind string, code int, size uint64, format string, args ...any) checkResult {
	return checkResult{Result: kind, Code: code, Size: size, Message: fmt.Sprintf(format, args...)}
}

// check runs one check. It never saves state unless the new checkpoint is
// verified and consistent with the old one.
func (m *monitor) check(ctx context.Context) checkResult {
	old, err := m.loadState()
	if err != nil {
		return result("unverifiable", exitUnverifiable, 0, "the saved state cannot be used: %v", err)
	}
	oldSize := uint64(0)
	if old != nil {
		oldSize = old.check.Checkpoint.Size
	}
	note, err := m.c.Witnessed(ctx)
	if err != nil {
		return result("unverifiable", exitUnverifiable, oldSize, "fetching the checkpoint: %v", err)
	}
	nc := m.tr.checkNote(note)
	switch nc.Verdict() {
	case disclosure.NotSound:
		return result("invalid", exitNotSound, oldSize, "the log served a checkpoint that does not verify: %s", joinReasons(nc.Findings))
	case disclosure.Unverifiable:
		return result("unverifiable", exitUnverifiable, oldSize, "the log's checkpoint could not be established: %s", joinReasons(nc.Unverifiable))
	}
	cur := nc.Checkpoint
	if old == nil {
		if err := m.saveState(nc.Signed.Note()); err != nil {
			return result("unverifiable", exitUnverifiable, 0, "saving the state: %v", err)
		}
		return result("started", exitSound, cur.Size, "first checkpoint %s at size %d verified and saved; it is trusted on first use (there is nothing earlier to compare it with)", cur.Origin, cur.Size)
	}
	prev := old.check.Checkpoint
	if cur.Origin != prev.Origin {
		return result("origin_changed", exitNotSound, prev.Size, "the log's origin is %q, the state's is %q: this is another log", cur.Origin, prev.Origin)
	}
	switch {
	case cur.Size == prev.Size && cur.Root == prev.Root:
		return result("unchanged", exitSound, cur.Size, "size %d unchanged", cur.Size)
	case cur.Size == prev.Size:
		return m.fork(old.note, note, nil, fmt.Sprintf("two checkpoints of size %d with different roots", cur.Size))
	case cur.Size > prev.Size:
		proof, err := m.consistency(ctx, prev.Size, cur.Size)
		if err != nil {
			return result("unverifiable", exitUnverifiable, prev.Size, "fetching the consistency proof %d..%d: %v", prev.Size, cur.Size, err)
		}
		if err := log.VerifyConsistency(prev.Size, cur.Size, prev.Root, cur.Root, proof); err != nil {
			reason := fmt.Sprintf("the consistency proof from size %d to %d does not verify: %v", prev.Size, cur.Size, err)
			if alt, ok := log.ForkRoot(prev.Size, cur.Size, prev.Root, cur.Root, proof); ok {
				return m.fork(old.note, note, proof, fmt.Sprintf("%s; the proof reproduces the newer signed root of size %d, so that tree gives its first %d leaves the root %s, not the saved signed root %s",
					reason, cur.Size, prev.Size, hex.EncodeToString(alt[:]), hex.EncodeToString(prev.Root[:])))
			}
			return m.badProof(ctx, old, reason)
		}
		if err := m.saveState(nc.Signed.Note()); err != nil {
			return result("unverifiable", exitUnverifiable, prev.Size, "saving the state: %v", err)
		}
		return result("advanced", exitSound, cur.Size, "size %d -> %d, consistent", prev.Size, cur.Size)
	default:
		// A smaller checkpoint is refused. If the log can prove it is a
		// prefix of the saved one, it is a stale view; if what it serves
		// contradicts the saved one, it is a fork.
		proof, err := m.consistency(ctx, cur.Size, prev.Size)
		if err == nil {
			if verr := log.VerifyConsistency(cur.Size, prev.Size, cur.Root, prev.Root, proof); verr != nil {
				if _, ok := log.ForkRoot(cur.Size, prev.Size, cur.Root, prev.Root, proof); ok {
					return m.fork(old.note, note, proof, fmt.Sprintf("the log went back to size %d, and its proof from there to the saved size %d reproduces the saved root but not the served one: %v", cur.Size, prev.Size, verr))
				}
				if res := m.badProof(ctx, old, fmt.Sprintf("the log went back to size %d, and its proof from there to the saved size %d does not verify: %v", cur.Size, prev.Size, verr)); res.Code == exitFork {
					return res
				}
			}
		}
		return result("rollback", exitNotSound, prev.Size, "rollback refused: the log served size %d, the last verified size is %d", cur.Size, prev.Size)
	}
}

func joinReasons(rs []string) string {
	s := ""
	for i, r := range rs {
		if i > 0 {
			s += "; "
		}
		s += r
	}
	return s
}

// badProof decides what a consistency proof that fails means. A proof is
// the server's word, not the log's signature: a server that is merely wrong
// (a bug, a stale cache, a proxy) sends one too, and stopping the monitor
// as a fork for it would cry wolf. The log equivocated only if it signed
// two checkpoints that cannot both be true; the monitor asks the server for
// the checkpoint it signed at the saved size, and a log-signed note there
// with another root is that proof: a fork, with evidence that needs no
// trust in the server (exit 4). The same root means the proof was bad and
// the log may be fine: no verdict, checked again next time (exit 3).
func (m *monitor) badProof(ctx context.Context, old *state, reason string) checkResult {
	prev := old.check.Checkpoint
	at, err := m.c.CheckpointAt(ctx, prev.Size)
	if err != nil {
		return result("bad_proof", exitUnverifiable, prev.Size, "%s; the log's checkpoint at the saved size %d could not be fetched to tell a fork from a bad proof (%v): no verdict, retrying", reason, prev.Size, err)
	}
	nc := m.tr.checkNote(at)
	if !nc.Parsed || !nc.Report.LogSigned || len(nc.Findings) > 0 || nc.Checkpoint.Origin != prev.Origin || nc.Checkpoint.Size != prev.Size {
		return result("bad_proof", exitUnverifiable, prev.Size, "%s; the server's checkpoint at the saved size %d is not one the log signed for that size: no verdict, retrying", reason, prev.Size)
	}
	if nc.Checkpoint.Root != prev.Root {
		return m.fork(old.note, at, nil, fmt.Sprintf("the log signed two checkpoints of size %d with different roots (%s)", prev.Size, reason))
	}
	return result("bad_proof", exitUnverifiable, prev.Size, "%s, though the log still signs the saved checkpoint at size %d: the server sent a bad proof, which is not a fork; no verdict, retrying", reason, prev.Size)
}

// consistency fetches the proof from oldSize to newSize. A malformed
// answer, or one for other sizes, is an error: no verdict, not a fork.
func (m *monitor) consistency(ctx context.Context, oldSize, newSize uint64) ([]log.Hash, error) {
	ds, err := m.c.Consistency(ctx, oldSize, newSize)
	if err != nil {
		return nil, err
	}
	hs := make([]log.Hash, len(ds))
	for i, d := range ds {
		hs[i] = log.Hash(d)
	}
	return hs, nil
}

// state is the last verified checkpoint.
type state struct {
	note  []byte
	check *disclosure.NoteCheck
}

// loadState reads the saved checkpoint and verifies it again with the keys
// given, so that a state file edited behind the monitor's back, or keys
// changed since, stop it rather than mislead it. No file is no state.
func (m *monitor) loadState() (*state, error) {
	b, err := os.ReadFile(filepath.Join(m.dir, stateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	nc := m.tr.checkNote(b)
	if nc.Verdict() != disclosure.Sound {
		return nil, fmt.Errorf("%s does not verify with the keys and policy given: %s %s", filepath.Join(m.dir, stateFile),
			joinReasons(nc.Findings), joinReasons(nc.Unverifiable))
	}
	return &state{note: b, check: nc}, nil
}

func (m *monitor) saveState(note []byte) error {
	return writeAtomic(m.dir, stateFile, note, 0o600)
}

// forkEvidence is the self-contained record of a fork: both signed
// checkpoints, the proof that failed, and the keys and policy they were
// checked with.
type forkEvidence struct {
	Kind       string   `json:"kind"`
	Version    int      `json:"version"`
	DetectedAt string   `json:"detected_at"`
	URL        string   `json:"url"`
	Reason     string   `json:"reason"`
	Saved      noteInfo `json:"saved"`  // the checkpoint verified earlier
	Served     noteInfo `json:"served"` // the one the log served now
	// Proof is the consistency proof the log served, base64, or null when
	// the two checkpoints share a size (they contradict each other alone).
	Proof      []string `json:"consistency_proof"`
	LogKeys    []string `json:"log_keys"`
	PolicyText string   `json:"policy"`
}

type noteInfo struct {
	Origin string `json:"origin"`
	Size   uint64 `json:"size"`
	Root   string `json:"root"` // base64, as in the note
	Note   string `json:"note"`
}

func infoOf(n []byte) noteInfo {
	cp, _ := checkpoint.Parse(n[:max(0, indexBlank(n)+1)])
	return noteInfo{Origin: cp.Origin, Size: cp.Size, Root: base64.StdEncoding.EncodeToString(cp.Root[:]), Note: string(n)}
}

func indexBlank(n []byte) int {
	for i := 0; i+1 < len(n); i++ {
		if n[i] == '\n' && n[i+1] == '\n' {
			return i
		}
	}
	return -1
}

func (m *monitor) fork(saved, served []byte, proof []log.Hash, reason string) checkResult {
	now := m.now().UTC()
	ev := forkEvidence{Kind: "runseal.fork-evidence", Version: 1, DetectedAt: now.Format(time.RFC3339Nano), URL: m.c.Base(),
		Reason: reason, Saved: infoOf(saved), Served: infoOf(served), LogKeys: m.tr.logKeys, PolicyText: m.tr.policyText}
	if proof != nil {
		ev.Proof = []string{}
		for _, h := range proof {
			ev.Proof = append(ev.Proof, base64.StdEncoding.EncodeToString(h[:]))
		}
	}
	name := fmt.Sprintf("fork-%s.json", now.Format("20060102T150405.000000000Z"))
	res := result("fork", exitFork, ev.Saved.Size, "FORK: %s", reason)
	b, err := jsonIndent(ev)
	if err == nil {
		err = writeAtomic(m.dir, name, b, 0o600)
	}
	if err != nil {
		res.Message += fmt.Sprintf(" (writing the evidence failed: %v)", err)
		return res
	}
	res.Evidence = filepath.Join(m.dir, name)
	return res
}

// writeAtomic replaces dir/name with data so that a crash leaves either the
// old file or the new one, never a mix: a temporary file is written and
// fsynced, renamed over the name, and the directory fsynced.
func writeAtomic(dir, name string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	ok = true
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
