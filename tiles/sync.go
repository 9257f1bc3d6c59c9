package tiles

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/transparency-dev/merkle/compact"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/log"
)

// Names Sync keeps in the directory besides the layout.
const (
	lockName    = ".tiles-lock"
	stagingName = ".tiles-tmp" // temporary files, renamed into place
)

// SyncResult says what one Sync did.
type SyncResult struct {
	From      uint64 `json:"from"`      // the directory's checkpoint size before (0 if none)
	To        uint64 `json:"to"`        // its checkpoint size after
	Witnessed uint64 `json:"witnessed"` // the size of checkpoint-witnessed, 0 if none
	Tiles     int    `json:"tiles"`     // hash tiles written
	Bundles   int    `json:"bundles"`   // entry bundles written
	Bytes     int64  `json:"bytes"`     // bytes written, checkpoints included
}

// SyncOptions tunes Sync.
type SyncOptions struct {
	// OnWrite, if set, is called after each file is renamed into place,
	// with its path under the directory (for progress and tests).
	OnWrite func(path string)
	// Within, if set, is a directory the synced one must lie beneath
	// (serve --tiles-dir's, which holds a directory per tenant): the
	// synced directory is created and reached from it as Sync reaches its
	// files, so a link on the way that leads out of Within is refused too.
	Within string
}

// Sync writes the layout of the newest signed checkpoint into dir, or
// brings it up to date from the checkpoint dir already holds, and returns
// what it did.
//
// Each file is written to a temporary file, fsynced and renamed into
// place; every directory it touched is fsynced; only then is the
// checkpoint renamed into place (and its directory fsynced), so a crash at
// any point leaves a directory whose checkpoint is backed by every tile it
// implies. Before the checkpoint moves, each new full tile is checked to
// hash to the hash its parent tile records, each entry to its level-0
// hash, and the partial tiles to the checkpoint's root: a store whose
// nodes disagree with its signed root publishes nothing.
//
// A directory holding another log's checkpoint, or a larger one than the
// store's newest, is refused with ErrDiverged and left as it is.
//
// Every file Sync reads or writes is reached through an os.Root of dir, so
// nothing is read or written outside dir: a symbolic link inside it (a
// subdirectory such as tile/0, the staging directory, the lock, a
// checkpoint) that leads out of it is refused with an *OutsideError
// (ErrOutside) naming the link, and nothing is written through it.
func Sync(ctx context.Context, l *Log, dir string, opts SyncOptions) (SyncResult, error) {
	var res SyncResult
	w, err := openDirWriter(dir, opts.Within, opts.OnWrite)
	if err != nil {
		return res, err
	}
	defer w.close()
	unlock, err := lockFile(w.root, lockName)
	if err != nil {
		return res, w.fail("taking the lock", lockName, err)
	}
	defer unlock()
	w.cleanStaging()

	sc, err := l.Checkpoint(ctx)
	if err != nil {
		return res, err
	}
	cp, err := noteCheckpoint(sc.Note)
	if err != nil {
		return res, fmt.Errorf("tiles: sync: the store's newest checkpoint: %w", err)
	}
	from, err := l.dirSize(ctx, w, cp)
	if err != nil {
		return res, err
	}
	res.From, res.To = from, cp.Size
	wsc, err := l.Witnessed(ctx)
	if err != nil && !errors.Is(err, ErrNoCheckpoint) {
		return res, err
	}
	if from == cp.Size && w.holds(CheckpointPath, sc.Note) && (wsc == nil || w.holds(WitnessedPath, wsc.Note)) {
		return res, nil // up to date: nothing is rewritten
	}

	if err := l.writeTiles(ctx, w, cp, from, &res); err != nil {
		return res, err
	}
	if wsc != nil && wsc.Size <= cp.Size {
		// The witnessed checkpoint's own partial tiles, which the newest
		// checkpoint does not imply by width (they are immutable, so old
		// ones are never rewritten).
		for _, r := range widthRefs(wsc.Size) {
			if _, err := w.root.Stat(filepath.FromSlash(r.Path())); err == nil {
				continue
			}
			hs, err := l.Hashes(ctx, r)
			if err != nil {
				return res, err
			}
			if err := w.write(r.Path(), marshal(r, hs)); err != nil {
				return res, err
			}
		}
	}
	if err := w.syncDirs(); err != nil {
		return res, err
	}
	if wsc != nil && wsc.Size <= cp.Size {
		if err := w.write(WitnessedPath, wsc.Note); err != nil {
			return res, err
		}
		res.Witnessed = wsc.Size
	}
	if err := w.write(CheckpointPath, sc.Note); err != nil {
		return res, err
	}
	if err := w.syncDirs(); err != nil {
		return res, err
	}
	res.Bytes = w.bytes
	return res, nil
}

func marshal(r Ref, hs []log.Hash) []byte {
	if r.Entries() {
		return MarshalEntryBundle(hs)
	}
	return MarshalHashTile(hs)
}

// widthRefs lists the partial tiles and bundle a tree of size has.
func widthRefs(size uint64) []Ref {
	out := edgeRefs(size)
	if w := int(size % Width); w != 0 {
		out = append(out, Ref{Level: EntriesLevel, Index: size / Width, W: w})
	}
	return out
}

// noteCheckpoint parses the checkpoint body of a signed note (its
// signatures were checked when it was stored or are checked by readers).
func noteCheckpoint(n []byte) (checkpoint.Checkpoint, error) {
	i := bytes.Index(n, []byte("\n\n"))
	if i < 0 {
		return checkpoint.Checkpoint{}, fmt.Errorf("%w: a signed note without its blank line", ErrMalformed)
	}
	return checkpoint.Parse(n[:i+1])
}

// dirSize returns the size of the checkpoint w's directory holds, after
// checking it is a checkpoint of this log: same origin, not larger, the
// log's root at its size.
func (l *Log) dirSize(ctx context.Context, w *dirWriter, want checkpoint.Checkpoint) (uint64, error) {
	dir := w.dir
	b, err := w.root.ReadFile(CheckpointPath)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, w.fail("reading", CheckpointPath, err)
	}
	have, err := noteCheckpoint(b)
	if err != nil {
		return 0, fmt.Errorf("%w: %s/checkpoint does not parse: %v", ErrDiverged, dir, err)
	}
	if have.Origin != want.Origin {
		return 0, fmt.Errorf("%w: %s/checkpoint is for origin %q, the store's log is %q", ErrDiverged, dir, have.Origin, want.Origin)
	}
	if have.Size > want.Size {
		return 0, fmt.Errorf("%w: %s/checkpoint has size %d, beyond the store's newest signed size %d", ErrDiverged, dir, have.Size, want.Size)
	}
	root, err := log.Root(ctx, nodeReader{l.src}, have.Size)
	if err != nil {
		return 0, fmt.Errorf("tiles: sync: the store's root at the directory's size %d: %w", have.Size, err)
	}
	if root != have.Root {
		return 0, fmt.Errorf("%w: %s/checkpoint has another root at size %d than the store's log", ErrDiverged, dir, have.Size)
	}
	return have.Size, nil
}

// nodeReader reads single nodes through Source.LogNodes, for log.Root.
type nodeReader struct{ src Source }

func (n nodeReader) ReadNodes(ctx context.Context, ids []compact.NodeID) ([]log.Hash, error) {
	out := make([]log.Hash, len(ids))
	for i, id := range ids {
		ds, err := n.src.LogNodes(ctx, id.Level, id.Index, id.Index+1)
		if err != nil {
			return nil, err
		}
		if len(ds) != 1 {
			return nil, &log.NodeNotFoundError{ID: id}
		}
		out[i] = log.Hash(ds[0])
	}
	return out, nil
}

// writeTiles writes every tile and bundle of cp from the directory's size
// from onwards, top level first so each full tile is checked against its
// parent, which is already in hand.
func (l *Log) writeTiles(ctx context.Context, w *dirWriter, cp checkpoint.Checkpoint, from uint64, res *SyncResult) error {
	refs := Refs(cp.Size, from)
	byLevel := map[int][]Ref{}
	for _, r := range refs {
		byLevel[r.Level] = append(byLevel[r.Level], r)
	}
	parents := map[uint64][]log.Hash{} // the level above's tiles, by index
	edge := map[int][]log.Hash{}
	put := func(r Ref, hs []log.Hash, parents map[uint64][]log.Hash) error {
		if err := checkAgainstParent(r, hs, parents, cp.Size); err != nil {
			return err
		}
		if err := w.write(r.Path(), marshal(r, hs)); err != nil {
			return err
		}
		if r.Entries() {
			res.Bundles++
		} else {
			res.Tiles++
		}
		return nil
	}
	for level := Levels(cp.Size) - 1; level >= 0; level-- {
		cur := map[uint64][]log.Hash{}
		for _, r := range byLevel[level] {
			if err := ctx.Err(); err != nil {
				return err
			}
			hs, err := l.Hashes(ctx, r)
			if err != nil {
				return err
			}
			if err := put(r, hs, parents); err != nil {
				return err
			}
			if !r.Full() {
				edge[level] = hs
			}
			if level > 0 {
				cur[r.Index] = hs
				continue
			}
			// Each bundle right after its level-0 tile, which checks it,
			// so level 0 is never held whole.
			b := Ref{Level: EntriesLevel, Index: r.Index, W: r.W}
			es, err := l.Hashes(ctx, b)
			if err != nil {
				return err
			}
			if err := put(b, es, map[uint64][]log.Hash{r.Index: hs}); err != nil {
				return err
			}
		}
		parents = cur
	}
	root, err := rootFromEdge(cp.Size, edge)
	if err != nil {
		return fmt.Errorf("tiles: sync: %w", err)
	}
	if root != cp.Root {
		return tileErr(ErrMismatch, refList(edgeRefs(cp.Size)), "the store's partial tiles give root %x, its checkpoint of size %d says %x; nothing was published", root[:8], cp.Size, cp.Root[:8])
	}
	return nil
}

// checkAgainstParent checks a tile or bundle against the level above it,
// when that level was written in this sync: a full hash tile must hash to
// its parent's hash, each entry to its level-0 hash. Partial hash tiles
// are checked by the root instead.
func checkAgainstParent(r Ref, hs []log.Hash, parents map[uint64][]log.Hash, size uint64) error {
	if r.Entries() {
		lvl0, ok := parents[r.Index]
		if !ok || len(lvl0) != len(hs) {
			return tileErr(ErrMismatch, r.Path(), "no level-0 tile of %d hashes beside it", len(hs))
		}
		for i, e := range hs {
			if log.LeafHash(e) != lvl0[i] {
				return tileErr(ErrMismatch, r.Path(), "entry %d does not hash to its level-0 tile hash", i)
			}
		}
		return nil
	}
	if !r.Full() {
		return nil
	}
	p, ok := parents[r.Index/Width]
	if !ok || uint64(len(p)) <= r.Index%Width {
		return tileErr(ErrMismatch, r.Path(), "its parent tile at level %d does not record it (size %d)", r.Level+1, size)
	}
	if got, want := subtreeHash(hs), p[r.Index%Width]; got != want {
		return tileErr(ErrMismatch, r.Path(), "hashes to %x, its parent tile records %x", got[:8], want[:8])
	}
	return nil
}

// dirWriter writes files atomically into a directory, through an os.Root
// of it so that no path leaves it, and remembers the directories (relative
// to it, "." for itself) whose entries changed, to fsync them.
type dirWriter struct {
	dir     string   // the directory as named, for messages
	root    *os.Root // every read and write goes through it
	touched map[string]bool
	bytes   int64
	onWrite func(string)
}

// openDirWriter creates dir if missing and its staging directory, and
// opens the root every later access goes through: dir's own, or, when
// within is set, dir's reached from within's root.
func openDirWriter(dir, within string, onWrite func(string)) (*dirWriter, error) {
	root, err := openSyncRoot(dir, within)
	if err != nil {
		return nil, err
	}
	w := &dirWriter{dir: dir, root: root, touched: map[string]bool{}, onWrite: onWrite}
	if err := root.MkdirAll(stagingName, 0o755); err != nil {
		err = w.fail("creating", stagingName, err)
		root.Close()
		return nil, err
	}
	return w, nil
}

func (w *dirWriter) close() { w.root.Close() }

// openSyncRoot creates dir if missing and opens it as a root; when within
// is set, through within's root, which dir must lie beneath.
func openSyncRoot(dir, within string) (*os.Root, error) {
	if within == "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("tiles: sync: %w", err)
		}
		root, err := os.OpenRoot(dir)
		if err != nil {
			return nil, fmt.Errorf("tiles: sync: %w", err)
		}
		return root, nil
	}
	rel, err := filepath.Rel(within, dir)
	if err != nil || !filepath.IsLocal(rel) {
		return nil, fmt.Errorf("tiles: sync: %s is not beneath %s", dir, within)
	}
	if err := os.MkdirAll(within, 0o755); err != nil {
		return nil, fmt.Errorf("tiles: sync: %w", err)
	}
	outer, err := os.OpenRoot(within)
	if err != nil {
		return nil, fmt.Errorf("tiles: sync: %w", err)
	}
	defer outer.Close()
	ow := &dirWriter{dir: within, root: outer}
	if err := outer.MkdirAll(rel, 0o755); err != nil {
		return nil, ow.fail("creating", rel, err)
	}
	root, err := outer.OpenRoot(rel)
	if err != nil {
		return nil, ow.fail("opening", rel, err)
	}
	return root, nil
}

// fail wraps err, from doing what to name (relative to the directory): an
// *OutsideError when a symbolic link on name's way leads out of the
// directory (os.Root refused it), else the error with the path.
func (w *dirWriter) fail(doing, name string, err error) error {
	if link, target, ok := w.linkOnWay(name); ok {
		return &OutsideError{Dir: w.dir, Link: link, Target: target, Err: err}
	}
	return fmt.Errorf("tiles: sync: %s %s: %w", doing, filepath.Join(w.dir, name), err)
}

// linkOnWay finds the first symbolic link among name's components that
// leads out of the directory, reading each through the root without
// following it, and returns it (relative) with its target.
func (w *dirWriter) linkOnWay(name string) (link, target string, ok bool) {
	parts := strings.Split(filepath.ToSlash(filepath.Clean(name)), "/")
	for i := range parts {
		p := filepath.Join(parts[:i+1]...)
		fi, err := w.root.Lstat(p)
		if err != nil {
			return "", "", false
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		t, err := w.root.Readlink(p)
		if err != nil {
			return "", "", false
		}
		if _, err := w.root.Stat(p); err != nil {
			return p, t, true // following it leaves the root (or leads nowhere)
		}
	}
	return "", "", false
}

func (w *dirWriter) cleanStaging() {
	d, err := w.root.Open(stagingName)
	if err != nil {
		return
	}
	ents, _ := d.ReadDir(-1)
	d.Close()
	for _, e := range ents {
		w.root.Remove(filepath.Join(stagingName, e.Name()))
	}
}

// write puts data at path (slash-separated, under the directory):
// temporary file, fsync, rename. The rename's directory is fsynced later,
// by syncDirs.
func (w *dirWriter) write(path string, data []byte) error {
	target := filepath.FromSlash(path)
	parent := filepath.Dir(target)
	if err := w.mkdirs(parent); err != nil {
		return err
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := filepath.Join(stagingName, hex.EncodeToString(rnd[:]))
	f, err := w.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return w.fail("writing", tmp, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = w.root.Rename(tmp, target)
	}
	if err != nil {
		w.root.Remove(tmp)
		return w.fail("writing", target, err)
	}
	w.touched[parent] = true
	w.touched[stagingName] = true
	w.bytes += int64(len(data))
	if w.onWrite != nil {
		w.onWrite(path)
	}
	return nil
}

// mkdirs creates p (relative) and its missing parents, marking each parent
// whose entries changed.
func (w *dirWriter) mkdirs(p string) error {
	if p == "." {
		return nil
	}
	if fi, err := w.root.Stat(p); err == nil && fi.IsDir() {
		return nil
	}
	if err := w.mkdirs(filepath.Dir(p)); err != nil {
		return err
	}
	if err := w.root.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return w.fail("creating", p, err)
	}
	w.touched[filepath.Dir(p)] = true
	return nil
}

// syncDirs fsyncs every directory whose entries changed, deepest first.
func (w *dirWriter) syncDirs() error {
	ds := make([]string, 0, len(w.touched))
	for d := range w.touched {
		ds = append(ds, d)
	}
	sort.Slice(ds, func(i, j int) bool { return len(ds[i]) > len(ds[j]) })
	for _, d := range ds {
		f, err := w.root.Open(d)
		if err != nil {
			return w.fail("opening", d, err)
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return fmt.Errorf("tiles: sync: fsync %s: %w", filepath.Join(w.dir, d), err)
		}
	}
	clear(w.touched)
	return nil
}

// holds reports whether name, under the directory, holds exactly b.
func (w *dirWriter) holds(name string, b []byte) bool {
	have, err := w.root.ReadFile(name)
	return err == nil && bytes.Equal(have, b)
}
