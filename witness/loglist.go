package witness

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// MaxLogListSize caps a log list file: the largest witness-network list
// (40,000 logs) is about 10 MB.
const MaxLogListSize = 64 << 20

// ErrMalformedLogList reports a log list that does not follow the
// witness-network format. The error is a *LogListError naming the line.
var ErrMalformedLogList = errors.New("malformed log list")

// A LogListError says where a log list departs from the format. It unwraps
// to ErrMalformedLogList.
type LogListError struct {
	Line   int    // 1-based line of the list; 0 if not tied to a line
	Reason string // what is wrong, in a few words
}

// Error formats the error as "malformed log list: line <n>: <reason>".
func (e *LogListError) Error() string {
	return fmt.Sprintf("%v: line %d: %s", ErrMalformedLogList, e.Line, e.Reason)
}

// Unwrap returns ErrMalformedLogList.
func (e *LogListError) Unwrap() error { return ErrMalformedLogList }

// A ListedLog is one entry of a log list.
type ListedLog struct {
	Origin  string // the vkey's name unless the entry gives an origin
	VKey    string // the log's note verifier key, plain Ed25519
	QPD     int64  // add-checkpoint requests per day
	Contact string // free text to reach the log's operator
	Line    int    // line of the entry's vkey, for messages
}

// ParseLogList parses a log list in the witness-network format
// (transparency-dev/witness-network, log-list-format.md):
//
//	logs/v0
//	vkey <vkey>
//	origin <origin>        (optional; "none" or absent: the vkey's name)
//	qpd <1..2^31-1>
//	contact <free text>
//	vkey <vkey>
//	...
//
// Each line is trimmed of surrounding white space (and a final carriage
// return); blank lines and lines starting with '#' are ignored. The header
// may be followed by a "revision <n>" line, and an entry may carry a
// "bastion <url|none>" line, both from drafts of the format and ignored.
// Within an entry, origin, bastion and qpd may come in any order after the
// vkey and before the contact line that ends it. The vkey must be a plain
// Ed25519 (type 0x01) key, the only type the format allows. An origin listed
// twice is an error.
func ParseLogList(data []byte) ([]ListedLog, error) {
	if len(data) > MaxLogListSize {
		return nil, &LogListError{Line: 0, Reason: fmt.Sprintf("longer than %d bytes", MaxLogListSize)}
	}
	var (
		out     []ListedLog
		cur     *ListedLog
		seen    = make(map[string]int) // origin → line of its vkey
		header  bool
		fields  map[string]bool // keywords seen in the current entry
		lastRev bool            // a revision line may follow the header only
	)
	for n := 1; len(data) > 0; n++ {
		var raw []byte
		raw, data, _ = bytes.Cut(data, []byte{'\n'})
		line := string(bytes.TrimSpace(bytes.TrimSuffix(raw, []byte{'\r'})))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !header {
			if line != "logs/v0" {
				return nil, &LogListError{Line: n, Reason: fmt.Sprintf("want the header logs/v0, found %q", line)}
			}
			header, lastRev = true, true
			continue
		}
		kw, arg, _ := strings.Cut(line, " ")
		arg = strings.TrimSpace(arg)
		if kw == "revision" && lastRev {
			lastRev = false
			continue
		}
		lastRev = false
		if cur == nil && kw != "vkey" {
			return nil, &LogListError{Line: n, Reason: fmt.Sprintf("want a vkey line to start an entry, found %q", kw)}
		}
		switch kw {
		case "vkey":
			if cur != nil {
				return nil, &LogListError{Line: n, Reason: "vkey before the contact line that ends the previous entry"}
			}
			if arg == "" || strings.ContainsAny(arg, " \t") {
				return nil, &LogListError{Line: n, Reason: "vkey needs exactly one key"}
			}
			if err := checkLogKey(arg); err != nil {
				return nil, &LogListError{Line: n, Reason: err.Error()}
			}
			name, _, _ := strings.Cut(arg, "+")
			cur = &ListedLog{VKey: arg, Origin: name, Line: n}
			fields = make(map[string]bool)
		case "origin", "bastion", "qpd":
			if fields[kw] {
				return nil, &LogListError{Line: n, Reason: kw + " given twice in one entry"}
			}
			fields[kw] = true
			if arg == "" {
				return nil, &LogListError{Line: n, Reason: kw + " needs a value"}
			}
			switch kw {
			case "origin":
				if arg != "none" {
					cur.Origin = arg
				}
			case "qpd":
				q, ok := parseDecimal([]byte(arg))
				if !ok || q < 1 || q > MaxQPD {
					return nil, &LogListError{Line: n, Reason: fmt.Sprintf("qpd %q is not a number from 1 to %d", arg, MaxQPD)}
				}
				cur.QPD = int64(q)
			}
		case "contact":
			if !fields["qpd"] {
				return nil, &LogListError{Line: n, Reason: "entry has no qpd line"}
			}
			if arg == "" {
				return nil, &LogListError{Line: n, Reason: "contact needs a value"}
			}
			cur.Contact = arg
			if err := checkOrigin(cur.Origin); err != nil {
				return nil, &LogListError{Line: cur.Line, Reason: err.Error()}
			}
			if first, dup := seen[cur.Origin]; dup {
				return nil, &LogListError{Line: cur.Line, Reason: fmt.Sprintf("origin %q already listed at line %d", cur.Origin, first)}
			}
			seen[cur.Origin] = cur.Line
			out = append(out, *cur)
			cur = nil
		default:
			return nil, &LogListError{Line: n, Reason: fmt.Sprintf("unknown keyword %q", kw)}
		}
	}
	switch {
	case !header:
		return nil, &LogListError{Line: 1, Reason: "no logs/v0 header"}
	case cur != nil:
		return nil, &LogListError{Line: cur.Line, Reason: "entry does not end with a contact line"}
	}
	return out, nil
}

// A KeyChange is a log whose listed key differs from the keys the witness
// has for it.
type KeyChange struct {
	Origin string   // the log
	Have   []string // the witness's keys
	Listed string   // the list's key
}

// A KeyChangeError refuses an import that would change known logs' keys.
// It unwraps to ErrKeyChange.
type KeyChangeError struct {
	Changes []KeyChange // every listed log whose keys would change
}

// Error names the logs whose keys would change.
func (e *KeyChangeError) Error() string {
	origins := make([]string, len(e.Changes))
	for i, c := range e.Changes {
		origins[i] = fmt.Sprintf("%q", c.Origin)
	}
	return fmt.Sprintf("%v: %s (nothing imported; import again with force to replace the keys)", ErrKeyChange, strings.Join(origins, ", "))
}

// Unwrap returns ErrKeyChange.
func (e *KeyChangeError) Unwrap() error { return ErrKeyChange }

// An ImportResult says what ImportLogs did with each listed log.
type ImportResult struct {
	Added     []string    // new logs, at size 0
	Updated   []string    // known logs whose qpd or contact changed
	Unchanged []string    // known logs as listed
	Rekeyed   []KeyChange // known logs whose keys were replaced (force only)
}

// ImportLogs adds the logs of a list the witness does not have, and
// updates the daily quota and contact of those it has. It is atomic: it
// imports everything or nothing. It never removes a log, and it refuses the
// whole import with a *KeyChangeError if the list gives a known log a key
// set other than the witness's, unless force is set, in which case that
// log's keys are replaced by the listed one. A listed origin equal to one of
// the witness's names fails with ErrOwnName. A log whose burst is the
// default for its quota gets the default for its new quota.
func (s *Store) ImportLogs(ctx context.Context, logs []ListedLog, force bool) (*ImportResult, error) {
	for _, l := range logs {
		c := LogConfig{Origin: l.Origin, Keys: []string{l.VKey}, QPD: l.QPD, Contact: l.Contact}
		if err := c.normalize(); err != nil {
			return nil, fmt.Errorf("log %q (line %d): %w", l.Origin, l.Line, err)
		}
	}
	now := s.now().Unix()
	var res *ImportResult
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res = &ImportResult{}
		var changes []KeyChange
		for _, l := range logs {
			var qpd, burst int64
			var contact string
			err := tx.QueryRowContext(ctx, "SELECT qpd, burst, contact FROM logs WHERE origin = ?", l.Origin).Scan(&qpd, &burst, &contact)
			if errors.Is(err, sql.ErrNoRows) {
				c := LogConfig{Origin: l.Origin, Keys: []string{l.VKey}, QPD: l.QPD, Burst: DefaultBurst(l.QPD), Contact: l.Contact}
				if err := insertLog(ctx, tx, c, now); err != nil {
					return err
				}
				res.Added = append(res.Added, l.Origin)
				continue
			}
			if err != nil {
				return err
			}
			have, err := logKeys(ctx, tx, l.Origin)
			if err != nil {
				return err
			}
			rekey := !slices.Equal(have, []string{l.VKey})
			if rekey {
				changes = append(changes, KeyChange{Origin: l.Origin, Have: have, Listed: l.VKey})
				if !force {
					continue
				}
				if _, err := tx.ExecContext(ctx, "DELETE FROM log_keys WHERE origin = ? AND vkey <> ?", l.Origin, l.VKey); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, "INSERT INTO log_keys(origin, vkey, added_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING", l.Origin, l.VKey, now); err != nil {
					return err
				}
			}
			newBurst := burst
			if burst == DefaultBurst(qpd) {
				newBurst = DefaultBurst(l.QPD)
			}
			changed := qpd != l.QPD || burst != newBurst || contact != l.Contact
			if changed {
				if _, err := tx.ExecContext(ctx, "UPDATE logs SET qpd = ?, burst = ?, contact = ? WHERE origin = ?", l.QPD, newBurst, l.Contact, l.Origin); err != nil {
					return err
				}
			}
			switch {
			case rekey:
				res.Rekeyed = append(res.Rekeyed, changes[len(changes)-1])
			case changed:
				res.Updated = append(res.Updated, l.Origin)
			default:
				res.Unchanged = append(res.Unchanged, l.Origin)
			}
		}
		if len(changes) > 0 && !force {
			return refuse(&KeyChangeError{Changes: changes})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}
