package faults

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/runseal/runseal/store/sqlite"
	"github.com/runseal/runseal/witness"
)

// realWitness is a 'witness serve' process with its own state file,
// trusting one log.
type realWitness struct {
	name, key, db, vkey string
	addr                string // host:port
	p                   *proc
}

var witnessAddrRE = regexp.MustCompile(` addr=(\S+)`)

// newWitness creates a witness named name that trusts the log of origin
// with verifier key logKey, and starts it.
func newWitness(t *testing.T, name, origin, logKey string) *realWitness {
	t.Helper()
	dir := t.TempDir()
	w := &realWitness{name: name, key: filepath.Join(dir, "w.key"), db: filepath.Join(dir, "w.db"), addr: "127.0.0.1:0"}
	run(t, "witness", "--db", w.db, "init", "--name", name, "--key", w.key)
	w.vkey = strings.TrimSpace(run(t, "witness", "--db", w.db, "key", "--key", w.key))
	run(t, "witness", "--db", w.db, "add-log", origin, "--key", logKey, "--qpd", fmt.Sprint(witness.MaxQPD), "--burst", fmt.Sprint(witness.MaxQPD))
	w.start(t)
	return w
}

// start starts the witness on a free loopback port.
func (w *realWitness) start(t *testing.T) {
	t.Helper()
	w.p = start(t, nil, "witness", "--db", w.db, "serve", "--key", w.key, "--listen", w.addr, "--metrics-listen", "")
	l, _, ok := w.p.wait(witnessAddrRE, 0, 30*time.Second)
	if !ok {
		t.Fatalf("witness did not start:\n%s", w.p.lines())
	}
	w.addr = witnessAddrRE.FindStringSubmatch(l)[1]
}

// latest returns the checkpoint the witness holds for origin, read from its
// state file, or nil.
func (w *realWitness) latest(t *testing.T, origin string) []byte {
	t.Helper()
	ctx := context.Background()
	st, err := witness.OpenStore(ctx, w.db, witness.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n, err := st.LatestCheckpoint(ctx, witness.OriginHash(origin))
	if err != nil {
		return nil
	}
	return n
}

// writePolicy writes a tlog-policy file naming the log and the witnesses,
// all of which must cosign.
func writePolicy(t *testing.T, logKey string, ws ...*realWitness) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "log %s\n", logKey)
	names := make([]string, len(ws))
	for i, w := range ws {
		names[i] = fmt.Sprintf("w%d", i)
		fmt.Fprintf(&b, "witness %s %s http://%s\n", names[i], w.vkey, w.addr)
	}
	fmt.Fprintf(&b, "group all all %s\nquorum all\n", strings.Join(names, " "))
	p := filepath.Join(t.TempDir(), "policy")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkSQLite checks the SQLite journal at db after a fault: every
// acknowledged write is there, the kept checkpoints are of the log and
// agree with what was served, and each witness holds a checkpoint the
// journal keeps byte for byte. It returns the kept checkpoints' bodies.
func checkSQLite(t *testing.T, db string, got acks, seen *watcher, origin string, ws ...*realWitness) map[uint64][]byte {
	t.Helper()
	s, err := sqlite.Open(context.Background(), db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkAcked(t, s, got)
	kept := checkSigned(t, s)
	seen.check(t, kept)
	for _, w := range ws {
		if n := w.latest(t, origin); n != nil {
			b := body(n)
			if k := kept[sizeOf(t, b)]; !bytes.Equal(k, b) {
				t.Fatalf("witness %s holds\n%s but the journal keeps\n%s", w.name, b, k)
			}
		}
	}
	return kept
}
