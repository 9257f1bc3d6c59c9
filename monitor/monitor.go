package monitor

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/disclosure"
	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// Files in the state directory.
const (
	StateFile = "checkpoint" // the last verified signed checkpoint note
	LockFile  = "lock"       // held while a Follower uses the directory
)

// A Source is where a Follower reads a log: the journal's HTTP API
// (api.Client) or a C2SP tlog-tiles layout (TilesSource).
type Source interface {
	// Witnessed returns the newest signed checkpoint note, with the
	// witnesses' cosignatures.
	Witnessed(ctx context.Context) ([]byte, error)
	// Consistency returns the consistency proof from oldSize to newSize.
	Consistency(ctx context.Context, oldSize, newSize uint64) ([]store.Digest, error)
	// CheckpointAt returns the note the log signed at size, which tells a
	// fork from a server's bad proof; an error wrapping
	// ErrNoOlderCheckpoint when the source serves only its newest.
	CheckpointAt(ctx context.Context, size uint64) ([]byte, error)
	// Base names the source in results and evidence, without credentials.
	Base() string
}

var _ Source = (*api.Client)(nil)

// Config configures a Follower.
type Config struct {
	// Source is the log followed.
	Source Source
	// Trust holds the log keys and witness policy checkpoints must meet
	// (as disclosure.CheckNote takes them).
	Trust disclosure.Options
	// LogKeys and Policy are the log's verifier keys and the policy's text
	// as the operator gave them, copied verbatim into fork evidence so
	// that whoever reads it can check it with the same keys.
	LogKeys []string
	Policy  string
	// Dir is the state directory, created 0700 if missing.
	Dir string
	// Now is the clock for evidence names and metrics; time.Now when nil.
	Now func() time.Time
}

// A Follower follows one log from one state directory. Its methods are not
// safe for concurrent use: one check runs at a time.
type Follower struct {
	src        Source
	opts       disclosure.Options
	logKeys    []string
	policyText string
	dir        string
	now        func() time.Time
	unlock     func()
}

// Open creates the state directory if needed and takes its lock; an error
// wrapping ErrLocked when another Follower holds it. Close releases it.
func Open(cfg Config) (*Follower, error) {
	if cfg.Source == nil || cfg.Dir == "" {
		return nil, fmt.Errorf("monitor: a Source and a state directory are required")
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("monitor: state dir: %w", err)
	}
	unlock, err := lockDir(filepath.Join(cfg.Dir, LockFile))
	if err != nil {
		return nil, fmt.Errorf("state dir %s: %w", cfg.Dir, err)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Follower{src: cfg.Source, opts: cfg.Trust, logKeys: cfg.LogKeys, policyText: cfg.Policy, dir: cfg.Dir, now: now, unlock: unlock}, nil
}

// Close releases the state directory.
func (m *Follower) Close() error {
	if m.unlock != nil {
		m.unlock()
		m.unlock = nil
	}
	return nil
}

// Dir is the state directory.
func (m *Follower) Dir() string { return m.dir }

// Source is the log followed.
func (m *Follower) Source() Source { return m.src }

// Run checks every interval until ctx is done (then it returns nil) or a
// check finds a fork (then it returns a *ForkError). Every result, errors
// included, goes to report first when report is not nil: errors that
// leave no verdict do not stop it.
func (m *Follower) Run(ctx context.Context, interval time.Duration, report func(Result)) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		res := m.Check(ctx)
		if report != nil {
			report(res)
		}
		if res.Outcome == Fork {
			return &ForkError{Result: res}
		}
		t.Reset(interval)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Outcome is what one check found.
type Outcome string

// The outcomes of a check.
const (
	Started       Outcome = "started"        // no state yet: the checkpoint found is verified and saved (trusted on first use)
	Advanced      Outcome = "advanced"       // the log grew consistently
	Unchanged     Outcome = "unchanged"      // the same size and root as saved
	Invalid       Outcome = "invalid"        // the log served a checkpoint that does not verify
	OriginChanged Outcome = "origin_changed" // the checkpoint is of another log
	Rollback      Outcome = "rollback"       // the log served a smaller checkpoint
	Fork          Outcome = "fork"           // the log signed two checkpoints that cannot both be true; evidence written
	BadProof      Outcome = "bad_proof"      // a consistency proof failed but the log still signs the saved checkpoint
	Unverifiable  Outcome = "unverifiable"   // no verdict: network, quorum, state or storage trouble
)

// Outcomes lists every outcome, in the order above.
var Outcomes = []Outcome{Started, Advanced, Unchanged, Invalid, OriginChanged, Rollback, Fork, BadProof, Unverifiable}

// Class groups outcomes by what they say about the log.
type Class int

// The classes of outcomes.
const (
	Consistent Class = iota // Started, Advanced, Unchanged
	NotSound                // Invalid, OriginChanged, Rollback
	NoVerdict               // BadProof, Unverifiable
	Forked                  // Fork
)

// Class is the outcome's class.
func (o Outcome) Class() Class {
	switch o {
	case Started, Advanced, Unchanged:
		return Consistent
	case Invalid, OriginChanged, Rollback:
		return NotSound
	case Fork:
		return Forked
	}
	return NoVerdict
}

// Result is the outcome of one check.
type Result struct {
	Outcome Outcome
	Message string
	// Size is the verified size after the check.
	Size uint64
	// Evidence is the path of the fork evidence written, if any.
	Evidence string
	// Err is the cause of an Unverifiable or BadProof outcome, if one was
	// an error (a network error, a *StateError).
	Err error
}

func result(o Outcome, size uint64, format string, args ...any) Result {
	return Result{Outcome: o, Size: size, Message: fmt.Sprintf(format, args...)}
}

func noVerdict(err error, size uint64, format string, args ...any) Result {
	r := result(Unverifiable, size, format, args...)
	r.Err = err
	return r
}

func (m *Follower) checkNote(n []byte) *disclosure.NoteCheck {
	return disclosure.CheckNote(n, m.opts)
}

// Check runs one check. It never saves state unless the new checkpoint is
// verified and consistent with the saved one.
func (m *Follower) Check(ctx context.Context) Result {
	old, err := m.loadState()
	if err != nil {
		return noVerdict(err, 0, "the saved state cannot be used: %v", err)
	}
	oldSize := uint64(0)
	if old != nil {
		oldSize = old.check.Checkpoint.Size
	}
	note, err := m.src.Witnessed(ctx)
	if err != nil {
		return noVerdict(err, oldSize, "fetching the checkpoint: %v", err)
	}
	nc := m.checkNote(note)
	switch nc.Verdict() {
	case disclosure.NotSound:
		return result(Invalid, oldSize, "the log served a checkpoint that does not verify: %s", strings.Join(nc.Findings, "; "))
	case disclosure.Unverifiable:
		return result(Unverifiable, oldSize, "the log's checkpoint could not be established: %s", strings.Join(nc.Unverifiable, "; "))
	}
	cur := nc.Checkpoint
	if old == nil {
		if err := m.saveState(nc.Signed.Note()); err != nil {
			return noVerdict(err, 0, "saving the state: %v", err)
		}
		return result(Started, cur.Size, "first checkpoint %s at size %d verified and saved; it is trusted on first use (there is nothing earlier to compare it with)", cur.Origin, cur.Size)
	}
	prev := old.check.Checkpoint
	if cur.Origin != prev.Origin {
		return result(OriginChanged, prev.Size, "the log's origin is %q, the state's is %q: this is another log", cur.Origin, prev.Origin)
	}
	switch {
	case cur.Size == prev.Size && cur.Root == prev.Root:
		return result(Unchanged, cur.Size, "size %d unchanged", cur.Size)
	case cur.Size == prev.Size:
		return m.fork(old.note, note, nil, fmt.Sprintf("two checkpoints of size %d with different roots", cur.Size))
	case cur.Size > prev.Size:
		proof, err := m.consistency(ctx, prev.Size, cur.Size)
		if err != nil {
			return noVerdict(err, prev.Size, "fetching the consistency proof %d..%d: %v", prev.Size, cur.Size, err)
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
			return noVerdict(err, prev.Size, "saving the state: %v", err)
		}
		return result(Advanced, cur.Size, "size %d -> %d, consistent", prev.Size, cur.Size)
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
				if res := m.badProof(ctx, old, fmt.Sprintf("the log went back to size %d, and its proof from there to the saved size %d does not verify: %v", cur.Size, prev.Size, verr)); res.Outcome == Fork {
					return res
				}
			}
		}
		return result(Rollback, prev.Size, "rollback refused: the log served size %d, the last verified size is %d", cur.Size, prev.Size)
	}
}

// badProof decides what a consistency proof that fails means. A proof is
// the server's word, not the log's signature: a server that is merely wrong
// (a bug, a stale cache, a proxy) sends one too, and stopping the monitor
// as a fork for it would cry wolf. The log equivocated only if it signed
// two checkpoints that cannot both be true; the monitor asks the server for
// the checkpoint it signed at the saved size, and a log-signed note there
// with another root is that proof: a fork, with evidence that needs no
// trust in the server. The same root means the proof was bad and the log
// may be fine: no verdict, checked again next time.
func (m *Follower) badProof(ctx context.Context, old *state, reason string) Result {
	prev := old.check.Checkpoint
	at, err := m.src.CheckpointAt(ctx, prev.Size)
	if err != nil {
		r := result(BadProof, prev.Size, "%s; the log's checkpoint at the saved size %d could not be fetched to tell a fork from a bad proof (%v): no verdict, retrying", reason, prev.Size, err)
		r.Err = err
		return r
	}
	nc := m.checkNote(at)
	if !nc.Parsed || !nc.Report.LogSigned || len(nc.Findings) > 0 || nc.Checkpoint.Origin != prev.Origin || nc.Checkpoint.Size != prev.Size {
		return result(BadProof, prev.Size, "%s; the server's checkpoint at the saved size %d is not one the log signed for that size: no verdict, retrying", reason, prev.Size)
	}
	if nc.Checkpoint.Root != prev.Root {
		return m.fork(old.note, at, nil, fmt.Sprintf("the log signed two checkpoints of size %d with different roots (%s)", prev.Size, reason))
	}
	return result(BadProof, prev.Size, "%s, though the log still signs the saved checkpoint at size %d: the server sent a bad proof, which is not a fork; no verdict, retrying", reason, prev.Size)
}

// consistency fetches the proof from oldSize to newSize. A malformed
// answer, or one for other sizes, is an error: no verdict, not a fork.
func (m *Follower) consistency(ctx context.Context, oldSize, newSize uint64) ([]log.Hash, error) {
	ds, err := m.src.Consistency(ctx, oldSize, newSize)
	if err != nil {
		return nil, err
	}
	hs := make([]log.Hash, len(ds))
	for i, d := range ds {
		hs[i] = log.Hash(d)
	}
	return hs, nil
}
