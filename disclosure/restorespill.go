package disclosure

import (
	"bufio"
	"bytes"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"

	"github.com/runseal/runseal/store"
)

// Restore's first reading must know, before it writes, that the export's
// log indexes are a permutation and that no admission key is claimed twice.
// Runs come in run-id order, so both facts span the whole file. They are
// kept on disk, in unlinked temporary files, so a restore's memory does not
// grow with the export: logSlots is a file addressed by log index, and
// keySpill an external sort of admission-key digests.

// spillFile creates an unlinked temporary file (on systems that allow
// removing an open file; elsewhere it is removed when closed).
func spillFile(pattern string) (*os.File, error) {
	f, err := os.CreateTemp("", pattern)
	if err != nil {
		return nil, fmt.Errorf("restore: temporary file: %w", err)
	}
	_ = os.Remove(f.Name())
	return f, nil
}

func closeSpill(f *os.File) {
	name := f.Name()
	_ = f.Close()
	_ = os.Remove(name)
}

// slotSize is the bytes of one log slot: run (16), leaf (32), epoch (8),
// outcome (1: its position in store.SealingOutcomes plus one; 0 is empty),
// padding.
const slotSize = 64

// logSlot is what sealing one leaf again needs.
type logSlot struct {
	run     store.RunID
	leaf    store.Digest
	epoch   store.Epoch
	outcome string
}

// logSlots holds one slot per log index in a sparse file: writing is at the
// slot's offset, and reading it in order yields the log's leaves in order.
type logSlots struct {
	f *os.File
}

func newLogSlots() (*logSlots, error) {
	f, err := spillFile("runseal-restore-log-*")
	if err != nil {
		return nil, err
	}
	return &logSlots{f: f}, nil
}

func (s *logSlots) close() {
	if s != nil {
		closeSpill(s.f)
	}
}

// put records the run holding index, refusing a second holder.
func (s *logSlots) put(index uint64, sl logSlot) error {
	if index >= math.MaxInt64/slotSize {
		return &FormatError{Detail: fmt.Sprintf("run %s claims log index %d, beyond any log a restore can rebuild", sl.run, index)}
	}
	code := slices.Index(store.SealingOutcomes, sl.outcome)
	if code < 0 {
		return &FormatError{Detail: fmt.Sprintf("run %s is sealed but its latest conclusion %q does not seal", sl.run, sl.outcome)}
	}
	off := int64(index) * slotSize
	var b [slotSize]byte
	n, err := s.f.ReadAt(b[:], off)
	switch {
	case err == nil && b[56] != 0:
		return &FormatError{Detail: fmt.Sprintf("log index %d is claimed by runs %s and %s", index, store.RunID(b[:16]), sl.run)}
	case err != nil && !errors.Is(err, io.EOF):
		return fmt.Errorf("restore: read log slot %d: %w", index, err)
	case err != nil && n >= 57 && b[56] != 0:
		return &FormatError{Detail: fmt.Sprintf("log index %d is claimed by runs %s and %s", index, store.RunID(b[:16]), sl.run)}
	}
	b = [slotSize]byte{}
	copy(b[:16], sl.run[:])
	copy(b[16:48], sl.leaf[:])
	binary.BigEndian.PutUint64(b[48:56], uint64(sl.epoch))
	b[56] = byte(code + 1)
	if _, err := s.f.WriteAt(b[:], off); err != nil {
		return fmt.Errorf("restore: write log slot %d: %w", index, err)
	}
	return nil
}

// each calls fn for the slots 0 to size-1 in order; an empty slot is a
// *FormatError.
func (s *logSlots) each(size uint64, fn func(index uint64, sl *logSlot) error) error {
	if size == 0 {
		return nil
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("restore: rewind log slots: %w", err)
	}
	br := bufio.NewReaderSize(s.f, 64<<10)
	var b [slotSize]byte
	var sl logSlot
	for i := uint64(0); i < size; i++ {
		if _, err := io.ReadFull(br, b[:]); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("restore: read log slot %d: %w", i, err)
		} else if err != nil || b[56] == 0 || int(b[56]) > len(store.SealingOutcomes) {
			return &FormatError{Detail: fmt.Sprintf("log index %d is held by no run", i)}
		}
		sl = logSlot{run: store.RunID(b[:16]), leaf: store.Digest(b[16:48]), epoch: store.Epoch(binary.BigEndian.Uint64(b[48:56])), outcome: store.SealingOutcomes[b[56]-1]}
		if err := fn(i, &sl); err != nil {
			return err
		}
	}
	return nil
}

// keyEntry is an admission key's digest followed by the run claiming it.
type keyEntry [48]byte

const (
	keyChunk = 4096 // entries sorted in memory before they are written out
	keyFanIn = 32   // sorted files merged into one when there are this many
)

// keySpill finds an admission key claimed twice in an export with an
// external merge sort: memory is keyChunk entries plus keyFanIn read
// buffers, whatever the number of keys.
type keySpill struct {
	chunk []keyEntry
	files []*os.File // each sorted
}

func (k *keySpill) close() {
	for _, f := range k.files {
		closeSpill(f)
	}
	k.files = nil
}

func (k *keySpill) add(d store.Digest, run store.RunID) error {
	if k.chunk == nil {
		k.chunk = make([]keyEntry, 0, keyChunk)
	}
	var e keyEntry
	copy(e[:32], d[:])
	copy(e[32:], run[:])
	k.chunk = append(k.chunk, e)
	if len(k.chunk) < keyChunk {
		return nil
	}
	return k.spill()
}

func compareEntries(a, b keyEntry) int { return bytes.Compare(a[:], b[:]) }

// spill writes the chunk as a sorted file, and merges the files into one
// when there are keyFanIn of them, so at most keyFanIn are ever open.
func (k *keySpill) spill() error {
	if len(k.chunk) == 0 {
		return nil
	}
	slices.SortFunc(k.chunk, compareEntries)
	f, err := spillFile("runseal-restore-keys-*")
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 64<<10)
	for i := range k.chunk {
		bw.Write(k.chunk[i][:])
	}
	if err := bw.Flush(); err != nil {
		closeSpill(f)
		return fmt.Errorf("restore: write sorted keys: %w", err)
	}
	k.chunk = k.chunk[:0]
	k.files = append(k.files, f)
	if len(k.files) < keyFanIn {
		return nil
	}
	out, err := spillFile("runseal-restore-keys-*")
	if err != nil {
		return err
	}
	bw = bufio.NewWriterSize(out, 64<<10)
	if err := k.merge(func(e *keyEntry) error { _, err := bw.Write(e[:]); return err }); err != nil {
		closeSpill(out)
		return err
	}
	if err := bw.Flush(); err != nil {
		closeSpill(out)
		return fmt.Errorf("restore: write sorted keys: %w", err)
	}
	k.close()
	k.files = []*os.File{out}
	return nil
}

// duplicate returns the first key digest claimed twice and the two runs, in
// digest order.
func (k *keySpill) duplicate() (d store.Digest, a, b store.RunID, found bool, err error) {
	if err := k.spill(); err != nil {
		return d, a, b, false, err
	}
	var prev keyEntry
	have := false
	errFound := errors.New("found")
	err = k.merge(func(e *keyEntry) error {
		if have && bytes.Equal(prev[:32], e[:32]) {
			d, a, b = store.Digest(e[:32]), store.RunID(prev[32:]), store.RunID(e[32:])
			return errFound
		}
		prev, have = *e, true
		return nil
	})
	if errors.Is(err, errFound) {
		return d, a, b, true, nil
	}
	return d, a, b, false, err
}

// merge streams the entries of every sorted file in order.
func (k *keySpill) merge(fn func(*keyEntry) error) error {
	h := make(keyCursorHeap, 0, len(k.files))
	for _, f := range k.files {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("restore: rewind sorted keys: %w", err)
		}
		c := &keyCursor{r: bufio.NewReaderSize(f, 16<<10)}
		ok, err := c.next()
		if err != nil {
			return err
		}
		if ok {
			h = append(h, c)
		}
	}
	heap.Init(&h)
	for len(h) > 0 {
		c := h[0]
		if err := fn(&c.cur); err != nil {
			return err
		}
		ok, err := c.next()
		if err != nil {
			return err
		}
		if ok {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
	return nil
}

type keyCursor struct {
	r   *bufio.Reader
	cur keyEntry
}

func (c *keyCursor) next() (bool, error) {
	_, err := io.ReadFull(c.r, c.cur[:])
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, io.EOF):
		return false, nil
	}
	return false, fmt.Errorf("restore: read sorted keys: %w", err)
}

type keyCursorHeap []*keyCursor

func (h keyCursorHeap) Len() int           { return len(h) }
func (h keyCursorHeap) Less(i, j int) bool { return compareEntries(h[i].cur, h[j].cur) < 0 }
func (h keyCursorHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *keyCursorHeap) Push(x any)        { *h = append(*h, x.(*keyCursor)) }
func (h *keyCursorHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
