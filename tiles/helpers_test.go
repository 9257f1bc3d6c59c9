package tiles

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/compact"
	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/internal/journaltest"
	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// memLog is a Source over an in-memory tree, signing checkpoints with a
// real note key, for tests that need many leaves quickly.
type memLog struct {
	mu        sync.Mutex
	nodes     *log.MemStore
	leaves    []log.Hash
	origin    string
	signer    note.Signer
	verifier  note.Verifier
	vkey      string
	latest    *store.SignedCheckpoint
	witnessed *store.SignedCheckpoint
	salt      byte // a non-zero salt makes another tree (a fork)
}

func newMemLog(t testing.TB) *memLog {
	t.Helper()
	const origin = "example.com/runseal/test"
	l := journaltest.NewLog(t, origin)
	return &memLog{nodes: &log.MemStore{}, origin: origin, signer: l.Signer, verifier: l.Verifier, vkey: l.VKey}
}

// leafValue is the deterministic leaf value at index i.
func leafValue(i uint64) log.Hash {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], i)
	return sha256.Sum256(b[:])
}

// grow appends n leaves and signs a checkpoint of the new size.
func (m *memLog) grow(t testing.TB, n int) store.SignedCheckpoint {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	ctx := context.Background()
	size := uint64(len(m.leaves))
	add := make([]log.Hash, n)
	for i := range add {
		add[i] = leafValue(size + uint64(i))
		add[i][0] ^= m.salt
	}
	root, err := log.Append(ctx, m.nodes, size, add...)
	if err != nil {
		t.Fatal(err)
	}
	m.leaves = append(m.leaves, add...)
	sc := m.signLocked(t, uint64(len(m.leaves)), root)
	m.latest = &sc
	return sc
}

func (m *memLog) signLocked(t testing.TB, size uint64, root log.Hash) store.SignedCheckpoint {
	t.Helper()
	cp := checkpoint.Checkpoint{Origin: m.origin, Size: size, Root: root}
	msg, err := note.Sign(&note.Note{Text: string(cp.Marshal())}, m.signer)
	if err != nil {
		t.Fatal(err)
	}
	return store.SignedCheckpoint{Size: size, Root: store.Digest(root), Note: msg, SignedAt: time.Now()}
}

// witness marks the checkpoint of the current size as witnessed.
func (m *memLog) witness() {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := *m.latest
	m.witnessed = &w
}

func (m *memLog) size() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return uint64(len(m.leaves))
}

func (m *memLog) root(t testing.TB, size uint64) log.Hash {
	t.Helper()
	r, err := log.Root(context.Background(), m.nodes, size)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (m *memLog) LatestCheckpoint(context.Context) (*store.SignedCheckpoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.latest, nil
}

func (m *memLog) LatestWitnessed(context.Context) (*store.SignedCheckpoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.witnessed, nil
}

func (m *memLog) LogLeaves(_ context.Context, start, end uint64) ([]store.Digest, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if end < start || end > uint64(len(m.leaves)) {
		return nil, &store.NotFoundError{What: fmt.Sprintf("leaves [%d, %d)", start, end)}
	}
	out := make([]store.Digest, 0, end-start)
	for _, l := range m.leaves[start:end] {
		out = append(out, store.Digest(l))
	}
	return out, nil
}

func (m *memLog) LogNodes(ctx context.Context, level uint, start, end uint64) ([]store.Digest, error) {
	out := make([]store.Digest, 0, end-start)
	for i := start; i < end; i++ {
		hs, err := m.nodes.ReadNodes(ctx, []compact.NodeID{compact.NewNodeID(level, i)})
		if err != nil {
			return nil, err
		}
		out = append(out, store.Digest(hs[0]))
	}
	return out, nil
}

// serveMem serves m's layout over HTTP at the root of a test server.
func serveMem(t testing.TB, m *memLog) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(NewHandler(NewLog(m), nil))
	t.Cleanup(srv.Close)
	return srv
}
