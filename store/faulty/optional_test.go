package faulty_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/faulty"
)

// TestOptionalFailurePoints_SQLite: the optional interfaces' writes and
// reads fail on schedule, over SQLite.
func TestOptionalFailurePoints_SQLite(t *testing.T) {
	testOptionalFailurePoints(t, func(tb testing.TB) store.Journal { s, _ := openSQLite(tb); return s })
}

// optionalState is what every optional write below starts from: a log of
// two sealed runs, a signed checkpoint at size 1 queued for witness w1,
// and an API token.
type optionalState struct {
	cp1, cp2 store.Checkpoint
	token    string
}

// prepareOptional makes optionalState in inner, without faults.
func prepareOptional(t *testing.T, inner store.Journal) optionalState {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		run := store.NewRunID()
		if _, err := inner.Append(ctx, 1, []store.Append{note(run),
			{Run: run, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := inner.Seal(ctx, run, 1, "succeeded"); err != nil {
			t.Fatal(err)
		}
	}
	cs, ps, ts := inner.(store.CheckpointStore), inner.(store.PublicationStore), inner.(store.TokenStore)
	var st optionalState
	var err error
	if st.cp1, err = cs.CheckpointAt(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if st.cp2, err = cs.CheckpointAt(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.SaveCheckpoint(ctx, store.SignedCheckpoint{Size: 1, Root: st.cp1.Root, Note: []byte("note one\n")}); err != nil {
		t.Fatal(err)
	}
	if err := ps.EnqueuePublication(ctx, 1, []string{"w1"}); err != nil {
		t.Fatal(err)
	}
	st.token = store.NewRunID().String() // tokens are server-wide rows
	if err := ts.CreateToken(ctx, store.Token{ID: st.token, Tenant: "default", Role: store.RoleWriter, Name: "ci", Hash: sha256.Sum256([]byte("secret"))}); err != nil {
		t.Fatal(err)
	}
	return st
}

// optionalWrite is one write of an optional interface: the call through
// the decorator, and whether its effect is in the store it wraps.
type optionalWrite struct {
	method string
	call   func(ctx context.Context, j *faulty.Journal, st optionalState) error
	landed func(ctx context.Context, inner store.Journal, st optionalState) (bool, error)
}

var optionalWrites = []optionalWrite{
	{"SaveCheckpoint",
		func(ctx context.Context, j *faulty.Journal, st optionalState) error {
			_, err := j.SaveCheckpoint(ctx, store.SignedCheckpoint{Size: 2, Root: st.cp2.Root, Note: []byte("note two\n")})
			return err
		},
		func(ctx context.Context, inner store.Journal, _ optionalState) (bool, error) {
			sc, err := inner.(store.CheckpointStore).SignedCheckpointAt(ctx, 2)
			return sc != nil, err
		}},
	{"EnqueuePublication",
		func(ctx context.Context, j *faulty.Journal, _ optionalState) error {
			return j.EnqueuePublication(ctx, 1, []string{"w2"})
		},
		func(ctx context.Context, inner store.Journal, _ optionalState) (bool, error) {
			p, err := inner.(store.PublicationStore).NextPublication(ctx, "w2")
			return p != nil, err
		}},
	{"DeferPublication",
		func(ctx context.Context, j *faulty.Journal, _ optionalState) error {
			return j.DeferPublication(ctx, "w1", 1, time.Unix(2000000000, 0), "down")
		},
		func(ctx context.Context, inner store.Journal, _ optionalState) (bool, error) {
			p, err := inner.(store.PublicationStore).NextPublication(ctx, "w1")
			return p != nil && p.Attempts == 1 && p.LastError == "down", err
		}},
	{"RecordCosignature",
		func(ctx context.Context, j *faulty.Journal, _ optionalState) error {
			return j.RecordCosignature(ctx, "w1", 1, []byte("— w1 sig\n"))
		},
		func(ctx context.Context, inner store.Journal, _ optionalState) (bool, error) {
			_, ok, err := inner.(store.PublicationStore).LastCosigned(ctx, "w1")
			return ok, err
		}},
	{"MarkWitnessed",
		func(ctx context.Context, j *faulty.Journal, _ optionalState) error {
			return j.MarkWitnessed(ctx, 1, []byte("witnessed\n"))
		},
		func(ctx context.Context, inner store.Journal, _ optionalState) (bool, error) {
			w, err := inner.(store.PublicationStore).LatestWitnessed(ctx)
			return w != nil, err
		}},
	{"RecordWitnessAlarm",
		func(ctx context.Context, j *faulty.Journal, _ optionalState) error {
			return j.RecordWitnessAlarm(ctx, store.WitnessAlarm{Witness: "w1.example+01020304", Kind: store.AlarmWitnessRolledBack,
				Reported: 1, Cosigned: 2, At: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), Detail: "rolled back"})
		},
		func(ctx context.Context, inner store.Journal, _ optionalState) (bool, error) {
			as, err := inner.(store.AlarmStore).WitnessAlarms(ctx)
			return len(as) == 1, err
		}},
	{"RecordDisclosure",
		func(ctx context.Context, j *faulty.Journal, st optionalState) error {
			return j.RecordDisclosure(ctx, store.Disclosure{ID: "dsc_" + store.NewRunID().String(), At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
				By: store.Operator{Actor: "alice", Basis: store.Authenticated}, Recipient: "auditor@example.com",
				Runs: []store.RunID{store.NewRunID()}, Checkpoint: st.cp1, Package: store.Digest{1}, Bytes: 1234, Carried: 1, Sealed: 1, Records: 2})
		},
		func(ctx context.Context, inner store.Journal, _ optionalState) (bool, error) {
			ds, err := inner.(interface {
				Disclosures(ctx context.Context, after string, limit int) ([]store.Disclosure, error)
			}).Disclosures(ctx, "", 10)
			return len(ds) == 1, err
		}},
	{"CreateToken",
		func(ctx context.Context, j *faulty.Journal, st optionalState) error {
			return j.CreateToken(ctx, store.Token{ID: st.token + "b", Tenant: "default", Role: store.RoleReader, Name: "ro", Hash: sha256.Sum256([]byte("other"))})
		},
		func(ctx context.Context, inner store.Journal, st optionalState) (bool, error) {
			tok, err := inner.(store.TokenStore).TokenByID(ctx, st.token+"b")
			return tok != nil, err
		}},
	{"RevokeToken",
		func(ctx context.Context, j *faulty.Journal, st optionalState) error {
			_, err := j.RevokeToken(ctx, st.token)
			return err
		},
		func(ctx context.Context, inner store.Journal, st optionalState) (bool, error) {
			tok, err := inner.(store.TokenStore).TokenByID(ctx, st.token)
			return tok != nil && tok.Revoked != nil, err
		}},
}

// testOptionalFailurePoints proves, on fresh journals from open, that each
// write of the optional interfaces fails at each point a write can: before
// it runs (FailBeforeCommit, and FailInTx, these writes running no caller
// work in their transaction): nothing written; after its commit (LoseAck):
// written, and the caller hears CommitUnknownError. Each read fails before
// it runs, and a LoseAck drawn by a read is a plain failure. Every failure
// names the fault, the method and the replayable seed.
func testOptionalFailurePoints(t *testing.T, open func(testing.TB) store.Journal) {
	ctx := context.Background()
	for _, w := range optionalWrites {
		for _, c := range []struct {
			fault, want faulty.Fault
			landed      bool
		}{
			{faulty.FailBeforeCommit, faulty.FailBeforeCommit, false},
			{faulty.FailInTx, faulty.FailInTx, false},
			{faulty.LoseAck, faulty.LoseAck, true},
			{faulty.None, faulty.None, true},
		} {
			t.Run(w.method+"/"+c.fault.String(), func(t *testing.T) {
				inner := open(t)
				st := prepareOptional(t, inner)
				j := faulty.New(inner, faulty.Options{Seed: 21, At: map[uint64]faulty.Fault{1: c.fault}})
				err := w.call(ctx, j, st)
				checkInjected(t, err, c.want, w.method, 21)
				if landed, lerr := w.landed(ctx, inner, st); lerr != nil || landed != c.landed {
					t.Errorf("after %s with %s: written %t (%v), want %t", w.method, c.fault, landed, lerr, c.landed)
				}
			})
		}
	}
	t.Run("reads", func(t *testing.T) {
		inner := open(t)
		st := prepareOptional(t, inner)
		j := faulty.New(inner, faulty.Options{})
		reads := []struct {
			method string
			call   func() error
		}{
			{"LatestCheckpoint", func() error { _, err := j.LatestCheckpoint(ctx); return err }},
			{"SignedCheckpointAt", func() error { _, err := j.SignedCheckpointAt(ctx, 1); return err }},
			{"CheckpointAt", func() error { _, err := j.CheckpointAt(ctx, 1); return err }},
			{"NextPublication", func() error { _, err := j.NextPublication(ctx, "w1"); return err }},
			{"LastCosigned", func() error { _, _, err := j.LastCosigned(ctx, "w1"); return err }},
			{"Cosignatures", func() error { _, err := j.Cosignatures(ctx, 1); return err }},
			{"LatestWitnessed", func() error { _, err := j.LatestWitnessed(ctx); return err }},
			{"WitnessAlarms", func() error { _, err := j.WitnessAlarms(ctx); return err }},
			{"Disclosures", func() error { _, err := j.Disclosures(ctx, "", 10); return err }},
			{"Tokens", func() error { _, err := j.Tokens(ctx); return err }},
			{"TokenByID", func() error { _, err := j.TokenByID(ctx, st.token); return err }},
		}
		for _, r := range reads {
			j.Schedule(faulty.Options{Seed: 22, At: map[uint64]faulty.Fault{1: faulty.LoseAck}})
			checkInjected(t, r.call(), faulty.FailBeforeCommit, r.method, 22)
			if err := r.call(); err != nil {
				t.Errorf("%s, op 2 (no fault): %v", r.method, err)
			}
		}
	})
}

// checkInjected fails t unless err is the fault want injected at op 1 of
// method with seed (want None: no error), a CommitUnknownError exactly
// when want is LoseAck.
func checkInjected(t *testing.T, err error, want faulty.Fault, method string, seed uint64) {
	t.Helper()
	if want == faulty.None {
		if err != nil {
			t.Fatalf("%s with no fault: %v", method, err)
		}
		return
	}
	var ie *faulty.InjectedError
	if !errors.As(err, &ie) || ie.Fault != want || ie.Op != 1 || ie.Method != method || ie.Seed != seed ||
		!strings.Contains(err.Error(), want.String()) {
		t.Fatalf("%s: err = %v, want the injected %s of op 1 with seed %d", method, err, want, seed)
	}
	var cu *store.CommitUnknownError
	if errors.As(err, &cu) != (want == faulty.LoseAck) {
		t.Fatalf("%s: err = %v: CommitUnknownError %t, want %t", method, err, errors.As(err, &cu), want == faulty.LoseAck)
	}
}
