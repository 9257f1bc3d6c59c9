package witness

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/runseal/runseal/checkpoint"
)

// A LogConfig is what an operator decides about a log: its origin, the keys
// whose signatures make its checkpoints authentic, and its rate limits.
type LogConfig struct {
	// Origin is the first line of the log's checkpoints.
	Origin string
	// Keys are the log's note verifier keys (vkeys), plain Ed25519 (type
	// 0x01). A checkpoint needs a valid signature from one of them. A log
	// without keys is witnessed by nobody: the way to disable a log,
	// since a log is never deleted.
	Keys []string
	// QPD is the number of add-checkpoint requests per day the log may
	// make, as in the witness-network log lists; 1 to MaxQPD.
	QPD int64
	// Burst is how many requests the log may make at once on top of its
	// daily rate; 1 to MaxQPD. Zero in AddLog means DefaultBurst(QPD).
	Burst int64
	// Contact is free text for the operator to reach the log's operator.
	Contact string
}

// DefaultBurst returns the burst a log gets when none is given: the larger
// of 16 requests and one minute of its daily quota. A publisher that probes
// with old 0 and retries after a 409 sends a few requests at once, and a
// log allowed a high rate should not be paced to the second.
func DefaultBurst(qpd int64) int64 {
	return max(16, min((qpd+1439)/1440, MaxQPD))
}

// A LogInfo is a log as the witness holds it: its configuration and the
// latest checkpoint it cosigned.
type LogInfo struct {
	LogConfig
	// Size is the size of the latest checkpoint cosigned, 0 if none.
	Size uint64
	// Root is the root of that checkpoint, the empty root if none.
	Root [32]byte
	// CosignedAt is the timestamp of that cosignature; zero if never.
	CosignedAt time.Time
	// AddedAt is when the log was added.
	AddedAt time.Time
	// Evidence is how many distinct refused checkpoints of this log the
	// witness keeps as evidence (see Store.Evidence).
	Evidence int
}

// checkLogKey checks that vkey is a log key: a well-formed note key of type
// 0x01. A witness key (0x04) is refused so that a key is never both.
func checkLogKey(vkey string) error {
	v, err := checkpoint.NewVerifier(vkey)
	if err != nil {
		return fmt.Errorf("%w %q: %v", ErrBadLogKey, vkey, err)
	}
	if _, ok := v.(*checkpoint.CosignatureVerifier); ok {
		return fmt.Errorf("%w %q: a cosignature (type 0x04) key is a witness key; a log signs with a plain Ed25519 (type 0x01) key", ErrBadLogKey, vkey)
	}
	return nil
}

// checkOrigin checks that origin can be the first line of a checkpoint.
func checkOrigin(origin string) error {
	cp := checkpoint.Checkpoint{Origin: origin, Root: checkpoint.EmptyRoot()}
	if err := cp.Validate(); err != nil {
		return fmt.Errorf("origin %q: %w", origin, err)
	}
	return nil
}

func checkLimit(name string, v int64) error {
	if v < 1 || v > MaxQPD {
		return fmt.Errorf("%w: %s %d is not between 1 and %d", ErrInvalidLimit, name, v, int64(MaxQPD))
	}
	return nil
}

// normalize validates c and fills in the default burst.
func (c *LogConfig) normalize() error {
	if err := checkOrigin(c.Origin); err != nil {
		return err
	}
	if err := checkLimit("qpd", c.QPD); err != nil {
		return err
	}
	if c.Burst == 0 {
		c.Burst = DefaultBurst(c.QPD)
	}
	if err := checkLimit("burst", c.Burst); err != nil {
		return err
	}
	seen := make(map[string]bool, len(c.Keys))
	for _, k := range c.Keys {
		if err := checkLogKey(k); err != nil {
			return err
		}
		if seen[k] {
			return fmt.Errorf("%w: %q given twice", ErrKeyExists, k)
		}
		seen[k] = true
	}
	if strings.ContainsFunc(c.Contact, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return fmt.Errorf("contact %q contains a control character", c.Contact)
	}
	return nil
}

// AddLog adds a log at size 0, never cosigned. It fails with ErrLogExists
// if the origin is known (a log is never removed, so re-adding would risk
// cosigning a second history), and with ErrOwnName if the origin is a name
// the witness cosigns as.
func (s *Store) AddLog(ctx context.Context, c LogConfig) error {
	if err := c.normalize(); err != nil {
		return err
	}
	now := s.now().Unix()
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error { return insertLog(ctx, tx, c, now) })
}

func insertLog(ctx context.Context, tx *sql.Tx, c LogConfig, now int64) error {
	var own, exists bool
	if err := tx.QueryRowContext(ctx, "SELECT EXISTS(SELECT 1 FROM witness_names WHERE name = ?), EXISTS(SELECT 1 FROM logs WHERE origin = ?)", c.Origin, c.Origin).Scan(&own, &exists); err != nil {
		return err
	}
	switch {
	case own:
		return refuse(fmt.Errorf("%w: %q", ErrOwnName, c.Origin))
	case exists:
		return refuse(fmt.Errorf("%w: %q", ErrLogExists, c.Origin))
	}
	empty := checkpoint.EmptyRoot()
	if _, err := tx.ExecContext(ctx, `INSERT INTO logs(origin, origin_hash, size, root, qpd, burst, contact, added_at)
		VALUES (?, ?, 0, ?, ?, ?, ?, ?)`, c.Origin, OriginHash(c.Origin), empty[:], c.QPD, c.Burst, c.Contact, now); err != nil {
		return err
	}
	for _, k := range c.Keys {
		if _, err := tx.ExecContext(ctx, "INSERT INTO log_keys(origin, vkey, added_at) VALUES (?, ?, ?)", c.Origin, k, now); err != nil {
			return err
		}
	}
	return nil
}

// AddKey adds a verifier key to a log. Checkpoints signed by it are
// accepted from the next request on.
func (s *Store) AddKey(ctx context.Context, origin, vkey string) error {
	if err := checkLogKey(vkey); err != nil {
		return err
	}
	now := s.now().Unix()
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := logExists(ctx, tx, origin); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, "INSERT INTO log_keys(origin, vkey, added_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING", origin, vkey, now)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return refuse(fmt.Errorf("%w: %q", ErrKeyExists, vkey))
		}
		return nil
	})
}

// DelKey removes a verifier key from a log. No cosignature is released for
// a checkpoint verified only by a removed key, even one verified before
// the removal: the key is checked again in the transaction that records the
// cosignature. Removing a log's last key disables the log; its state stays.
func (s *Store) DelKey(ctx context.Context, origin, vkey string) error {
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := logExists(ctx, tx, origin); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, "DELETE FROM log_keys WHERE origin = ? AND vkey = ?", origin, vkey)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return refuse(fmt.Errorf("%w: %q", ErrNoSuchKey, vkey))
		}
		return nil
	})
}

// SetLimits changes a log's daily quota and burst (burst 0: DefaultBurst).
// A running witness applies them within a second.
func (s *Store) SetLimits(ctx context.Context, origin string, qpd, burst int64) error {
	if burst == 0 {
		burst = DefaultBurst(qpd)
	}
	if err := errors.Join(checkLimit("qpd", qpd), checkLimit("burst", burst)); err != nil {
		return err
	}
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := logExists(ctx, tx, origin); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "UPDATE logs SET qpd = ?, burst = ? WHERE origin = ?", qpd, burst, origin)
		return err
	})
}

func logExists(ctx context.Context, tx *sql.Tx, origin string) error {
	var ok bool
	if err := tx.QueryRowContext(ctx, "SELECT EXISTS(SELECT 1 FROM logs WHERE origin = ?)", origin).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return refuse(fmt.Errorf("%w: %q", ErrUnknownLog, origin))
	}
	return nil
}

// AddWitnessNames records names the witness cosigns as, so that no log
// with such an origin can be added. It fails with ErrOwnName if a log
// already has one of them as its origin.
func (s *Store) AddWitnessNames(ctx context.Context, names ...string) error {
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for _, n := range names {
			var clash bool
			if err := tx.QueryRowContext(ctx, "SELECT EXISTS(SELECT 1 FROM logs WHERE origin = ?)", n).Scan(&clash); err != nil {
				return err
			}
			if clash {
				return refuse(fmt.Errorf("%w: a witnessed log has origin %q", ErrOwnName, n))
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO witness_names(name) VALUES (?) ON CONFLICT DO NOTHING", n); err != nil {
				return err
			}
		}
		return nil
	})
}

// WitnessNames returns the names the witness cosigns as, sorted.
func (s *Store) WitnessNames(ctx context.Context) ([]string, error) {
	rows, err := s.rdb.QueryContext(ctx, "SELECT name FROM witness_names ORDER BY name")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// Logs returns every log, sorted by origin.
func (s *Store) Logs(ctx context.Context) ([]LogInfo, error) {
	return s.queryLogs(ctx, "")
}

// Log returns one log, or an error wrapping ErrUnknownLog.
func (s *Store) Log(ctx context.Context, origin string) (LogInfo, error) {
	ls, err := s.queryLogs(ctx, origin)
	if err != nil {
		return LogInfo{}, err
	}
	if len(ls) == 0 {
		return LogInfo{}, fmt.Errorf("%w: %q", ErrUnknownLog, origin)
	}
	return ls[0], nil
}

func (s *Store) queryLogs(ctx context.Context, origin string) ([]LogInfo, error) {
	q := `SELECT origin, size, root, cosigned_at, qpd, burst, contact, added_at,
		(SELECT count(*) FROM evidence e WHERE e.origin = l.origin)
		FROM logs l`
	args := []any{}
	if origin != "" {
		q += " WHERE origin = ?"
		args = append(args, origin)
	}
	rows, err := s.rdb.QueryContext(ctx, q+" ORDER BY origin", args...)
	if err != nil {
		return nil, err
	}
	var out []LogInfo
	for rows.Next() {
		var (
			li       LogInfo
			size     int64
			root     []byte
			cosigned sql.NullInt64
			added    int64
		)
		if err := rows.Scan(&li.Origin, &size, &root, &cosigned, &li.QPD, &li.Burst, &li.Contact, &added, &li.Evidence); err != nil {
			rows.Close()
			return nil, err
		}
		li.Size = uint64(size)
		copy(li.Root[:], root)
		if cosigned.Valid {
			li.CosignedAt = time.Unix(cosigned.Int64, 0).UTC()
		}
		li.AddedAt = time.Unix(added, 0).UTC()
		out = append(out, li)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].Keys, err = logKeys(ctx, s.rdb, out[i].Origin); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// logKeys returns a log's verifier keys, sorted, read through q: the
// reader pool, or a transaction of the writer.
func logKeys(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, origin string) ([]string, error) {
	rows, err := q.QueryContext(ctx, "SELECT vkey FROM log_keys WHERE origin = ? ORDER BY vkey", origin)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, rows.Err()
}

// logRow is what the add-checkpoint path reads about a log.
type logRow struct {
	keys       []string
	qpd, burst int64
}

// readLogRow reads a log's keys and limits in one query; ok is false for an
// unknown origin. A running witness calls it for each log every ConfigTTL,
// so the statement is prepared once.
func (s *Store) readLogRow(ctx context.Context, origin string) (row logRow, ok bool, err error) {
	rows, err := s.logRow.QueryContext(ctx, origin)
	if err != nil {
		return row, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var k sql.NullString
		if err := rows.Scan(&row.qpd, &row.burst, &k); err != nil {
			return row, false, err
		}
		ok = true
		if k.Valid {
			row.keys = append(row.keys, k.String)
		}
	}
	return row, ok, rows.Err()
}
