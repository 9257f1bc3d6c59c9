package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runseal/runseal/api/server"
	"github.com/runseal/runseal/checkpointer"
	"github.com/runseal/runseal/internal/journaltest"
	"github.com/runseal/runseal/keyring"
	"github.com/runseal/runseal/publish"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sealed"
	"github.com/runseal/runseal/store/sqlite"
)

// TestConsole_SealedJournalShowsSealedAndErasedNeverPlaintext serves a
// journal behind the key ring, as 'journal serve --keyring' does: the Run
// page shows a sealed field as sealed and, once its case is erased, as
// erased, and never the plaintext the key ring could open. The Log page
// shows a kept rollback alarm (found through the decorator) and a witness
// found ahead of the log.
func TestConsole_SealedJournalShowsSealedAndErasedNeverPlaintext(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "j.db"), sqlite.Options{Origin: "example.com/log", Logger: quiet})
	must(t, err)
	defer st.Close()
	ring, err := keyring.OpenFile(filepath.Join(t.TempDir(), "keys"))
	must(t, err)
	j := sealed.New(st, ring, sealed.Options{})
	runOf := func(c store.CaseID, secret string) store.RunID {
		run := store.NewRunID()
		l, err := j.Acquire(ctx, run, "w", time.Hour)
		must(t, err)
		_, err = j.Append(ctx, l.Epoch, []store.Append{
			{Run: run, Case: c, Kind: store.KindRunAdmitted, Fields: []byte(`{"source":"intake","applicant":"` + secret + `"}`)},
			{Run: run, Case: c, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)},
		})
		must(t, err)
		_, err = j.Seal(ctx, run, l.Epoch, "succeeded")
		must(t, err)
		return run
	}
	gone, kept := store.NewCaseID(), store.NewCaseID()
	goneRun, keptRun := runOf(gone, "AdaLovelace"), runOf(kept, "CharlesBabbage")
	_, err = j.Erase(ctx, sealed.Erasure{Scope: sealed.Scope(j.Tenant(), gone, goneRun), Actor: store.Operator{Actor: "dpo", Basis: store.Asserted}, Reason: "art. 17"})
	must(t, err)

	lk := journaltest.NewLog(t, st.Origin())
	pol := journaltest.Policy(t, lk, journaltest.NewWitness(t, "w1"))
	wid := publish.WitnessID(pol.Witnesses()[0].Verifier)
	sc, err := checkpointer.SignAndKeep(ctx, st, lk.Signer)
	must(t, err)
	must(t, st.EnqueuePublication(ctx, sc.Size, []string{wid}))
	ahead := &publish.AheadError{Witness: "w1", WitnessSize: 99, LogSize: sc.Size}
	must(t, st.DeferPublication(ctx, wid, sc.Size, time.Now().Add(time.Minute), ahead.Error()))
	must(t, st.RecordWitnessAlarm(ctx, store.WitnessAlarm{Witness: wid, Kind: store.AlarmWitnessRolledBack, Reported: 1, Cosigned: 2, At: time.Now(), Detail: "witness w1 reports size 1, but cosigned 2"}))

	id, tok, hash, err := server.NewToken()
	must(t, err)
	must(t, st.CreateToken(ctx, store.Token{ID: id, Tenant: "default", Role: store.RoleReader, Hash: hash}))
	tenants := []server.Tenant{{Store: j, LogKey: lk.Verifier, Policy: pol}}
	con, err := New(Config{Tenants: tenants, Tokens: st, Logger: quiet, Heavy: apiServer(t, tenants, st)})
	must(t, err)
	ck := signInHandler(t, con, tok)
	get := func(path string) string {
		t.Helper()
		req := httptest.NewRequest("GET", path, nil)
		req.AddCookie(ck)
		rec := httptest.NewRecorder()
		con.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", path, rec.Code, rec.Body.String())
		}
		return rec.Body.String()
	}
	for run, want := range map[store.RunID]string{goneRun: "erased", keptRun: "sealed"} {
		body := get("/console/runs/" + run.String())
		if !strings.Contains(body, `<span class="fname">applicant</span> <span class="pill `+want+`">`+want+`</span>`) {
			t.Errorf("run %s: applicant is not shown as %s", run, want)
		}
		for _, secret := range []string{"AdaLovelace", "CharlesBabbage"} {
			if strings.Contains(body, secret) {
				t.Errorf("run %s: the page shows the plaintext %s", run, secret)
			}
		}
		if !strings.Contains(body, `<span class="fname">source</span> <code>&#34;intake&#34;</code>`) {
			t.Errorf("run %s: the clear field source is not shown as stored", run)
		}
	}
	body := get("/console/log")
	for _, want := range []string{"ahead of the log", "witness_rolled_back", "reported 1 &lt; 2", ahead.Error()} {
		if !strings.Contains(body, want) {
			t.Errorf("Log page lacks %q", want)
		}
	}
}
