package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/internal/journaltest"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/storetest"
)

func withTwins(m *Meter) serverOpt {
	return func(c *Config, _ *Timeouts) {
		c.Routes = append(c.Routes, StatusRoutes(m)...)
		c.Routes = append(c.Routes, TokenRoute(c.Tokens))
	}
}

// TestTwins_RunStatusProvesInclusionInWitnessed: a run sealed below the
// newest witnessed checkpoint has an inclusion proof against it that the
// server verified; one sealed after has none; an unknown run is 404.
func TestTwins_RunStatusProvesInclusionInWitnessed(t *testing.T) {
	ts := startServer(t, withTwins(nil))
	ctx := context.Background()
	in := ts.sealedRun(3)
	sc, err := ts.srv.cfg.Tenants[0].Signer.SignNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// No witness policy here: mark the signed note witnessed, as a
	// publisher would once the quorum is met.
	if err := ts.st.MarkWitnessed(ctx, sc.Size, sc.Note); err != nil {
		t.Fatal(err)
	}
	after := ts.sealedRun(3)

	code, _, body := ts.do("GET", "/v1/runs/"+in.String()+"/status", "")
	var rs RunStatus
	if code != http.StatusOK || json.Unmarshal([]byte(body), &rs) != nil {
		t.Fatalf("status: %d %s", code, body)
	}
	if rs.Sealed == nil || rs.Inclusion == nil || !rs.InclusionVerified || rs.Witnessed == nil || rs.Witnessed.Size != sc.Size || rs.Head.Seq != 3 {
		t.Fatalf("run sealed below the witnessed checkpoint: %s", body)
	}
	code, _, body = ts.do("GET", "/v1/runs/"+after.String()+"/status", "")
	if code != http.StatusOK || !strings.Contains(body, `"inclusion":null`) || !strings.Contains(body, `"inclusion_verified":false`) {
		t.Fatalf("run sealed after the witnessed checkpoint: %d %s", code, body)
	}
	if code, _, body = ts.do("GET", "/v1/runs/"+store.NewRunID().String()+"/status", ""); code != http.StatusNotFound {
		t.Fatalf("unknown run: %d %s", code, body)
	}
	if code, _, _ = ts.do("GET", "/v1/runs/"+in.String()+"/status?tenant=other", ""); code != http.StatusForbidden {
		t.Fatalf("another tenant's status with this token: %d, want 403", code)
	}
}

// TestTwins_TokensNeverCarrySecretOrHash: /v1/tokens lists the tenant's
// tokens with neither the secret nor its SHA-256.
func TestTwins_TokensNeverCarrySecretOrHash(t *testing.T) {
	ts := startServer(t, withTwins(nil))
	ctx := context.Background()
	id, secret, hash, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.st.CreateToken(ctx, store.Token{ID: id, Tenant: "elsewhere", Role: store.RoleReader, Hash: hash}); err != nil {
		t.Fatal(err)
	}
	code, _, body := ts.do("GET", "/v1/tokens", "")
	if code != http.StatusOK || !strings.Contains(body, `"role":"writer"`) {
		t.Fatalf("tokens: %d %s", code, body)
	}
	mine, _ := TokenID(ts.token)
	for _, bad := range []string{ts.token, secret, id, api.EncodeHash(hash), store.Digest(hash).String(), `"hash"`} {
		if strings.Contains(body, bad) {
			t.Errorf("GET /v1/tokens shows %q", bad)
		}
	}
	if !strings.Contains(body, mine) {
		t.Errorf("GET /v1/tokens lacks the caller's own token id %s", mine)
	}
}

// TestTwins_StatusWithoutPolicy: a log with no witness policy reports its
// signed checkpoint, nothing witnessed and no witnesses, as JSON arrays.
func TestTwins_StatusWithoutPolicy(t *testing.T) {
	ts := startServer(t, withTwins(nil))
	ts.sealedRun(2)
	if _, err := ts.srv.cfg.Tenants[0].Signer.SignNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	code, h, body := ts.do("GET", "/v1/status", "")
	var st LogStatus
	if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil {
		t.Fatalf("status: %d %s", code, body)
	}
	if st.Size != 1 || st.Signed == nil || st.Signed.Size != 1 || st.Witnessed != nil || st.Policy != "" {
		t.Errorf("status: %s", body)
	}
	if !strings.Contains(body, `"witnesses":[]`) || !strings.Contains(body, `"alarms":[]`) {
		t.Errorf("empty lists are not []: %s", body)
	}
	if h.Get("Cache-Control") != "no-store" {
		t.Errorf("Cache-Control %q", h.Get("Cache-Control"))
	}
}

// TestMeter_CountsCommittedAppendsAndSealsOnly: the meter counts the
// appends (and their records) and seals the API answered 2xx, by tenant,
// not refused ones nor reads; a minute drops out of the hour after an
// hour and out of the day after a day.
func TestMeter_CountsCommittedAppendsAndSealsOnly(t *testing.T) {
	clk := storetest.NewFakeClock()
	m := NewMeter(clk.Now)
	ts := startServer(t, withTwins(m))
	front := httptest.NewServer(m.Observe(ts.srv))
	defer front.Close()
	post := func(path, body string) int {
		req, _ := http.NewRequest("POST", front.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+ts.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	run := store.NewRunID()
	lease := post("/v1/runs/"+run.String()+"/lease", `{"owner":"w","ttl_seconds":60}`)
	if lease != 200 {
		t.Fatalf("lease: %d", lease)
	}
	body := line(run, "RunAdmitted", `"source":"api"`) + line(run, "Note", `"text":"x"`) + line(run, "RunConcluded", `"outcome":"succeeded"`)
	if c := post("/v1/append?epoch=1", body); c != 200 {
		t.Fatalf("append: %d", c)
	}
	if c := post("/v1/append?epoch=99", line(run, "Note", "")); c == 200 {
		t.Fatalf("fenced append answered 200")
	}
	if c := post("/v1/runs/"+run.String()+"/seal", `{"epoch":1,"outcome":"succeeded"}`); c != 200 {
		t.Fatalf("seal: %d", c)
	}
	a := m.Activity(store.DefaultTenant)
	want := ActivityPoint{Appends: 1, Records: 3, Seals: 1}
	for name, s := range map[string]ActivitySeries{"hour": a.Hour, "day": a.Day} {
		got := s.Totals
		if got.Appends != want.Appends || got.Records != want.Records || got.Seals != want.Seals {
			t.Errorf("%s totals %+v, want %+v", name, got, want)
		}
		if s.AppendLatency.Count != 1 || s.SealLatency.Count != 1 || s.AppendLatency.P50 <= 0 {
			t.Errorf("%s latencies %+v %+v", name, s.AppendLatency, s.SealLatency)
		}
		if last := s.Points[len(s.Points)-1]; last.Records != 3 {
			t.Errorf("%s: the newest step holds %+v, want the 3 records", name, last)
		}
	}
	if len(a.Hour.Points) != 60 || len(a.Day.Points) != 144 || a.Hour.StepSeconds != 60 || a.Day.StepSeconds != 600 {
		t.Errorf("series shapes: hour %d×%ds, day %d×%ds", len(a.Hour.Points), a.Hour.StepSeconds, len(a.Day.Points), a.Day.StepSeconds)
	}
	if other := m.Activity("other"); other.Hour.Totals.Appends != 0 {
		t.Errorf("tenant other counted %+v", other.Hour.Totals)
	}
	clk.Advance(time.Hour)
	if a := m.Activity(store.DefaultTenant); a.Hour.Totals.Records != 0 || a.Day.Totals.Records != 3 {
		t.Errorf("an hour later: hour %+v day %+v", a.Hour.Totals, a.Day.Totals)
	}
	clk.Advance(23 * time.Hour)
	if a := m.Activity(store.DefaultTenant); a.Day.Totals.Records != 0 {
		t.Errorf("a day later: the ring still counts %+v", a.Day.Totals)
	}
}

// TestMeter_Percentiles: percentiles are bucket bounds at the right ranks.
func TestMeter_Percentiles(t *testing.T) {
	var h [latBuckets]uint64
	h[latBucket(time.Millisecond)] = 98
	h[latBucket(100*time.Millisecond)] = 2
	l := summarise(h)
	if l.Count != 100 || l.P50 < 1 || l.P50 > 1.5 || l.P90 != l.P50 || l.P99 < 100 || l.P99 > 142 || l.Max != l.P99 {
		t.Errorf("summary %+v", l)
	}
	if b := latBucket(time.Hour); b != latBuckets-1 || latBound(b) < time.Hour {
		t.Errorf("an hour falls in bucket %d", b)
	}
	for _, d := range []time.Duration{time.Microsecond, 150 * time.Microsecond, 3 * time.Millisecond, 2 * time.Second} {
		if b := latBucket(d); latBound(b) < d || (b > 0 && latBound(b-1) >= d) {
			t.Errorf("%v in bucket %d (%v, %v]", d, b, latBound(b-1), latBound(b))
		}
	}
}

// TestMeter_CountsRecordsCutBetweenWrites: an append answer written in
// pieces, its member names cut anywhere, is counted record for record.
func TestMeter_CountsRecordsCutBetweenWrites(t *testing.T) {
	answer := []byte(`{"records":[{"line":1,"run":"A","seq":1},{"line":2,"run":"A","seq":2},{"line":3,"run":"A","seq":3}]}`)
	for size := 1; size <= len(answer); size++ {
		w := &countingWriter{ResponseWriter: httptest.NewRecorder()}
		for i := 0; i < len(answer); i += size {
			w.Write(answer[i:min(i+size, len(answer))])
		}
		if w.lines != 3 {
			t.Fatalf("written %d bytes at a time: %d records counted, want 3", size, w.lines)
		}
	}
}

// TestTwins_RunStatus_WitnessedNoteBelowPolicyIsNotVerified: a kept
// "witnessed" note that does not meet the configured policy (kept under an
// earlier one, or planted) never yields inclusion_verified, and the answer
// says why.
func TestTwins_RunStatus_WitnessedNoteBelowPolicyIsNotVerified(t *testing.T) {
	pol := journaltest.Policy(t, nil, journaltest.NewWitness(t, "w1"))
	ts := startServer(t, withTwins(nil), func(c *Config, _ *Timeouts) { c.Tenants[0].Policy = pol })
	ctx := context.Background()
	run := ts.sealedRun(3)
	sc, err := ts.srv.cfg.Tenants[0].Signer.SignNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.st.MarkWitnessed(ctx, sc.Size, sc.Note); err != nil { // no cosignature: below the quorum
		t.Fatal(err)
	}
	code, _, body := ts.do("GET", "/v1/runs/"+run.String()+"/status", "")
	var rs RunStatus
	if code != http.StatusOK || json.Unmarshal([]byte(body), &rs) != nil {
		t.Fatalf("status: %d %s", code, body)
	}
	if rs.InclusionVerified || rs.WitnessedProblem == "" || rs.Inclusion == nil {
		t.Fatalf("a witnessed note below the policy: %s", body)
	}
}
