package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/runseal/runseal/store"
)

// memberTable is a co-located resource: a table of the caller's own, in
// another schema, written in the journal's transaction.
func memberTable(t *testing.T) string {
	t.Helper()
	name := "public.member_" + strings.ToLower(freshTenant()[1:14])
	sqlExec(t, `CREATE TABLE `+name+`(id text PRIMARY KEY, amount int NOT NULL)`)
	t.Cleanup(func() { sqlExec(t, `DROP TABLE IF EXISTS `+name) })
	return name
}

func memberRows(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := testPool(t).QueryRow(context.Background(), `SELECT count(*) FROM `+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestAtomicCommitsTogether(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, Options{})
	table := memberTable(t)
	run := store.NewRunID()
	l, err := s.Acquire(ctx, run, "owner", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := s.Atomic().AppendAtomic(ctx, run, l.Epoch, func(ctx context.Context, tx store.AtomicTx) ([]store.Append, error) {
		n, err := tx.Exec(ctx, `INSERT INTO `+table+`(id, amount) VALUES($1, $2)`, "order-1", 42)
		if err != nil || n != 1 {
			return nil, errors.Join(err, errors.New("insert affected no row"))
		}
		var amount int
		if err := tx.QueryRow(ctx, `SELECT amount FROM `+table+` WHERE id = $1`, "order-1").Scan(&amount); err != nil || amount != 42 {
			return nil, errors.Join(err, errors.New("member cannot read its own write"))
		}
		return []store.Append{note(run, "reserved"), effect(run, "reserve order-1")}, nil
	})
	if err != nil || len(recs) != 2 || recs[1].Seq != 2 {
		t.Fatalf("AppendAtomic = %d records, %v", len(recs), err)
	}
	if memberRows(t, table) != 1 {
		t.Fatal("member row not committed")
	}
	if d, err := s.Verify(ctx, run); err != nil || d != recs[1].Hash {
		t.Fatalf("verify: %v", err)
	}

	// The member fails: neither its rows nor the records land.
	_, err = s.Atomic().AppendAtomic(ctx, run, l.Epoch, func(ctx context.Context, tx store.AtomicTx) ([]store.Append, error) {
		if _, err := tx.Exec(ctx, `INSERT INTO `+table+`(id, amount) VALUES('order-2', 1)`); err != nil {
			return nil, err
		}
		return nil, errors.New("payment declined")
	})
	if err == nil || !strings.Contains(err.Error(), "payment declined") {
		t.Fatalf("failing member: %v", err)
	}
	// The journal refuses the member's records: the member's rows go too.
	_, err = s.Atomic().AppendAtomic(ctx, run, l.Epoch, func(ctx context.Context, tx store.AtomicTx) ([]store.Append, error) {
		if _, err := tx.Exec(ctx, `INSERT INTO `+table+`(id, amount) VALUES('order-3', 1)`); err != nil {
			return nil, err
		}
		return []store.Append{effect(run, "reserve order-1")}, nil
	})
	var de *store.DuplicateEffectError
	if !errors.As(err, &de) {
		t.Fatalf("duplicate effect in an atomic append: %v", err)
	}
	// A member statement that fails leaves the transaction unusable; the
	// journal notices even if the member swallows the error.
	_, err = s.Atomic().AppendAtomic(ctx, run, l.Epoch, func(ctx context.Context, tx store.AtomicTx) ([]store.Append, error) {
		_, _ = tx.Exec(ctx, `INSERT INTO `+table+`(id, amount) VALUES('order-1', 1)`) // duplicate key
		return []store.Append{note(run, "pretend all is well")}, nil
	})
	if err == nil {
		t.Fatal("atomic append after a failed member statement succeeded")
	}
	if memberRows(t, table) != 1 {
		t.Fatal("a refused atomic append left member rows")
	}
	if h, _ := s.Head(ctx, run); h.Seq != 2 {
		t.Fatalf("a refused atomic append wrote records: head %d", h.Seq)
	}
	// Records of another run are refused.
	_, err = s.Atomic().AppendAtomic(ctx, run, l.Epoch, func(ctx context.Context, tx store.AtomicTx) ([]store.Append, error) {
		return []store.Append{note(store.NewRunID(), "elsewhere")}, nil
	})
	var ia *store.InvalidArgumentError
	if !errors.As(err, &ia) {
		t.Fatalf("atomic append of another run's record: %v", err)
	}
}

func TestAtomicFencedBeforeWork(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, Options{})
	run := store.NewRunID()
	l, err := s.Acquire(ctx, run, "owner", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	_, err = s.Atomic().AppendAtomic(ctx, run, l.Epoch+1, func(ctx context.Context, tx store.AtomicTx) ([]store.Append, error) {
		ran = true
		return []store.Append{note(run, "x")}, nil
	})
	var f *store.FencedError
	if !errors.As(err, &f) || ran {
		t.Fatalf("fenced atomic append: err %v, work ran %v", err, ran)
	}
	if _, err := s.Append(ctx, l.Epoch, []store.Append{conclude(run, "succeeded")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Seal(ctx, run, l.Epoch, "succeeded"); err != nil {
		t.Fatal(err)
	}
	_, err = s.Atomic().AppendAtomic(ctx, run, l.Epoch, func(ctx context.Context, tx store.AtomicTx) ([]store.Append, error) {
		ran = true
		return []store.Append{note(run, "x")}, nil
	})
	var rs *store.RunSealedError
	if !errors.As(err, &rs) || ran {
		t.Fatalf("atomic append to a sealed run: err %v, work ran %v", err, ran)
	}
}

func TestAtomicLostCommitIsCommitUnknown(t *testing.T) {
	ctx := context.Background()
	cut, cfg := newCommitCutter(t, testPool(t).Config())
	cfg.MaxConns = 2
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	s, err := New(ctx, p, Options{Tenant: freshTenant(), Schema: "runseal_test"})
	if err != nil {
		t.Fatal(err)
	}
	table := memberTable(t)
	run := store.NewRunID()
	cut.Arm(cutAfter)
	_, err = s.Atomic().AppendAtomic(ctx, run, 1, func(ctx context.Context, tx store.AtomicTx) ([]store.Append, error) {
		if _, err := tx.Exec(ctx, `INSERT INTO `+table+`(id, amount) VALUES('order-1', 7)`); err != nil {
			return nil, err
		}
		return []store.Append{note(run, "reserved")}, nil
	})
	var cu *store.CommitUnknownError
	if !errors.As(err, &cu) {
		t.Fatalf("atomic append with a lost COMMIT acknowledgement: %v (%T), want CommitUnknownError", err, err)
	}
	// In doubt to the caller, and in fact landed, whole: both or neither.
	direct := openStore(t, Options{Tenant: s.Tenant()})
	if h, _ := direct.Head(ctx, run); h.Seq != 1 || memberRows(t, table) != 1 {
		t.Fatalf("after the in-doubt commit: head %d, member rows %d; want both written", h.Seq, memberRows(t, table))
	}
}
