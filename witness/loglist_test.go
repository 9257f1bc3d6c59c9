package witness

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/internal/journaltest"
)

func testVKey(t testing.TB, name string) string {
	t.Helper()
	_, vkey, err := checkpoint.GenerateLogKey(rand.Reader, name)
	if err != nil {
		t.Fatal(err)
	}
	return vkey
}

func TestParseLogList(t *testing.T) {
	k1, k2, k3 := testVKey(t, "sigsum.org/v1/tree/abc"), testVKey(t, "log.example/b"), testVKey(t, "go.sum")
	// The shape of the witness-network lists, with the draft lines
	// (revision, origin none, bastion) and CRLF and indentation.
	list := fmt.Sprintf(`#
# staging list
#
logs/v0
revision 12

vkey %s
qpd 8640
contact services@example.net | https://example.net/about

  vkey %s  
  origin none
  bastion https://bastion.example/
  qpd 24
  contact sysadmin (at) b
vkey %s
qpd 1
origin go.sum database tree
bastion none
contact a b c`+"\r\n", k1, k2, k3)
	got, err := ParseLogList([]byte(list))
	if err != nil {
		t.Fatal(err)
	}
	want := []ListedLog{
		{Origin: "sigsum.org/v1/tree/abc", VKey: k1, QPD: 8640, Contact: "services@example.net | https://example.net/about", Line: 7},
		{Origin: "log.example/b", VKey: k2, QPD: 24, Contact: "sysadmin (at) b", Line: 11},
		{Origin: "go.sum database tree", VKey: k3, QPD: 1, Contact: "a b c", Line: 16},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	if got, err := ParseLogList([]byte("logs/v0\n")); err != nil || len(got) != 0 {
		t.Fatalf("empty list: %v %v", got, err)
	}
}

func TestParseLogListErrors(t *testing.T) {
	k := testVKey(t, "log.example/a")
	_, wkey, _ := checkpoint.GenerateCosignerKey(rand.Reader, "w.example")
	cases := []struct {
		list string
		line int
	}{
		{"", 1},
		{"# only a comment\n", 1},
		{"logs/v1\n", 1},
		{"logs/v0\nqpd 1\n", 2},
		{"logs/v0\nvkey " + k + "\nqpd 1\n", 2},
		{"logs/v0\nvkey " + k + "\ncontact x\n", 3},
		{"logs/v0\nvkey " + k + "\nqpd 0\ncontact x\n", 3},
		{"logs/v0\nvkey " + k + "\nqpd 2147483648\ncontact x\n", 3},
		{"logs/v0\nvkey " + k + "\nqpd 01\ncontact x\n", 3},
		{"logs/v0\nvkey " + k + "\nqpd 1\nqpd 2\ncontact x\n", 4},
		{"logs/v0\nvkey " + k + "\nqpd 1\ncontact\n", 4},
		{"logs/v0\nvkey " + k + "\nqpd 1\nfoo bar\ncontact x\n", 4},
		{"logs/v0\nvkey " + k + "\nvkey " + k + "\n", 3},
		{"logs/v0\nvkey not-a-key\nqpd 1\ncontact x\n", 2},
		{"logs/v0\nvkey " + wkey + "\nqpd 1\ncontact x\n", 2},
		{"logs/v0\nvkey " + k + " extra\nqpd 1\ncontact x\n", 2},
		{"logs/v0\nvkey " + k + "\nqpd 1\ncontact x\nvkey " + k + "\nqpd 1\ncontact y\n", 5},
		{"logs/v0\nrevision 1\nrevision 2\n", 3},
	}
	for _, c := range cases {
		_, err := ParseLogList([]byte(c.list))
		var le *LogListError
		if !errors.As(err, &le) || !errors.Is(err, ErrMalformedLogList) {
			t.Errorf("%q: %v, want a *LogListError", c.list, err)
			continue
		}
		if le.Line != c.line {
			t.Errorf("%q: line %d, want %d (%v)", c.list, le.Line, c.line, err)
		}
	}
}

func TestImportLogs(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ka, kb, kb2 := testVKey(t, "log.example/a"), testVKey(t, "log.example/b"), testVKey(t, "log.example/b")
	// A log the list does not mention stays.
	kept := journaltest.NewLog(t, "log.example/kept")
	e.addLog(kept)

	list := []ListedLog{
		{Origin: "log.example/a", VKey: ka, QPD: 1440, Contact: "a"},
		{Origin: "log.example/b", VKey: kb, QPD: 24, Contact: "b"},
	}
	res, err := e.store.ImportLogs(ctx, list, false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Added, []string{"log.example/a", "log.example/b"}) || len(res.Updated)+len(res.Unchanged)+len(res.Rekeyed) != 0 {
		t.Fatalf("first import: %+v", res)
	}
	li, _ := e.store.Log(ctx, "log.example/a")
	if li.QPD != 1440 || li.Burst != DefaultBurst(1440) || li.Contact != "a" || !slices.Equal(li.Keys, []string{ka}) || li.Size != 0 {
		t.Fatalf("imported log: %+v", li)
	}

	// The same list again: nothing changes. A new qpd: updated.
	res, err = e.store.ImportLogs(ctx, list, false)
	if err != nil || !slices.Equal(res.Unchanged, list2origins(list)) {
		t.Fatalf("re-import: %+v %v", res, err)
	}
	list[0].QPD = 86400
	res, err = e.store.ImportLogs(ctx, list, false)
	if err != nil || !slices.Equal(res.Updated, []string{"log.example/a"}) {
		t.Fatalf("qpd change: %+v %v", res, err)
	}
	if li, _ := e.store.Log(ctx, "log.example/a"); li.QPD != 86400 || li.Burst != DefaultBurst(86400) {
		t.Fatalf("after qpd change: %+v", li)
	}

	// A key change is refused, and nothing else of the list is imported.
	changed := append(slices.Clone(list), ListedLog{Origin: "log.example/c", VKey: testVKey(t, "log.example/c"), QPD: 5, Contact: "c"})
	changed[1].VKey = kb2
	changed[0].QPD = 5
	_, err = e.store.ImportLogs(ctx, changed, false)
	var kce *KeyChangeError
	if !errors.As(err, &kce) || !errors.Is(err, ErrKeyChange) || len(kce.Changes) != 1 || kce.Changes[0].Origin != "log.example/b" || kce.Changes[0].Listed != kb2 {
		t.Fatalf("key change: %v", err)
	}
	if _, err := e.store.Log(ctx, "log.example/c"); !errors.Is(err, ErrUnknownLog) {
		t.Fatalf("a refused import added a log: %v", err)
	}
	if li, _ := e.store.Log(ctx, "log.example/a"); li.QPD != 86400 {
		t.Fatalf("a refused import changed a qpd: %+v", li)
	}
	if li, _ := e.store.Log(ctx, "log.example/b"); !slices.Equal(li.Keys, []string{kb}) {
		t.Fatalf("a refused import changed keys: %+v", li)
	}

	// Forced: the key is replaced, the state is kept.
	res, err = e.store.ImportLogs(ctx, changed, true)
	if err != nil || len(res.Rekeyed) != 1 || !slices.Equal(res.Added, []string{"log.example/c"}) {
		t.Fatalf("forced: %+v %v", res, err)
	}
	if li, _ := e.store.Log(ctx, "log.example/b"); !slices.Equal(li.Keys, []string{kb2}) {
		t.Fatalf("forced import keys: %+v", li)
	}
	if _, err := e.store.Log(ctx, kept.Origin); err != nil {
		t.Fatalf("a log missing from the list was removed: %v", err)
	}

	// The witness's own name is refused.
	own := []ListedLog{{Origin: testWitnessName, VKey: testVKey(t, testWitnessName), QPD: 1, Contact: "x"}}
	if _, err := e.store.ImportLogs(ctx, own, true); !errors.Is(err, ErrOwnName) {
		t.Fatalf("own name: %v", err)
	}
}

// TestImportedLogIsWitnessed checks the imported configuration end to end:
// the listed key verifies, and the listed quota limits.
func TestImportedLogIsWitnessed(t *testing.T) {
	e := newEnv(t)
	l := journaltest.NewLog(t, "log.example/listed")
	list, err := ParseLogList([]byte("logs/v0\nvkey " + l.VKey + "\nqpd 86400\ncontact me\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.ImportLogs(context.Background(), list, false); err != nil {
		t.Fatal(err)
	}
	burst := uint64(DefaultBurst(86400))
	l.Tree.Grow(int(burst) + 2)
	for size := range burst {
		e.mustCosign(l, size, size+1)
	}
	if code, _, body := e.post(request(burst, l.Tree.Proof(burst, burst+1), l.Note(t, burst+1, nil))); code != 429 || !strings.Contains(body, "rate limited") {
		t.Fatalf("over the burst: %d %q", code, body)
	}
}

func list2origins(l []ListedLog) []string {
	out := make([]string, len(l))
	for i := range l {
		out[i] = l[i].Origin
	}
	return out
}
