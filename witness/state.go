package witness

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/runseal/runseal/internal/groupcommit"
)

// readState reads a log's latest cosigned size and root.
func (s *Store) readState(ctx context.Context, origin string) (size uint64, root [32]byte, err error) {
	var (
		sz int64
		rt []byte
	)
	if err := s.rdb.QueryRowContext(ctx, "SELECT size, root FROM logs WHERE origin = ?", origin).Scan(&sz, &rt); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return 0, root, fmt.Errorf("%w: %q", ErrUnknownLog, origin)
		}
		return 0, root, err
	}
	copy(root[:], rt)
	return uint64(sz), root, nil
}

// LatestCheckpoint returns the latest checkpoint the witness cosigned for
// the log whose origin hashes to originHash (see OriginHash): the note with
// the log signatures that verified and the witness's own cosignatures. It
// fails with ErrNotCosigned if the witness never cosigned that log.
func (s *Store) LatestCheckpoint(ctx context.Context, originHash string) ([]byte, error) {
	var note []byte
	err := s.rdb.QueryRowContext(ctx, "SELECT note FROM logs WHERE origin_hash = ? AND note IS NOT NULL", originHash).Scan(&note)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotCosigned
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return note, nil
}

// errStateChanged is the refusal of a compare-and-swap whose expected state
// is no longer the stored one: another writer moved the log.
var errStateChanged = errors.New("log state changed since it was read")

// A casUpdate moves a log from the state the checks were made against to a
// newly cosigned checkpoint.
type casUpdate struct {
	origin           string
	oldSize, newSize uint64
	oldRoot, newRoot [32]byte
	note             []byte // the stored note: verified log signatures and ours
	cosignedAt       int64
	keys             []string // the vkeys whose signatures verified
}

// commitCheckpoint performs u as one compare-and-swap in the group commit.
// It returns errStateChanged if the stored (size, root) is not (oldSize,
// oldRoot), and an error wrapping ErrNotTrusted if none of u.keys is still
// configured. It returns only once the write is durable.
//
// A note verified by one key (the usual case) is written batched: its
// compare-and-swap is one UPDATE that changes one row or none, so it needs
// no savepoint of its own, and a group of them costs one statement each
// (see casBatch).
func (s *Store) commitCheckpoint(ctx context.Context, u *casUpdate) error {
	if len(u.keys) == 1 {
		return s.writeWork(ctx, groupcommit.Work{
			Run:     func(ctx context.Context, tx *sql.Tx) error { return s.casOneKey(ctx, tx, u) },
			Batched: u,
		})
	}
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		trusted := false
		for _, k := range u.keys {
			if err := tx.StmtContext(ctx, s.keyExists).QueryRowContext(ctx, u.origin, k).Scan(&trusted); err != nil {
				return err
			}
			if trusted {
				break
			}
		}
		if !trusted {
			return refuse(fmt.Errorf("%w: the key that signed was removed from %q", ErrNotTrusted, u.origin))
		}
		res, err := tx.StmtContext(ctx, s.casUpdate).ExecContext(ctx,
			int64(u.newSize), u.newRoot[:], u.note, u.cosignedAt, u.origin, int64(u.oldSize), u.oldRoot[:])
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n != 1 {
			return refuse(errStateChanged)
		}
		return nil
	})
}

// casBatch writes a run of batched members of a group (each a *casUpdate
// with one key) in tx, one statement each and no savepoints: an UPDATE is
// atomic on its own, so a compare-and-swap that changes no row wrote
// nothing, and its refusal needs no rollback. Any other failure (a trigger
// refusing, I/O) poisons the group; groupcommit.SQL then runs its members
// again alone, each in its savepoint, so the failure is pinned on its own
// member.
func (s *Store) casBatch(ctx context.Context, tx *sql.Tx, reqs []any) ([]error, error) {
	out := make([]error, len(reqs))
	for i, r := range reqs {
		u, ok := r.(*casUpdate)
		if !ok || len(u.keys) != 1 {
			return nil, fmt.Errorf("witness: batched a %T", r)
		}
		out[i] = s.casOneKey(ctx, tx, u)
		if out[i] != nil {
			if _, refused := errors.AsType[*refusal](out[i]); !refused {
				return nil, out[i]
			}
		}
	}
	return out, nil
}

// casOneKey is commitCheckpoint for a note verified by one key, the usual
// case: the key check and the compare-and-swap are one statement, and only
// when it changes nothing does a second one tell which condition failed.
func (s *Store) casOneKey(ctx context.Context, tx *sql.Tx, u *casUpdate) error {
	res, err := tx.StmtContext(ctx, s.casUpdateKey).ExecContext(ctx,
		int64(u.newSize), u.newRoot[:], u.note, u.cosignedAt, u.origin, int64(u.oldSize), u.oldRoot[:], u.origin, u.keys[0])
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 1 {
		return nil
	}
	var trusted bool
	if err := tx.StmtContext(ctx, s.keyExists).QueryRowContext(ctx, u.origin, u.keys[0]).Scan(&trusted); err != nil {
		return err
	}
	if !trusted {
		return refuse(fmt.Errorf("%w: the key that signed was removed from %q", ErrNotTrusted, u.origin))
	}
	return refuse(errStateChanged)
}

// Kinds of evidence.
const (
	// EvidenceSplitView is a validly signed checkpoint of the size the
	// witness held, with another root: two trees of one size, signed by
	// the log. Together with KnownNote it proves the log misbehaved.
	EvidenceSplitView = "split_view"
	// EvidenceBadProof is a validly signed checkpoint larger than the
	// witness's whose consistency proof did not verify. It proves nothing
	// alone (the proof may be a client bug) but is kept with the proof,
	// because a fork from the log looks exactly like this.
	EvidenceBadProof = "bad_proof"
)

// An Evidence is a validly signed checkpoint the witness refused because it
// is inconsistent with what the witness had cosigned, kept for the
// operator. Identical submissions are kept once, with a count.
type Evidence struct {
	Origin    string     // the log
	Kind      string     // EvidenceSplitView or EvidenceBadProof
	Size      uint64     // the refused checkpoint's size
	Root      [32]byte   // and root
	Note      []byte     // the refused note, with only the log signatures that verified
	KnownSize uint64     // what the witness held when it refused
	KnownRoot [32]byte   // and the root it held
	KnownNote []byte     // the note the witness had cosigned at KnownSize; nil if it had cosigned nothing
	Proof     [][32]byte // the proof that failed, for EvidenceBadProof
	FirstSeen time.Time  // when it was first submitted
	LastSeen  time.Time  // and last
	Count     int64      // how many times it was submitted
}

// recordEvidence stores ev durably, or counts one more sighting of it. It
// copies the witness's currently stored note as KnownNote inside the same
// transaction, so the pair is consistent.
func (s *Store) recordEvidence(ctx context.Context, ev *Evidence) error {
	proof := make([]byte, 0, 32*len(ev.Proof))
	for _, h := range ev.Proof {
		proof = append(proof, h[:]...)
	}
	now := s.now().Unix()
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO evidence(origin, kind, size, root, note, known_size, known_root, known_note, proof, first_seen, last_seen, count)
			SELECT ?, ?, ?, ?, ?, ?, ?, (SELECT note FROM logs WHERE origin = ? AND size = ? AND root = ?), ?, ?, ?, 1
			ON CONFLICT(origin, kind, size, root, known_size) DO UPDATE SET last_seen = excluded.last_seen, count = count + 1`,
			ev.Origin, ev.Kind, int64(ev.Size), ev.Root[:], ev.Note, int64(ev.KnownSize), ev.KnownRoot[:],
			ev.Origin, int64(ev.KnownSize), ev.KnownRoot[:], proof, now, now)
		return err
	})
}

// Evidence returns the evidence kept for origin, or for every log if origin
// is empty, oldest first.
func (s *Store) Evidence(ctx context.Context, origin string) ([]Evidence, error) {
	q := `SELECT origin, kind, size, root, note, known_size, known_root, known_note, proof, first_seen, last_seen, count FROM evidence`
	args := []any{}
	if origin != "" {
		q += " WHERE origin = ?"
		args = append(args, origin)
	}
	rows, err := s.rdb.QueryContext(ctx, q+" ORDER BY id", args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Evidence
	for rows.Next() {
		var (
			ev                     Evidence
			size, knownSize        int64
			root, knownRoot, proof []byte
			firstSeen, lastSeen    int64
		)
		if err := rows.Scan(&ev.Origin, &ev.Kind, &size, &root, &ev.Note, &knownSize, &knownRoot, &ev.KnownNote, &proof, &firstSeen, &lastSeen, &ev.Count); err != nil {
			return nil, err
		}
		ev.Size, ev.KnownSize = uint64(size), uint64(knownSize)
		copy(ev.Root[:], root)
		copy(ev.KnownRoot[:], knownRoot)
		for len(proof) >= 32 {
			ev.Proof = append(ev.Proof, [32]byte(proof[:32]))
			proof = proof[32:]
		}
		ev.FirstSeen, ev.LastSeen = time.Unix(firstSeen, 0).UTC(), time.Unix(lastSeen, 0).UTC()
		out = append(out, ev)
	}
	return out, rows.Err()
}
