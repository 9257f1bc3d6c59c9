package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"math/bits"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/log"
)

// LogReport says what a whole-log check covered, so that "intact" has a
// stated scope. The counts are of what was checked and found sound; on a
// failure they stop where the check stopped.
type LogReport struct {
	// Size is the log's size: its leaves, each held by exactly one sealed
	// run whose leaf is its terminal chain hash.
	Size uint64 `json:"log_size"`
	// Sealed is how many sealed runs were matched to their leaf. It equals
	// Size when the log is sound.
	Sealed uint64 `json:"sealed"`
	// Nodes is how many stored Merkle nodes were recomputed from the leaves
	// (the leaf hashes and every complete subtree): 2*Size - popcount(Size).
	Nodes uint64 `json:"nodes"`
	// Checkpoints is how many stored signed checkpoints were checked: the
	// note's body names the log's origin, the stored size and root, the root
	// is the log's root at that size, and each is consistent with the one
	// before it. The note's signature is not checked here: the store holds no
	// key.
	Checkpoints uint64 `json:"checkpoints"`
	// Witnessed is how many witnessed checkpoint notes were checked: each
	// names this log and a size with a signed checkpoint, and carries that
	// checkpoint's root. Cosignatures are not checked here.
	Witnessed uint64 `json:"witnessed"`
}

// LogVerifier is a store that can check its whole Merkle log against its
// runs and its signed checkpoints. Per-run chains are checked by
// Journal.Verify; VerifyLog checks what no single run can: that the log
// commits to exactly the sealed runs, node by node.
type LogVerifier interface {
	// VerifyLog checks, in one read snapshot, streaming and in constant
	// memory: every stored node equals the node recomputed from the leaves
	// and no other node is stored; every leaf is the terminal hash of the
	// one sealed run that holds its index; every sealed run holds an index;
	// every stored signed checkpoint commits to the log's root at its size,
	// and consecutive ones are consistent. A failure is a *CorruptError
	// (errors.Is ErrCorrupt); the report says what passed before it.
	VerifyLog(ctx context.Context) (LogReport, error)
}

// A LeafRow is one run holding a log index, as a backend reads it for
// VerifyLog: the run's seal columns, its head hash, and the level-0 node
// stored at its index (nil when none is stored).
type LeafRow struct {
	Index  int64
	Run    string
	Sealed bool   // the run has a sealed outcome
	Leaf   []byte // the leaf the run says it put in the log
	Head   []byte // the run's head hash
	Node   []byte // the stored level-0 node at Index, or nil
}

// A NodeRow is one stored interior node with its two children as stored
// (nil when a child is missing).
type NodeRow struct {
	Index       int64
	Hash        []byte
	Left, Right []byte
}

// A SignedRow is one stored signed checkpoint.
type SignedRow struct {
	Size int64
	Root []byte
	Note []byte
}

// LogSource is what a backend exposes to AuditLog, all inside one read
// snapshot. Each streaming method calls fn for every row in the order
// stated and stops at fn's first error, returning it.
type LogSource interface {
	log.NodeReader
	// LogSize returns the log's recorded size.
	LogSize(ctx context.Context) (uint64, error)
	// Leaves streams every run with a log index, by index ascending.
	Leaves(ctx context.Context, fn func(LeafRow) error) error
	// Unlogged streams the runs that are sealed but hold no log index.
	Unlogged(ctx context.Context, fn func(run string) error) error
	// Unlisted streams the runs that have records but no row among the
	// journal's runs, by run ascending: chains that a walk over the runs
	// would never check.
	Unlisted(ctx context.Context, fn func(run string) error) error
	// LevelCounts streams (level, stored nodes at that level), by level.
	LevelCounts(ctx context.Context, fn func(level, count int64) error) error
	// Level streams the stored nodes of one level above 0, by index
	// ascending, each with its stored children.
	Level(ctx context.Context, level int, fn func(NodeRow) error) error
	// SignedCheckpoints returns up to limit signed checkpoints with size
	// above after, by size ascending (a page, so that the source's cursor
	// is closed before the caller reads nodes).
	SignedCheckpoints(ctx context.Context, after int64, limit int) ([]SignedRow, error)
	// Witnessed returns up to limit witnessed checkpoints with size above
	// after, by size ascending, each with the root of the signed checkpoint
	// kept at its size (nil when none is kept).
	Witnessed(ctx context.Context, after int64, limit int) ([]SignedRow, error)
}

// AuditLog is the one implementation of LogVerifier.VerifyLog, over a
// backend's LogSource; origin is the log's checkpoint origin.
func AuditLog(ctx context.Context, src LogSource, origin string) (LogReport, error) {
	var rep LogReport
	size, err := src.LogSize(ctx)
	if err != nil {
		return rep, err
	}
	if size > 1<<62 {
		return rep, &CorruptError{Detail: fmt.Sprintf("log size %d is out of range", size)}
	}
	corrupt := func(format string, args ...any) error {
		return &CorruptError{Detail: "log: " + fmt.Sprintf(format, args...)}
	}

	// Level 0: the runs holding indexes, in index order, against the leaf
	// hashes stored for them.
	var next uint64
	err = src.Leaves(ctx, func(r LeafRow) error {
		run, perr := ParseRunID(r.Run)
		if perr != nil {
			return corrupt("index %d is held by a run id %q that does not parse", r.Index, short(r.Run))
		}
		switch {
		case r.Index < 0:
			return &CorruptError{Run: run, Detail: fmt.Sprintf("log: negative log index %d", r.Index)}
		case uint64(r.Index) < next:
			return &CorruptError{Run: run, Detail: fmt.Sprintf("log: index %d is held by more than one run", r.Index)}
		case uint64(r.Index) > next:
			return corrupt("index %d is held by no sealed run", next)
		case uint64(r.Index) >= size:
			return &CorruptError{Run: run, Detail: fmt.Sprintf("log: run holds index %d beyond the log's %d leaves", r.Index, size)}
		case !r.Sealed:
			return &CorruptError{Run: run, Detail: fmt.Sprintf("log: run holds index %d but has no seal", r.Index)}
		case len(r.Leaf) != 32 || !bytes.Equal(r.Leaf, r.Head):
			return &CorruptError{Run: run, Detail: fmt.Sprintf("log: leaf %d is not the run's terminal hash", r.Index)}
		case r.Node == nil:
			return &CorruptError{Run: run, Detail: fmt.Sprintf("log: no stored leaf hash at index %d", r.Index)}
		}
		if lh := log.LeafHash(log.Hash(r.Leaf)); !bytes.Equal(r.Node, lh[:]) {
			return &CorruptError{Run: run, Detail: fmt.Sprintf("log: stored node (0, %d) is not the hash of the run's leaf", r.Index)}
		}
		next++
		rep.Sealed++
		rep.Nodes++
		return nil
	})
	if err != nil {
		return rep, err
	}
	if next != size {
		return rep, corrupt("index %d is held by no sealed run (the log has %d leaves)", next, size)
	}
	err = src.Unlogged(ctx, func(id string) error {
		if run, perr := ParseRunID(id); perr == nil {
			return &CorruptError{Run: run, Detail: "log: run is sealed but holds no log index"}
		}
		return corrupt("run %q is sealed but holds no log index", short(id))
	})
	if err != nil {
		return rep, err
	}
	// Records whose run is not listed would escape every per-run check
	// (VerifyAll walks the listed runs), so "verified" would cover less
	// than the journal holds.
	err = src.Unlisted(ctx, func(id string) error {
		const detail = "journal: the run has records but is not listed among the journal's runs, so no chain check covers them"
		if run, perr := ParseRunID(id); perr == nil {
			return &CorruptError{Run: run, Detail: detail}
		}
		return corrupt("run %q has records but is not listed among the journal's runs", short(id))
	})
	if err != nil {
		return rep, err
	}

	// Every level holds exactly the complete subtrees of size leaves: with
	// (level, index) unique, the right count and every index in range make
	// the right set.
	err = src.LevelCounts(ctx, func(level, count int64) error {
		var want uint64
		if level >= 0 && level < 64 {
			want = size >> uint(level)
		}
		if count < 0 || uint64(count) != want {
			return corrupt("level %d holds %d nodes; a log of %d leaves has %d", level, count, size, want)
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	for level := 1; size>>uint(level) > 0; level++ {
		want, seen := size>>uint(level), uint64(0)
		err := src.Level(ctx, level, func(n NodeRow) error {
			if n.Index < 0 || uint64(n.Index) >= want {
				return corrupt("node (%d, %d) is beyond the log's %d leaves", level, n.Index, size)
			}
			if len(n.Left) != 32 || len(n.Right) != 32 {
				return corrupt("node (%d, %d) has a missing or malformed child", level, n.Index)
			}
			var b [65]byte
			b[0] = 0x01
			copy(b[1:], n.Left)
			copy(b[33:], n.Right)
			if h := sha256.Sum256(b[:]); !bytes.Equal(n.Hash, h[:]) {
				return corrupt("stored node (%d, %d) is not the hash of its children", level, n.Index)
			}
			seen++
			rep.Nodes++
			return nil
		})
		if err != nil {
			return rep, err
		}
		if seen != want {
			return rep, corrupt("level %d holds %d nodes; a log of %d leaves has %d", level, seen, size, want)
		}
	}
	if want := 2*size - uint64(bits.OnesCount64(size)); rep.Nodes != want {
		return rep, corrupt("%d nodes recomputed; a log of %d leaves has %d", rep.Nodes, size, want)
	}
	rep.Size = size

	// Signed checkpoints, a page at a time: each must name this log, its
	// stored size and root, commit to the root at its size, and extend the
	// one before it.
	const page = 256
	var prev *SignedRow
	var prevRoot log.Hash
	after := int64(-1)
	for {
		rows, err := src.SignedCheckpoints(ctx, after, page)
		if err != nil {
			return rep, err
		}
		for i := range rows {
			sc := rows[i]
			if sc.Size < 0 || uint64(sc.Size) > size || len(sc.Root) != 32 {
				return rep, corrupt("signed checkpoint of size %d is malformed or beyond the log's %d leaves", sc.Size, size)
			}
			n := uint64(sc.Size)
			if err := noteMatches(sc, origin); err != nil {
				return rep, corrupt("signed checkpoint %d: %v", n, err)
			}
			root, err := log.Root(ctx, src, n)
			if err != nil {
				return rep, corrupt("signed checkpoint %d: root: %v", n, err)
			}
			if !bytes.Equal(root[:], sc.Root) {
				return rep, corrupt("signed checkpoint %d: the log's root at that size is not the signed root", n)
			}
			if prev != nil {
				p, err := log.ConsistencyProof(ctx, src, uint64(prev.Size), n)
				if err != nil {
					return rep, corrupt("signed checkpoints %d and %d: consistency proof: %v", prev.Size, n, err)
				}
				if err := log.VerifyConsistency(uint64(prev.Size), n, prevRoot, root, p); err != nil {
					return rep, corrupt("signed checkpoints %d and %d are not consistent: %v", prev.Size, n, err)
				}
			}
			prev, prevRoot = &rows[i], root
			rep.Checkpoints++
			after = sc.Size
		}
		if len(rows) < page {
			break
		}
	}

	// Witnessed notes: each must be the checkpoint signed at its size.
	for after := int64(-1); ; {
		rows, err := src.Witnessed(ctx, after, page)
		if err != nil {
			return rep, err
		}
		for _, w := range rows {
			if w.Root == nil {
				return rep, corrupt("witnessed checkpoint %d has no signed checkpoint at its size", w.Size)
			}
			if err := noteMatches(w, origin); err != nil {
				return rep, corrupt("witnessed checkpoint %d: %v", w.Size, err)
			}
			rep.Witnessed++
			after = w.Size
		}
		if len(rows) < page {
			break
		}
	}
	return rep, nil
}

// noteMatches checks that a stored note's checkpoint body names origin,
// the row's size and the row's root.
func noteMatches(r SignedRow, origin string) error {
	body, _, ok := bytes.Cut(r.Note, []byte("\n\n"))
	if !ok {
		return fmt.Errorf("note has no signature block")
	}
	cp, err := checkpoint.Parse(append(body[:len(body):len(body)], '\n'))
	if err != nil {
		return fmt.Errorf("note body: %v", err)
	}
	if cp.Origin != origin || cp.Size != uint64(r.Size) || !bytes.Equal(cp.Root[:], r.Root) {
		return fmt.Errorf("note says origin %q size %d, the journal has origin %q size %d, or the roots differ",
			short(cp.Origin), cp.Size, short(origin), r.Size)
	}
	return nil
}

// short quotes at most a short prefix of a stored string in a message.
func short(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// Conclusion follows a run's chain, record by record, for its latest
// RunConcluded outcome, so that a verifier can hold the run's outcome index
// and its seal to what the chain itself records.
type Conclusion struct {
	outcome string
	seq     Seq
}

// Next reads r; a RunConcluded whose outcome does not read is corrupt.
func (c *Conclusion) Next(r Record) error {
	if r.Kind != KindRunConcluded {
		return nil
	}
	f, err := ReadFacts(r.Body)
	if err != nil {
		return &CorruptError{Run: r.Run, Seq: r.Seq, Detail: "RunConcluded does not read: " + err.Error()}
	}
	c.outcome, c.seq = f.Outcome, r.Seq
	return nil
}

// Check compares the chain's latest conclusion with the run's outcome
// index (indexed) and its sealed outcome (sealed); nil means the column is
// empty.
func (c *Conclusion) Check(run RunID, indexed, sealed *string) error {
	chain := "none"
	if c.seq != 0 {
		chain = fmt.Sprintf("%q (seq %d)", c.outcome, c.seq)
	}
	if sealed != nil && (c.seq == 0 || *sealed != c.outcome) {
		return &CorruptError{Run: run, Seq: c.seq, Detail: fmt.Sprintf("sealed as %q but the chain's latest conclusion is %s", short(*sealed), chain)}
	}
	if (indexed == nil) != (c.seq == 0) || indexed != nil && *indexed != c.outcome {
		idx := "none"
		if indexed != nil {
			idx = fmt.Sprintf("%q", short(*indexed))
		}
		return &CorruptError{Run: run, Seq: c.seq, Detail: fmt.Sprintf("outcome index says %s but the chain's latest conclusion is %s", idx, chain)}
	}
	return nil
}
