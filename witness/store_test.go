package witness

import (
	"context"
	"crypto/rand"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runseal/runseal/checkpoint"
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
