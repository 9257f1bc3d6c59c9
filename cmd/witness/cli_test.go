package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/witness"
)

// cli runs the command in dir and returns its exit code, stdout and stderr.
func cli(t testing.TB, dir string, args ...string) (int, string, string) {
	t.Helper()
	return cliCtx(context.Background(), t, dir, args...)
}

func cliCtx(ctx context.Context, t testing.TB, dir string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	full := append([]string{"--db", filepath.Join(dir, "witness.db")}, args...)
	code := run(ctx, full, &out, &errb)
	return code, out.String(), errb.String()
}

// setup runs init in a fresh directory and returns it and the key path.
func setup(t testing.TB) (dir, key string) {
	t.Helper()
	dir = t.TempDir()
	key = filepath.Join(dir, "witness.key")
	if code, _, errs := cli(t, dir, "init", "--name", "witness.example/w1", "--key", key); code != exitOK {
		t.Fatalf("init: %d %s", code, errs)
	}
	return dir, key
}

func TestUsageAndHelp(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no command", nil, exitUsage, "a command is required"},
		{"unknown command", []string{"frobnicate"}, exitUsage, "unknown command"},
		{"unknown flag", []string{"serve", "--nope"}, exitUsage, "unknown flag"},
		{"help", []string{"--help"}, exitOK, "Exit codes:"},
		{"subcommand help has examples", []string{"add-log", "--help"}, exitOK, "Examples:"},
		{"serve help gives defaults", []string{"serve", "--help"}, exitOK, "localhost:7380"},
		{"loadtest help", []string{"loadtest", "--help"}, exitOK, "sustained_qps"},
		{"init without name", []string{"init"}, exitUsage, "--name is required"},
		{"init with bad name", []string{"init", "--name", "a b"}, exitUsage, "--name"},
		{"add-log without args", []string{"add-log"}, exitUsage, "accepts 1 arg"},
		{"add-log without key", []string{"add-log", "log.example/a"}, exitUsage, "--key is required"},
		{"bad log level", []string{"--log-level", "loud", "list-logs"}, exitUsage, "--log-level"},
		{"no state file", []string{"list-logs"}, exitFailure, "witness init"},
		{"set-limits without qpd", []string{"set-limits", "log.example/a"}, exitUsage, "--qpd is required"},
		{"loadtest vkey without url", []string{"loadtest", "--witness-vkey", "x"}, exitUsage, "--url"},
	}
	for _, c := range cases {
		code, out, errs := cli(t, dir, c.args...)
		if code != c.code || !strings.Contains(out+errs, c.want) {
			t.Errorf("%s: exit %d, want %d; output does not contain %q:\n%s%s", c.name, code, c.code, c.want, out, errs)
		}
	}
}

func TestInitAndKey(t *testing.T) {
	dir, key := setup(t)
	fi, err := os.Stat(key)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	secret, _ := os.ReadFile(key)
	if !bytes.Contains(secret, []byte("PRIVATE+KEY+witness.example/w1+")) {
		t.Fatalf("key file: %q", secret)
	}
	// init refuses to replace a key, and changes nothing.
	code, out, errs := cli(t, dir, "init", "--name", "witness.example/w1", "--key", key)
	if code != exitFailure || !strings.Contains(errs, "already exists") {
		t.Fatalf("second init: %d %s", code, errs)
	}
	if again, _ := os.ReadFile(key); !bytes.Equal(again, secret) {
		t.Fatal("second init changed the key")
	}
	code, out, errs = cli(t, dir, "key", "--key", key)
	if code != exitOK || !strings.HasPrefix(out, "witness.example/w1+") || strings.Contains(out+errs, "PRIVATE") {
		t.Fatalf("key: %d %q %q", code, out, errs)
	}
	if _, err := checkpoint.NewCosignatureVerifier(strings.TrimSpace(out)); err != nil {
		t.Fatalf("printed vkey: %v", err)
	}
	code, out, _ = cli(t, dir, "key", "--key", key, "--json")
	var kj map[string]string
	if code != exitOK || json.Unmarshal([]byte(out), &kj) != nil || kj["name"] != "witness.example/w1" || len(kj["key_id"]) != 8 {
		t.Fatalf("key --json: %d %q", code, out)
	}
	// A second key, for rotation; serve may use both.
	key2 := filepath.Join(dir, "w2.key")
	if code, out, errs := cli(t, dir, "init", "--name", "witness.example/w2", "--key", key2, "--json"); code != exitOK || !strings.Contains(out, `"vkey":"witness.example/w2+`) {
		t.Fatalf("init second key: %d %s %s", code, out, errs)
	}
	if code, out, _ := cli(t, dir, "key", "--key", key, "--key", key2); code != exitOK || strings.Count(out, "\n") != 2 {
		t.Fatalf("two keys: %q", out)
	}
	// A key file with a log key (type 0x01) in it is refused.
	skey, _, _ := checkpoint.GenerateLogKey(rand.Reader, "witness.example/w3")
	bad := filepath.Join(dir, "bad.key")
	os.WriteFile(bad, []byte(skey+"\n"), 0o600)
	if code, out, errs := cli(t, dir, "key", "--key", bad); code != exitFailure || strings.Contains(out+errs, skey) {
		t.Fatalf("log key as witness key: %d %q %q", code, out, errs)
	}
}

func TestLogCommands(t *testing.T) {
	dir, _ := setup(t)
	_, vkey, _ := checkpoint.GenerateLogKey(rand.Reader, "log.example/a")
	_, vkey2, _ := checkpoint.GenerateLogKey(rand.Reader, "log.example/a")
	steps := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"add-log", "log.example/a", "--key", vkey, "--qpd", "1440", "--contact", "ops@example"}, exitOK, "added log"},
		{[]string{"add-log", "log.example/a", "--key", vkey}, exitFailure, "already exists"},
		{[]string{"add-log", "witness.example/w1", "--key", vkey}, exitFailure, "witness's own name"},
		{[]string{"add-log", "log.example/b", "--key", "junk"}, exitFailure, "invalid log key"},
		{[]string{"add-log", "log.example/b", "--key", vkey, "--qpd", "0"}, exitFailure, "invalid rate limit"},
		{[]string{"add-key", "log.example/a", vkey2}, exitOK, "added key"},
		{[]string{"add-key", "log.example/a", vkey2}, exitFailure, "already configured"},
		{[]string{"add-key", "log.example/none", vkey2}, exitFailure, "unknown log"},
		{[]string{"del-key", "log.example/a", vkey}, exitOK, "removed key"},
		{[]string{"del-key", "log.example/a", vkey}, exitFailure, "not configured"},
		{[]string{"set-limits", "log.example/a", "--qpd", "86400", "--burst", "5"}, exitOK, "set limits"},
		{[]string{"add-key", "log.example/a"}, exitUsage, "accepts 2 arg"},
	}
	for _, s := range steps {
		code, out, errs := cli(t, dir, s.args...)
		if code != s.code || !strings.Contains(out+errs, s.want) {
			t.Errorf("%v: exit %d (want %d) %q %q, want %q", s.args, code, s.code, out, errs, s.want)
		}
	}
	code, out, errs := cli(t, dir, "list-logs")
	if code != exitOK {
		t.Fatalf("list-logs: %s", errs)
	}
	var lj logJSON
	if err := json.Unmarshal([]byte(out), &lj); err != nil {
		t.Fatalf("list-logs output %q: %v", out, err)
	}
	if lj.Origin != "log.example/a" || lj.Size != 0 || lj.RootHash != "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=" ||
		len(lj.Keys) != 1 || lj.Keys[0] != vkey2 || lj.QPD != 86400 || lj.Burst != 5 || lj.Contact != "ops@example" ||
		lj.CosignedAt != nil || lj.OriginHash != witness.OriginHash("log.example/a") {
		t.Fatalf("list-logs: %+v", lj)
	}
	if code, _, errs := cli(t, dir, "list-logs", "--origin", "log.example/zzz"); code != exitFailure || !strings.Contains(errs, "unknown log") {
		t.Fatalf("list-logs of unknown: %d %s", code, errs)
	}
	if code, out, _ := cli(t, dir, "evidence"); code != exitOK || out != "" {
		t.Fatalf("evidence: %d %q", code, out)
	}
}

func TestImportLogs(t *testing.T) {
	dir, _ := setup(t)
	_, k1, _ := checkpoint.GenerateLogKey(rand.Reader, "log.example/a")
	_, k1b, _ := checkpoint.GenerateLogKey(rand.Reader, "log.example/a")
	_, k2, _ := checkpoint.GenerateLogKey(rand.Reader, "sigsum.org/v1/tree/x")
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	l1 := write("l1", "# test list\nlogs/v0\n\nvkey "+k1+"\nqpd 1440\ncontact a\n\nvkey "+k2+"\norigin sigsum.org/v1/tree/x\nqpd 24\ncontact b\n")
	code, out, errs := cli(t, dir, "import-logs", l1, "--json")
	if code != exitOK || !strings.Contains(out, `"added":["log.example/a","sigsum.org/v1/tree/x"]`) {
		t.Fatalf("import: %d %s %s", code, out, errs)
	}
	code, out, _ = cli(t, dir, "import-logs", l1)
	if code != exitOK || !strings.Contains(out, "2 logs listed: 0 added, 0 updated, 2 unchanged, 0 rekeyed") {
		t.Fatalf("re-import: %d %s", code, out)
	}
	l2 := write("l2", "logs/v0\nvkey "+k1b+"\nqpd 1440\ncontact a\n")
	code, _, errs = cli(t, dir, "import-logs", l2)
	if code != exitFailure || !strings.Contains(errs, "key change for \"log.example/a\"") || !strings.Contains(errs, "nothing imported") {
		t.Fatalf("key change: %d %s", code, errs)
	}
	if code, out, _ := cli(t, dir, "import-logs", l2, "--force", "--json"); code != exitOK || !strings.Contains(out, `"rekeyed":[{"origin":"log.example/a"`) {
		t.Fatalf("forced: %d %s", code, out)
	}
	bad := write("bad", "logs/v0\nvkey "+k1+"\ncontact a\n")
	if code, _, errs := cli(t, dir, "import-logs", bad); code != exitFailure || !strings.Contains(errs, "line 3") {
		t.Fatalf("bad list: %d %s", code, errs)
	}
	if code, _, _ := cli(t, dir, "import-logs", filepath.Join(dir, "missing")); code != exitFailure {
		t.Fatalf("missing list: %d", code)
	}
}

// syncBuf is a bytes.Buffer safe for the server's log writes while a test
// reads it.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serving runs "witness serve" on loopback ports until the returned stop
// function is called, which waits for the exit code.
type serving struct {
	url, metrics string
	stderr       *syncBuf
	stop         func() int
}

var addrRE = regexp.MustCompile(`(?:^| )addr=(\S+).* metrics_addr=(\S+)`)

func serve(t testing.TB, dir, key string, extra ...string) *serving {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errb := &syncBuf{}
	done := make(chan int, 1)
	go func() {
		args := []string{"--db", filepath.Join(dir, "witness.db"), "serve", "--key", key,
			"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}
		done <- run(ctx, append(args, extra...), io.Discard, errb)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m := addrRE.FindStringSubmatch(errb.String()); m != nil {
			s := &serving{url: "http://" + m[1], metrics: "http://" + m[2], stderr: errb}
			s.stop = func() int { cancel(); return <-done }
			return s
		}
		select {
		case code := <-done:
			cancel()
			t.Fatalf("serve exited %d:\n%s", code, errb.String())
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("serve did not start:\n%s", errb.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestServe runs the real command: cosigns over HTTP, serves metrics and the
// monitoring read, shuts down cleanly and keeps its state across restarts.
func TestServe(t *testing.T) {
	dir, key := setup(t)
	lskey, lvkey, _ := checkpoint.GenerateLogKey(rand.Reader, "log.example/a")
	signer, _ := checkpoint.NewSigner(lskey)
	if code, _, errs := cli(t, dir, "add-log", "log.example/a", "--key", lvkey); code != exitOK {
		t.Fatal(errs)
	}
	_, wout, _ := cli(t, dir, "key", "--key", key)
	wv, err := checkpoint.NewCosignatureVerifier(strings.TrimSpace(wout))
	if err != nil {
		t.Fatal(err)
	}
	root := [32]byte{1}
	msg, err := checkpoint.Sign(checkpoint.Checkpoint{Origin: "log.example/a", Size: 1, Root: root}, signer)
	if err != nil {
		t.Fatal(err)
	}

	s := serve(t, dir, key)
	c, _ := witness.NewClient(s.url, nil)
	lines, err := c.AddCheckpoint(context.Background(), 0, nil, msg)
	if err != nil {
		t.Fatal(err)
	}
	lv, _ := checkpoint.NewVerifier(lvkey)
	if _, err := checkpoint.Open(append(bytes.Clone(msg), lines...), note.VerifierList(lv, wv)); err != nil {
		t.Fatalf("cosigned note: %v", err)
	}
	resp, err := http.Get(s.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`witness_add_checkpoint_requests_total{code="200",origin="log.example/a"} 1`, `witness_log_size{origin="log.example/a"} 1`, "go_goroutines"} {
		if !bytes.Contains(mb, []byte(want)) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if code := s.stop(); code != exitOK {
		t.Fatalf("serve exit %d:\n%s", code, s.stderr)
	}
	if !strings.Contains(s.stderr.String(), "witness: stopped") {
		t.Errorf("no clean stop in the log:\n%s", s.stderr)
	}

	// The state survives the restart: list-logs shows it, and the
	// restarted witness answers 409 at size 1 and serves the checkpoint.
	_, out, _ := cli(t, dir, "list-logs")
	if !strings.Contains(out, `"size":1`) || !strings.Contains(out, `"cosigned_at":"`) {
		t.Fatalf("list-logs after serve: %s", out)
	}
	s = serve(t, dir, key)
	defer s.stop()
	c, _ = witness.NewClient(s.url, nil)
	_, err = c.AddCheckpoint(context.Background(), 0, nil, msg)
	if ce, ok := err.(*witness.ConflictError); !ok || ce.Size != 1 {
		t.Fatalf("after restart: %v", err)
	}
	got, err := c.LatestCheckpoint(context.Background(), "log.example/a")
	if err != nil || !bytes.Equal(got, append(bytes.Clone(msg), lines...)) {
		t.Fatalf("monitoring read after restart: %v\n%s", err, got)
	}
}

// TestInitRefusesLogsName: a witness key cannot take a witnessed log's
// origin as its name, and the refused key is not left behind.
func TestInitRefusesLogsName(t *testing.T) {
	dir, _ := setup(t)
	_, lvkey, _ := checkpoint.GenerateLogKey(rand.Reader, "witness.example/w2")
	if code, _, errs := cli(t, dir, "add-log", "witness.example/w2", "--key", lvkey); code != exitOK {
		t.Fatal(errs)
	}
	key2 := filepath.Join(dir, "w2.key")
	code, _, errs := cli(t, dir, "init", "--name", "witness.example/w2", "--key", key2)
	if code != exitFailure || !strings.Contains(errs, "own name") {
		t.Fatalf("init with a log's name: %d %s", code, errs)
	}
	if _, err := os.Stat(key2); err == nil {
		t.Fatal("refused init left a key behind")
	}
}
