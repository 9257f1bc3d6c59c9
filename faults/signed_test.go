package faults

import (
	"bytes"
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/store"
)

// signedStore is what checkSigned reads of a journal store.
type signedStore interface {
	Checkpoint(ctx context.Context) (store.Checkpoint, error)
	CheckpointAt(ctx context.Context, size uint64) (store.Checkpoint, error)
	SignedCheckpointAt(ctx context.Context, size uint64) (*store.SignedCheckpoint, error)
	LatestCheckpoint(ctx context.Context) (*store.SignedCheckpoint, error)
}

// checkSigned fails t unless every signed checkpoint kept is of the log as
// it stands: its root is the log's root at its size, so no checkpoint of
// a history that was lost was signed. It returns the sizes signed.
func checkSigned(t *testing.T, s signedStore) map[uint64][]byte {
	t.Helper()
	ctx := context.Background()
	cur, err := s.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	latest, err := s.LatestCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64][]byte{}
	if latest == nil {
		return out
	}
	if latest.Size > cur.Size {
		t.Fatalf("a checkpoint of size %d is signed, but the log has %d leaves", latest.Size, cur.Size)
	}
	for size := uint64(1); size <= latest.Size; size++ {
		sc, err := s.SignedCheckpointAt(ctx, size)
		if err != nil {
			t.Fatal(err)
		}
		if sc == nil {
			continue
		}
		at, err := s.CheckpointAt(ctx, size)
		if err != nil {
			t.Fatal(err)
		}
		if at.Root != sc.Root {
			t.Fatalf("the checkpoint signed at size %d has a root that is not the log's", size)
		}
		out[size] = body(sc.Note)
	}
	return out
}

// body returns the checkpoint body of a signed note (up to the blank line).
func body(n []byte) []byte {
	if i := bytes.Index(n, []byte("\n\n")); i >= 0 {
		return n[:i+1]
	}
	return n
}

// sizeOf returns the size line of a checkpoint body.
func sizeOf(t *testing.T, b []byte) uint64 {
	t.Helper()
	lines := bytes.SplitN(b, []byte("\n"), 3)
	if len(lines) < 3 {
		t.Fatalf("not a checkpoint: %q", b)
	}
	n, err := strconv.ParseUint(string(lines[1]), 10, 64)
	if err != nil {
		t.Fatalf("checkpoint size %q: %v", lines[1], err)
	}
	return n
}

// watcher polls a server's latest signed checkpoint, as a client of the
// log would, and remembers each body by size: across restarts, a size seen
// twice must be the same checkpoint, and the latest size must never go
// back.
type watcher struct {
	mu     sync.Mutex
	bodies map[uint64][]byte
	last   uint64
	errs   []string
}

func newWatcher() *watcher { return &watcher{bodies: map[uint64][]byte{}} }

// see records one checkpoint read from the log; what it breaks is kept.
func (w *watcher) see(t *testing.T, n []byte) {
	b := body(n)
	size := sizeOf(t, b)
	w.mu.Lock()
	defer w.mu.Unlock()
	if have, ok := w.bodies[size]; ok && !bytes.Equal(have, b) {
		w.errs = append(w.errs, "two different checkpoints signed for size "+strconv.FormatUint(size, 10)+":\n"+string(have)+"--\n"+string(b))
	}
	w.bodies[size] = b
	if size < w.last {
		w.errs = append(w.errs, "the latest checkpoint went back from size "+strconv.FormatUint(w.last, 10)+" to "+strconv.FormatUint(size, 10))
	}
	w.last = max(w.last, size)
}

// poll reads c's latest checkpoint every interval until stop is closed.
func (w *watcher) poll(t *testing.T, c *api.Client, stop <-chan struct{}) {
	tk := time.NewTicker(20 * time.Millisecond)
	defer tk.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tk.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		n, err := c.Checkpoint(ctx)
		cancel()
		if err == nil {
			w.see(t, n)
		}
	}
}

// check fails t with everything the watcher saw broken, and checks the
// kept checkpoints agree with what was seen.
func (w *watcher) check(t *testing.T, kept map[uint64][]byte) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.errs {
		t.Error(e)
	}
	for size, b := range w.bodies {
		if k, ok := kept[size]; ok && !bytes.Equal(k, b) {
			t.Errorf("size %d: the checkpoint served was\n%s, the one kept is\n%s", size, b, k)
		}
	}
}
