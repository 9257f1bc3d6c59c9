package monitor

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/disclosure"
	"github.com/runseal/runseal/log"
)

// state is the last verified checkpoint.
type state struct {
	note  []byte
	check *disclosure.NoteCheck
}

// loadState reads the saved checkpoint and verifies it again with the keys
// given, so that a state file edited behind the monitor's back, or keys
// changed since, stop it rather than mislead it. No file is no state.
func (m *Follower) loadState() (*state, error) {
	path := filepath.Join(m.dir, StateFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &StateError{Path: path, Err: err}
	}
	nc := m.checkNote(b)
	if nc.Verdict() != disclosure.Sound {
		return nil, &StateError{Path: path, Reason: fmt.Sprintf("does not verify with the keys and policy given: %s %s",
			strings.Join(nc.Findings, "; "), strings.Join(nc.Unverifiable, "; "))}
	}
	return &state{note: b, check: nc}, nil
}

func (m *Follower) saveState(note []byte) error {
	return writeAtomic(m.dir, StateFile, note, 0o600)
}

// EvidenceKind is the kind field of fork evidence files.
const EvidenceKind = "runseal.fork-evidence"

// Evidence is the self-contained record of a fork, written as JSON to
// fork-<time>.json in the state directory: both signed checkpoints, the
// proof that failed, and the keys and policy they were checked with.
type Evidence struct {
	Kind       string   `json:"kind"`    // EvidenceKind
	Version    int      `json:"version"` // 1
	DetectedAt string   `json:"detected_at"`
	URL        string   `json:"url"` // the source's Base, without credentials
	Reason     string   `json:"reason"`
	Saved      NoteInfo `json:"saved"`  // the checkpoint verified earlier
	Served     NoteInfo `json:"served"` // the one the log served now
	// Proof is the consistency proof the log served, base64, or null when
	// the two checkpoints share a size (they contradict each other alone).
	Proof      []string `json:"consistency_proof"`
	LogKeys    []string `json:"log_keys"`
	PolicyText string   `json:"policy"`
}

// NoteInfo is one signed checkpoint in Evidence: the note verbatim and its
// parsed body for reading.
type NoteInfo struct {
	Origin string `json:"origin"`
	Size   uint64 `json:"size"`
	Root   string `json:"root"` // base64, as in the note
	Note   string `json:"note"`
}

func infoOf(n []byte) NoteInfo {
	cp, _ := checkpoint.Parse(n[:max(0, bytes.Index(n, []byte("\n\n"))+1)])
	return NoteInfo{Origin: cp.Origin, Size: cp.Size, Root: base64.StdEncoding.EncodeToString(cp.Root[:]), Note: string(n)}
}

// fork writes the evidence of a fork and returns the Fork result naming it.
// A failure to write is said in the message: the verdict stands.
func (m *Follower) fork(saved, served []byte, proof []log.Hash, reason string) Result {
	now := m.now().UTC()
	ev := Evidence{Kind: EvidenceKind, Version: 1, DetectedAt: now.Format(time.RFC3339Nano), URL: m.src.Base(),
		Reason: reason, Saved: infoOf(saved), Served: infoOf(served), LogKeys: m.logKeys, PolicyText: m.policyText}
	if proof != nil {
		ev.Proof = []string{}
		for _, h := range proof {
			ev.Proof = append(ev.Proof, base64.StdEncoding.EncodeToString(h[:]))
		}
	}
	name := fmt.Sprintf("fork-%s.json", now.Format("20060102T150405.000000000Z"))
	res := result(Fork, ev.Saved.Size, "FORK: %s", reason)
	b, err := json.MarshalIndent(ev, "", "  ")
	if err == nil {
		err = writeAtomic(m.dir, name, append(b, '\n'), 0o600)
	}
	if err != nil {
		res.Message += fmt.Sprintf(" (writing the evidence failed: %v)", err)
		res.Err = err
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
