package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/runseal/runseal/internal/pgtest"
	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/journalstore"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/postgres"
)

// TestStudyPostgres: `journal study list` and `study show` read a study
// kept in PostgreSQL with --store postgres://..., as they do a file.
func TestStudyPostgres(t *testing.T) {
	ctx := context.Background()
	dsn := os.Getenv(pgtest.EnvDSN)
	if dsn == "" {
		if os.Getenv(pgtest.EnvSkip) == "1" {
			t.Skipf("%s=1", pgtest.EnvSkip)
		}
		srv, err := pgtest.Start(ctx)
		if err != nil {
			t.Fatalf("no PostgreSQL for the test (set %s=1 to skip): %v", pgtest.EnvSkip, err)
		}
		t.Cleanup(srv.Stop)
		dsn = srv.DSN
	}
	tenant := "study" + strings.ToLower(store.NewRunID().String())
	pg, err := postgres.Open(ctx, dsn, postgres.Options{Tenant: tenant})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	s, err := journalstore.New(pg) // a shared store: JournalStorage takes the study lock there
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	study, err := s.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1})
	if err != nil {
		t.Fatal(err)
	}
	var trials []lifecycle.TrialID
	for range 2 {
		out, err := s.ReserveAndCreateIfBudget(ctx, lifecycle.ReserveAndCreateRequest{Study: study, MaxTrials: 5})
		if err != nil {
			t.Fatal(err)
		}
		trials = append(trials, out.Trial)
	}
	tok, err := s.Claim(ctx, lifecycle.ClaimRequest{Trial: trials[0], Owner: "pg-worker"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.TerminalWithIntent(ctx, lifecycle.TerminalRequest{Owner: tok, State: lifecycle.TrialComplete, Values: []float64{1}}, lifecycle.FinalizationIntent{Kind: "tell"}); err != nil {
		t.Fatal(err)
	}

	if !isDSN(dsn) {
		cfg, err := pgconn.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		q := url.Values{"host": {cfg.Host}, "port": {fmt.Sprint(cfg.Port)}, "sslmode": {"disable"}, "password": {cfg.Password}}
		dsn = (&url.URL{Scheme: "postgres", User: url.User(cfg.User), Path: "/" + cfg.Database, RawQuery: q.Encode()}).String()
	}
	flags := []string{"--tenant", tenant, "--store", dsn}
	var v journalstore.StudyView
	if err := json.Unmarshal([]byte(mustCLI(t, "", "", append(flags, "study", "show", string(study), "--json")...)), &v); err != nil {
		t.Fatal(err)
	}
	if v.Study != study || len(v.Trials) != 2 || v.Trials[0].State != lifecycle.TrialComplete || !v.Trials[0].Sealed ||
		v.Trials[1].State != lifecycle.TrialWaiting || len(v.Outbox) != 1 || len(v.Pending) != 0 {
		t.Errorf("study show on postgres: %+v", v)
	}
	var sums []journalstore.StudySummary
	if err := json.Unmarshal([]byte(mustCLI(t, "", "", append(flags, "study", "list", "--json")...)), &sums); err != nil {
		t.Fatal(err)
	}
	if len(sums) != 1 || sums[0].Study != study || sums[0].Trials != 2 || sums[0].OutboxOpen != 1 {
		t.Errorf("study list on postgres: %+v", sums)
	}
	if out := mustCLI(t, "", "", append(flags, "study", "show", string(study))...); !strings.Contains(out, "study "+string(study)) || !strings.Contains(out, "complete") || !strings.Contains(out, "tell") {
		t.Errorf("study show text on postgres:\n%s", out)
	}
}
