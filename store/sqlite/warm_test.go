package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/runseal/runseal/store"
)

// warmRuns is the size of the logs the warm's tests build: a few thousand
// pages of proof b-trees, more than the kernel reads ahead around the few
// pages Open itself reads.
const warmRuns = 50000

// sealedLog builds a file holding a log of n sealed runs and returns its
// path and runs.
func sealedLog(t *testing.T, n int) (string, []store.RunID) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "warm.db")
	runs, _, err := CreateSealedLog(context.Background(), path, n)
	if err != nil {
		t.Fatal(err)
	}
	return path, runs
}

// proofPages are the page numbers of the proof b-trees of the file at
// path, read (by dbstat, which reads them) through a connection of its own.
func proofPages(t *testing.T, path string) []int64 {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT pageno FROM dbstat WHERE name IN ('runs', 'log_nodes')`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var p int64
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWarm_WalksProofBTreesOffTheMap: what the warm asks the kernel for,
// in every test run (what the page cache then holds is the kernel's, and
// TestWarm_ColdStartReadsProofBTrees measures it with RUNSEAL_MEASURE=1).
// Opened on a file with a log, the warm walks the b-trees a proof reads,
// runs then log_nodes and nothing else, on one connection whose memory map
// is off (so the pages it reads land in the kernel's page cache, not in
// the process's resident set) and reports every page of them read; the
// pool's connections have their map back afterwards. With Options.NoWarm
// it walks nothing and reports nothing.
func TestWarm_WalksProofBTreesOffTheMap(t *testing.T) {
	ctx := context.Background()
	path, _ := sealedLog(t, 5000)
	pages := int64(len(proofPages(t, path)))
	for _, warm := range []bool{false, true} {
		var walked []string
		var conns []*sql.Conn
		hold := func(wctx context.Context, conn *sql.Conn, btree string) {
			var mmap int64
			if err := conn.QueryRowContext(wctx, `PRAGMA mmap_size`).Scan(&mmap); err != nil {
				t.Errorf("warm %v: the walk's connection: %v", warm, err)
			}
			walked = append(walked, fmt.Sprintf("%s (mmap_size %d)", btree, mmap))
			conns = append(conns, conn)
		}
		s, err := Open(ctx, path, Options{NoWarm: !warm, warmHold: hold})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := s.WaitWarm(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"runs (mmap_size 0)", "log_nodes (mmap_size 0)"}
		if !warm {
			want = nil
		}
		if !slices.Equal(walked, want) {
			t.Errorf("warm %v: walked %q, want %q", warm, walked, want)
		}
		if len(conns) == 2 && conns[0] != conns[1] {
			t.Errorf("warm %v: the walks took two connections, want one", warm)
		}
		switch {
		case rep.Err != nil:
			t.Errorf("warm %v: %v", warm, rep.Err)
		case warm && (rep.Method != "b-tree walk" || rep.Pages != pages):
			t.Errorf("warm: report %+v, want a b-tree walk of the proof b-trees' %d pages", rep, pages)
		case !warm && (rep.Method != "" || rep.Pages != 0):
			t.Errorf("NoWarm: report %+v, want nothing read", rep)
		}
		var mmap int64
		if err := s.rdb.QueryRowContext(ctx, `PRAGMA mmap_size`).Scan(&mmap); err != nil || mmap <= 0 {
			t.Errorf("warm %v: a pool connection after the warm has mmap_size %d (%v), want its map back", warm, mmap, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWarm_EmptyLogReadsNothing: a file with no sealed run has nothing for
// a proof to read; the warm ends at once, having read nothing.
func TestWarm_EmptyLogReadsNothing(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "j.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rep, err := s.WaitWarm(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Method != "" || rep.Pages != 0 || rep.NodeCache || rep.Err != nil {
		t.Fatalf("warm of an empty log: %+v, want nothing read", rep)
	}
}

// TestWarm_OtherTenantsLogIsWalked: the walk serves every tenant of the
// file, so it runs when the opening tenant has sealed nothing but another
// has ("journal serve --tenants" opens --tenant first); only the node cache,
// which is the opener's, is left unfilled.
func TestWarm_OtherTenantsLogIsWalked(t *testing.T) {
	ctx := context.Background()
	path, _ := sealedLog(t, 100) // the "default" tenant's log
	s, err := Open(ctx, path, Options{Tenant: "other"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rep, err := s.WaitWarm(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Method == "" || rep.Pages <= 0 || rep.Err != nil || rep.NodeCache {
		t.Fatalf("warm opened by a tenant with no log on a file with one: %+v, want the b-trees walked and no node cache", rep)
	}
}

// TestWarm_FillsNodeCache: once the warm has ended, the node cache holds
// the log's upper levels, so that a first inclusion proof reads from the
// file no node above the ones its own statement brings (it would read the
// levels the cache keeps, one statement more, without the warm).
func TestWarm_FillsNodeCache(t *testing.T) {
	ctx := context.Background()
	path, runs := sealedLog(t, 5000)
	for _, warm := range []bool{false, true} {
		s, err := Open(ctx, path, Options{NoWarm: !warm})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := s.WaitWarm(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rep.NodeCache != warm || (rep.Method != "") != warm || rep.Err != nil {
			t.Fatalf("warm %v: report %+v", warm, rep)
		}
		if warm && rep.Pages != int64(len(proofPages(t, path))) {
			t.Errorf("warm read %d pages, want the proof b-trees' %d", rep.Pages, len(proofPages(t, path)))
		}
		before := s.ProofRoundTrips()
		if _, err := s.InclusionProof(ctx, runs[1234]); err != nil {
			t.Fatal(err)
		}
		if got, want := s.ProofRoundTrips()-before, map[bool]uint64{false: 2, true: 1}[warm]; got != want {
			t.Errorf("warm %v: a first inclusion proof ran %d statements, want %d", warm, got, want)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWarm_CloseStopsIt: Close cancels a warm under way rather than waiting
// it out. The warm is held before its first walk until its context ends;
// Close must return, the warm report its cancellation (class ErrWarm and
// context.Canceled) without a node cache, and a proof on the closed store
// is store.ErrClosed, not a warm's error.
func TestWarm_CloseStopsIt(t *testing.T) {
	ctx := context.Background()
	path, runs := sealedLog(t, 100)
	held, giveUp := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hold := func(wctx context.Context, _ *sql.Conn, _ string) {
		once.Do(func() { close(held) })
		select {
		case <-wctx.Done():
		case <-giveUp: // Close did not cancel the warm: let it go, fail below
		}
	}
	s, err := Open(ctx, path, Options{warmHold: hold})
	if err != nil {
		t.Fatal(err)
	}
	<-held
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		close(giveUp)
		<-closed
		t.Fatal("Close waited for the warm instead of stopping it")
	}
	rep, err := s.WaitWarm(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(rep.Err, ErrWarm) || !errors.Is(rep.Err, context.Canceled) {
		t.Fatalf("warm stopped by Close reports %v, want ErrWarm and context.Canceled", rep.Err)
	}
	if rep.NodeCache {
		t.Fatal("a warm stopped by Close says it filled the node cache")
	}
	if _, err := s.InclusionProof(ctx, runs[0]); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("proof after Close: %v, want store.ErrClosed", err)
	}
}

// TestWarm_CorruptPageIsReportedNotFatal: a warm that cannot read a page
// of the proof b-trees stops there and says why (class ErrWarm, the step
// named: dbstat's walk counts a page it cannot parse, the node cache's
// fill then fails on it), and the store it was opened with still opens
// and serves the proofs whose pages it can read.
func TestWarm_CorruptPageIsReportedNotFatal(t *testing.T) {
	ctx := context.Background()
	path, runs := sealedLog(t, 5000)
	// The first leaf page of log_nodes holds level 0's first nodes, which
	// a proof of a run far from them does not read.
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	var page, size int64
	err = db.QueryRow(`SELECT min(pageno) FROM dbstat WHERE name = 'log_nodes' AND pagetype = 'leaf'`).Scan(&page)
	if err == nil {
		err = db.QueryRow(`PRAGMA page_size`).Scan(&size)
	}
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xEE}, (page-1)*size); err != nil { // no b-tree page type
		t.Fatal(err)
	}
	f.Close()
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatalf("Open with a page the warm cannot read: %v", err)
	}
	defer s.Close()
	rep, err := s.WaitWarm(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var we *WarmError
	if !errors.Is(rep.Err, ErrWarm) || !errors.As(rep.Err, &we) || we.Step == "" {
		t.Fatalf("warm over a corrupt page: %+v, want a WarmError naming its step", rep)
	}
	if rep.NodeCache {
		t.Error("the warm filled the node cache after it stopped short")
	}
	if _, err := s.InclusionProof(ctx, runs[4000]); err != nil {
		t.Fatalf("a proof after a warm that stopped short: %v", err)
	}
}
