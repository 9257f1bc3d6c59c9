package sqlite

import (
	"context"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/runseal/runseal/internal/measure"
)

// evict writes the file at path out and asks the kernel to drop its pages
// from the page cache, as a reboot would; it skips the test where the file
// system keeps them (tmpfs).
func evict(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Skipf("cannot drop the file's pages from the page cache: %v", err)
	}
	if in := resident(t, path); countIn(in, nil) > len(in)/10 {
		t.Skipf("the file system keeps %d of the file's %d pages in memory after FADV_DONTNEED", countIn(in, nil), len(in))
	}
}

// resident is, for each 4 KiB page of the file at path, whether it is in
// the kernel's page cache (mincore; mapping the file reads nothing).
func resident(t *testing.T, path string) []bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if os.Getpagesize() != 4096 {
		t.Skipf("page size %d: the test maps SQLite's 4 KiB pages one to one", os.Getpagesize())
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (len(m)+4095)/4096)
	if len(m) > 0 {
		// x/sys/unix has no wrapper for mincore(2).
		if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
			t.Fatalf("mincore: %v", errno)
		}
	}
	out := make([]bool, len(vec))
	for i, v := range vec {
		out[i] = v&1 == 1
	}
	return out
}

// countIn counts the resident pages among pages (SQLite's page numbers,
// from 1), or of the whole file when pages is nil.
func countIn(in []bool, pages []int64) int {
	n := 0
	if pages == nil {
		for _, r := range in {
			if r {
				n++
			}
		}
		return n
	}
	for _, p := range pages {
		if p >= 1 && int(p) <= len(in) && in[p-1] {
			n++
		}
	}
	return n
}

// TestWarm_ColdStartReadsProofBTrees: opened on a file whose pages are out
// of the page cache (a reboot), the store reads every page of the b-trees
// a proof reads (runs, log_nodes) into it; with Options.NoWarm it reads
// next to none of them, leaving each first proof to read its pages from the
// disk. What the page cache holds is the kernel's to decide (memory
// pressure and other processes evict pages at any moment), so this runs
// only with RUNSEAL_MEASURE=1; TestWarm_WalksProofBTreesOffTheMap asserts,
// in every run, what the warm asks for and how.
func TestWarm_ColdStartReadsProofBTrees(t *testing.T) {
	measure.Only(t, "the page cache's residency of the proof b-trees (mincore)")
	ctx := context.Background()
	path, _ := sealedLog(t, warmRuns)
	pages := proofPages(t, path)
	for _, warm := range []bool{false, true} {
		evict(t, path)
		s, err := Open(ctx, path, Options{NoWarm: !warm})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := s.WaitWarm(ctx)
		if err != nil {
			t.Fatal(err)
		}
		in := countIn(resident(t, path), pages)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if rep.Err != nil {
			t.Fatalf("warm %v: %v", warm, rep.Err)
		}
		switch {
		case warm && (in != len(pages) || rep.Pages != int64(len(pages))):
			t.Errorf("warm: %d of the proof b-trees' %d pages in the page cache, the warm says it read %d; want all", in, len(pages), rep.Pages)
		case !warm && (in > len(pages)/4 || rep.Method != "" || rep.Pages != 0):
			t.Errorf("NoWarm: %d of the proof b-trees' %d pages in the page cache (report %+v); want next to none", in, len(pages), rep)
		}
	}
}
