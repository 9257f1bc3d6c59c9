package groupcommit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

var errRefused = errors.New("refused for a reason of its own")

// rowsDB opens a fresh SQLite file with one writer connection and a table
// rows(name) whose primary key refuses a name written twice.
func rowsDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "g.db")+"?_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE rows(name TEXT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	return db
}

// sqlQueue opens rowsDB and a queue writing into it, recording the size of
// every committed group.
func sqlQueue(t *testing.T) (*Queue[Work], *sql.DB, *[]int) {
	t.Helper()
	db := rowsDB(t)
	var groups []int
	c := &SQL{
		DB:        db,
		Refused:   func(err error) bool { return errors.Is(err, errRefused) },
		Committed: func(n int, _ time.Duration) { groups = append(groups, n) },
	}
	q := New(Config[Work]{Attempt: c.Attempt})
	t.Cleanup(q.Close)
	return q, db, &groups
}

func insert(name string, runs *atomic.Int32, then error) Work {
	return Work{Run: func(ctx context.Context, tx *sql.Tx) error {
		if runs != nil {
			runs.Add(1)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO rows(name) VALUES(?)`, name); err != nil {
			return err
		}
		return then
	}}
}

func rows(t *testing.T, db *sql.DB) string {
	t.Helper()
	rs, err := db.Query(`SELECT name FROM rows ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out []string
	for rs.Next() {
		var n string
		rs.Scan(&n)
		out = append(out, n)
	}
	return fmt.Sprint(out)
}

// group runs works as one group: a blocker holds the writer until all are
// queued behind it. It returns each work's answer.
func group(t *testing.T, q *Queue[Work], works ...Work) []error {
	t.Helper()
	entered, release := make(chan struct{}), make(chan struct{})
	blocker := make(chan error, 1)
	go func() {
		blocker <- q.Submit(context.Background(), Work{Run: func(context.Context, *sql.Tx) error {
			close(entered)
			<-release
			return nil
		}})
	}()
	<-entered
	chs := make([]chan error, len(works))
	for i, w := range works {
		chs[i] = make(chan error, 1)
		go func() { chs[i] <- q.Submit(context.Background(), w) }()
		waitQueued(t, q, i+1)
	}
	close(release)
	if err := <-blocker; err != nil {
		t.Fatal(err)
	}
	out := make([]error, len(works))
	for i, ch := range chs {
		out[i] = <-ch
	}
	return out
}

func TestSQL_RefusalRollsBackOnlyThatMember(t *testing.T) {
	q, db, groups := sqlQueue(t)
	errs := group(t, q, insert("a", nil, nil), insert("b", nil, errRefused), insert("c", nil, nil))
	if errs[0] != nil || !errors.Is(errs[1], errRefused) || errs[2] != nil {
		t.Fatalf("answers %v, want nil, the refusal, nil", errs)
	}
	if got := rows(t, db); got != "[a c]" {
		t.Fatalf("rows %s: the refused member's insert must roll back alone", got)
	}
	if fmt.Sprint(*groups) != "[1 2]" {
		t.Fatalf("committed groups %v, want the blocker, then a and c in one commit", *groups)
	}
}

func TestSQL_InfrastructureFailureRerunsTheOthers(t *testing.T) {
	q, db, groups := sqlQueue(t)
	var aRuns, cRuns atomic.Int32
	broken := errors.New("disk I/O error")
	errs := group(t, q, insert("a", &aRuns, nil), insert("b", nil, broken), insert("c", &cRuns, nil))
	if errs[0] != nil || !errors.Is(errs[1], broken) || errs[2] != nil {
		t.Fatalf("answers %v, want nil, the failure, nil", errs)
	}
	if got := rows(t, db); got != "[a c]" {
		t.Fatalf("rows %s", got)
	}
	// a ran in the poisoned transaction and again in the fresh one; c only
	// in the fresh one.
	if aRuns.Load() != 2 || cRuns.Load() != 1 {
		t.Fatalf("a ran %d times, c %d; want 2 and 1", aRuns.Load(), cRuns.Load())
	}
	if fmt.Sprint(*groups) != "[1 2]" {
		t.Fatalf("committed groups %v", *groups)
	}
}

func TestSQL_ConstraintViolationIsNotMistakenForARefusal(t *testing.T) {
	q, db, _ := sqlQueue(t)
	errs := group(t, q, insert("a", nil, nil), insert("a", nil, nil))
	if errs[0] != nil || errs[1] == nil {
		t.Fatalf("answers %v, want nil then the duplicate's error", errs)
	}
	if got := rows(t, db); got != "[a]" {
		t.Fatalf("rows %s", got)
	}
}

func TestSQL_WorkSeesNoCancellation(t *testing.T) {
	q, db, _ := sqlQueue(t)
	ctx, cancel := context.WithCancel(context.Background())
	entered, release := make(chan struct{}), make(chan struct{})
	ch := make(chan error, 1)
	go func() {
		ch <- q.Submit(ctx, Work{Run: func(wctx context.Context, tx *sql.Tx) error {
			close(entered)
			<-release
			if wctx.Err() != nil {
				return wctx.Err()
			}
			_, err := tx.ExecContext(wctx, `INSERT INTO rows(name) VALUES('late')`)
			return err
		}})
	}()
	<-entered
	cancel()
	close(release)
	if err := <-ch; err != nil {
		t.Fatalf("a started write whose caller gave up: %v, want it committed", err)
	}
	if got := rows(t, db); got != "[late]" {
		t.Fatalf("rows %s", got)
	}
}

// batchedInsert is Work that SQL.Batch may write together with its
// neighbours; alone it inserts its name in its savepoint.
func batchedInsert(name string) Work {
	w := insert(name, nil, nil)
	w.Batched = name
	return w
}

func TestSQL_BatchWritesNeighboursTogether(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "g.db")+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE rows(name TEXT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	var batches []string
	fail := false
	c := &SQL{
		DB:      db,
		Refused: func(err error) bool { return errors.Is(err, errRefused) },
		Batch: func(ctx context.Context, tx *sql.Tx, reqs []any) ([]error, error) {
			batches = append(batches, fmt.Sprint(reqs))
			out := make([]error, len(reqs))
			for i, r := range reqs {
				if r == "refused" {
					out[i] = errRefused
					continue
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO rows(name) VALUES(?)`, r); err != nil {
					return nil, err
				}
			}
			if fail {
				return nil, errors.New("batch write failed")
			}
			return out, nil
		},
	}
	q := New(Config[Work]{Attempt: c.Attempt})
	defer q.Close()

	errs := group(t, q, batchedInsert("a"), batchedInsert("refused"), batchedInsert("b"), insert("c", nil, nil), batchedInsert("d"))
	if errs[0] != nil || !errors.Is(errs[1], errRefused) || errs[2] != nil || errs[3] != nil || errs[4] != nil {
		t.Fatalf("answers %v", errs)
	}
	// The blocker (not batched) ran alone; a, refused, b went to Batch
	// together; c ran alone between them and d.
	if fmt.Sprint(batches) != "[[a refused b] [d]]" {
		t.Fatalf("batches %v", batches)
	}
	if got := rows(t, db); got != "[a b c d]" {
		t.Fatalf("rows %s", got)
	}

	// A failing batch rolls the group back; its members run again alone,
	// each in its savepoint, and the rows still land once.
	batches, fail = nil, true
	errs = group(t, q, batchedInsert("e"), batchedInsert("f"))
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("answers after a failed batch %v", errs)
	}
	if fmt.Sprint(batches) != "[[e f]]" {
		t.Fatalf("batches %v: the retry must not batch again", batches)
	}
	if got := rows(t, db); got != "[a b c d e f]" {
		t.Fatalf("rows %s", got)
	}
}
