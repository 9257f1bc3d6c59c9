package witness

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/internal/journaltest"
)

func TestStoreLogManagement(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	st := e.store
	k1, k2 := testVKey(t, "log.example/a"), testVKey(t, "log.example/a")
	_, wkey, _ := checkpoint.GenerateCosignerKey(rand.Reader, "log.example/a")

	bad := []struct {
		name string
		c    LogConfig
		want error
	}{
		{"empty origin", LogConfig{Origin: "", QPD: 1}, checkpoint.ErrMalformedCheckpoint},
		{"origin with newline", LogConfig{Origin: "a\nb", QPD: 1}, checkpoint.ErrMalformedCheckpoint},
		{"origin too long", LogConfig{Origin: strings.Repeat("a", 256), QPD: 1}, checkpoint.ErrMalformedCheckpoint},
		{"qpd 0", LogConfig{Origin: "log.example/a", QPD: 0}, ErrInvalidLimit},
		{"qpd too large", LogConfig{Origin: "log.example/a", QPD: MaxQPD + 1}, ErrInvalidLimit},
		{"negative burst", LogConfig{Origin: "log.example/a", QPD: 1, Burst: -1}, ErrInvalidLimit},
		{"witness key", LogConfig{Origin: "log.example/a", QPD: 1, Keys: []string{wkey}}, ErrBadLogKey},
		{"garbage key", LogConfig{Origin: "log.example/a", QPD: 1, Keys: []string{"x+y+z"}}, ErrBadLogKey},
		{"key twice", LogConfig{Origin: "log.example/a", QPD: 1, Keys: []string{k1, k1}}, ErrKeyExists},
		{"contact with control character", LogConfig{Origin: "log.example/a", QPD: 1, Contact: "a\tb"}, nil},
	}
	for _, b := range bad {
		err := st.AddLog(ctx, b.c)
		if err == nil || (b.want != nil && !errors.Is(err, b.want)) {
			t.Errorf("%s: %v, want %v", b.name, err, b.want)
		}
	}
	// A log may start without keys (witnessed by nobody yet).
	if err := st.AddLog(ctx, LogConfig{Origin: "log.example/a", QPD: 100, Contact: "ops"}); err != nil {
		t.Fatal(err)
	}
	if err := st.AddLog(ctx, LogConfig{Origin: "log.example/a", QPD: 100}); !errors.Is(err, ErrLogExists) {
		t.Errorf("second AddLog: %v", err)
	}
	if err := st.AddKey(ctx, "log.example/a", k1); err != nil {
		t.Fatal(err)
	}
	if err := st.AddKey(ctx, "log.example/a", k2); err != nil {
		t.Fatal(err)
	}
	if err := st.AddKey(ctx, "log.example/a", k1); !errors.Is(err, ErrKeyExists) {
		t.Errorf("AddKey twice: %v", err)
	}
	if err := st.AddKey(ctx, "log.example/nope", k1); !errors.Is(err, ErrUnknownLog) {
		t.Errorf("AddKey to unknown log: %v", err)
	}
	if err := st.AddKey(ctx, "log.example/a", wkey); !errors.Is(err, ErrBadLogKey) {
		t.Errorf("AddKey of a witness key: %v", err)
	}
	if err := st.DelKey(ctx, "log.example/a", k1); err != nil {
		t.Fatal(err)
	}
	if err := st.DelKey(ctx, "log.example/a", k1); !errors.Is(err, ErrNoSuchKey) {
		t.Errorf("DelKey twice: %v", err)
	}
	if err := st.SetLimits(ctx, "log.example/nope", 1, 1); !errors.Is(err, ErrUnknownLog) {
		t.Errorf("SetLimits of unknown log: %v", err)
	}
	if err := st.SetLimits(ctx, "log.example/a", 0, 1); !errors.Is(err, ErrInvalidLimit) {
		t.Errorf("SetLimits qpd 0: %v", err)
	}
	li, err := st.Log(ctx, "log.example/a")
	if err != nil {
		t.Fatal(err)
	}
	if li.Keys[0] != k2 || len(li.Keys) != 1 || li.QPD != 100 || li.Burst != 16 || li.Contact != "ops" || !li.CosignedAt.IsZero() || li.Root != checkpoint.EmptyRoot() {
		t.Fatalf("log = %+v", li)
	}
	if _, err := st.Log(ctx, "log.example/nope"); !errors.Is(err, ErrUnknownLog) {
		t.Errorf("Log of unknown: %v", err)
	}
	names, err := st.WitnessNames(ctx)
	if err != nil || len(names) != 1 || names[0] != testWitnessName {
		t.Errorf("witness names %v %v", names, err)
	}
}

func TestDefaultBurst(t *testing.T) {
	for qpd, want := range map[int64]int64{1: 16, 24: 16, 1440 * 16: 16, 1440*16 + 1: 17, 86400: 60, MaxQPD: 1491309} {
		if got := DefaultBurst(qpd); got != want {
			t.Errorf("DefaultBurst(%d) = %d, want %d", qpd, got, want)
		}
	}
}

func TestOpenStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := filepath.Join(dir, "w.db")
	if _, err := OpenStore(ctx, p, StoreOptions{}); !errors.Is(err, ErrNoState) {
		t.Fatalf("missing file without Create: %v", err)
	}
	if _, err := OpenStore(ctx, dir, StoreOptions{Create: true}); err == nil {
		t.Fatal("a directory opened")
	}
	if _, err := OpenStore(ctx, p+"?mode=ro", StoreOptions{Create: true}); err == nil {
		t.Fatal("a path with a query opened")
	}
	st, err := OpenStore(ctx, p, StoreOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.wdb.Exec("UPDATE meta SET value = '99' WHERE key = 'schema_version'"); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := OpenStore(ctx, p, StoreOptions{}); err == nil || !strings.Contains(err.Error(), "schema version 99") {
		t.Fatalf("newer schema: %v", err)
	}
	// The durability pragmas are in effect.
	st2, err := OpenStore(ctx, filepath.Join(dir, "x.db"), StoreOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	var mode string
	var sync int
	if err := st2.wdb.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode %q %v", mode, err)
	}
	if err := st2.wdb.QueryRow("PRAGMA synchronous").Scan(&sync); err != nil || sync != 2 {
		t.Errorf("synchronous %d %v, want 2 (FULL)", sync, err)
	}
	if err := st2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st2.AddLog(ctx, LogConfig{Origin: "a", QPD: 1}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("write after Close: %v", err)
	}
}

// TestCommitCheckpoint_BatchedGroupRefusesAlone: compare-and-swaps queued
// together are written as one batched group. A stale one and one whose key
// was removed are refused alone, writing nothing; one that a trigger
// refuses (moving a log back) poisons the batch, and its members are run
// again alone, so only it fails; the others commit.
func TestCommitCheckpoint_BatchedGroupRefusesAlone(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	st := e.store
	logs := make([]*journaltest.Log, 5)
	for i := range logs {
		logs[i] = journaltest.NewLog(t, fmt.Sprintf("batch.example/%d", i))
		e.addLog(logs[i])
	}
	empty := checkpoint.EmptyRoot()
	root := func(b byte) [32]byte { var r [32]byte; r[0] = b; return r }
	cas := func(l *journaltest.Log, oldSize uint64, oldRoot [32]byte, newSize uint64, newRoot [32]byte) *casUpdate {
		return &casUpdate{origin: l.Origin, oldSize: oldSize, oldRoot: oldRoot, newSize: newSize, newRoot: newRoot,
			note: []byte("note"), cosignedAt: 1, keys: []string{l.VKey}}
	}
	// Log 3 is at size 2 first, so that moving it to 1 is a trigger's refusal.
	if err := st.commitCheckpoint(ctx, cas(logs[3], 0, empty, 2, root(3))); err != nil {
		t.Fatal(err)
	}
	if err := st.DelKey(ctx, logs[2].Origin, logs[2].VKey); err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		groups []int
	)
	st.groupHook = func(n int, _ time.Duration) { mu.Lock(); groups = append(groups, n); mu.Unlock() }

	// Hold the writer so that the updates queue into one group.
	hold, held := make(chan struct{}), make(chan struct{})
	go st.write(ctx, func(context.Context, *sql.Tx) error { close(held); <-hold; return nil })
	<-held
	us := []*casUpdate{
		cas(logs[0], 0, empty, 1, root(10)),   // advances
		cas(logs[1], 5, root(9), 6, root(11)), // stale
		cas(logs[2], 0, empty, 1, root(12)),   // key removed
		cas(logs[3], 2, root(3), 1, root(13)), // moves back: the trigger refuses
		cas(logs[4], 0, empty, 7, root(14)),   // advances
	}
	errs := make([]error, len(us))
	var wg sync.WaitGroup
	for i, u := range us {
		wg.Go(func() { errs[i] = st.commitCheckpoint(ctx, u) })
	}
	for deadline := time.Now().Add(30 * time.Second); st.writes.Waiting() < len(us); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d updates queued", st.writes.Waiting(), len(us))
		}
	}
	close(hold)
	wg.Wait()

	if errs[0] != nil || errs[4] != nil {
		t.Fatalf("good updates failed: %v, %v", errs[0], errs[4])
	}
	if !errors.Is(errs[1], errStateChanged) {
		t.Errorf("stale update: %v", errs[1])
	}
	if !errors.Is(errs[2], ErrNotTrusted) {
		t.Errorf("update by a removed key: %v", errs[2])
	}
	if errs[3] == nil || errors.Is(errs[3], errStateChanged) {
		t.Errorf("update moving a log back: %v", errs[3])
	}
	want := map[int]struct {
		size uint64
		root [32]byte
	}{0: {1, root(10)}, 1: {0, empty}, 2: {0, empty}, 3: {2, root(3)}, 4: {7, root(14)}}
	for i, w := range want {
		size, r, err := st.readState(ctx, logs[i].Origin)
		if err != nil || size != w.size || r != w.root {
			t.Errorf("log %d at size %d root %x (%v), want size %d", i, size, r[:2], err, w.size)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	total := 0
	for _, n := range groups {
		total += n
	}
	if total != 3 || len(groups) > 2 { // the held write, then the two advances (after the retry, alone)
		t.Errorf("groups %v", groups)
	}
}

// TestConfigGeneration_CountsConfigChangesOnly: every change to a log's
// keys or limits moves the configuration generation, whoever makes it
// (here also a raw statement, as another program on the file would), and
// cosigning does not; a file that predates the generation gets it on open.
func TestConfigGeneration_CountsConfigChangesOnly(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	st := e.store
	gen := func() int64 {
		t.Helper()
		g, err := st.configGeneration(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	l := journaltest.NewLog(t, "gen.example/a")
	k2 := testVKey(t, l.Origin)
	steps := []struct {
		name  string
		do    func() error
		moves bool
	}{
		{"add log", func() error { return st.AddLog(ctx, LogConfig{Origin: l.Origin, QPD: 10}) }, true},
		{"add key", func() error { return st.AddKey(ctx, l.Origin, l.VKey) }, true},
		{"add second key", func() error { return st.AddKey(ctx, l.Origin, k2) }, true},
		{"remove key", func() error { return st.DelKey(ctx, l.Origin, k2) }, true},
		{"set limits", func() error { return st.SetLimits(ctx, l.Origin, 20, 5) }, true},
		{"cosign", func() error {
			return st.commitCheckpoint(ctx, &casUpdate{origin: l.Origin, oldRoot: checkpoint.EmptyRoot(), newSize: 1, newRoot: [32]byte{1}, note: []byte("n"), cosignedAt: 1, keys: []string{l.VKey}})
		}, false},
		{"raw key insert", func() error {
			_, err := st.wdb.ExecContext(ctx, "INSERT INTO log_keys(origin, vkey, added_at) VALUES (?, ?, 0)", l.Origin, k2)
			return err
		}, true},
	}
	for _, s := range steps {
		before := gen()
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if moved := gen() != before; moved != s.moves {
			t.Errorf("%s: generation moved %v, want %v", s.name, moved, s.moves)
		}
	}

	// A file from before the generation: no row, no triggers.
	for _, q := range []string{"DROP TRIGGER config_log_added", "DROP TRIGGER config_limits_changed", "DROP TRIGGER config_key_added",
		"DROP TRIGGER config_key_removed", "DROP TRIGGER config_key_changed", "DELETE FROM meta WHERE key = 'config_generation'"} {
		if _, err := st.wdb.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	e.restart()
	st = e.store
	before := gen()
	if err := st.SetLimits(ctx, l.Origin, 30, 5); err != nil {
		t.Fatal(err)
	}
	if gen() == before {
		t.Error("an old file's generation does not move after reopening")
	}
}
