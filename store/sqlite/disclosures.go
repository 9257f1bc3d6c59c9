package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/runseal/runseal/store"
)

// The disclosure register: one row per act of disclosure, per tenant. It is
// an operator table beside the journal (like leases and cancellations): no
// chain covers it and no export carries it. Its schema is in the schema
// string of sqlite.go (table disclosures).

// RecordDisclosure stores one act of disclosure durably (the call returns
// after the commit's fsync). A second act with the same id is refused.
// It implements disclosure.Register.
func (s *Store) RecordDisclosure(ctx context.Context, d store.Disclosure) error {
	if err := d.Validate(); err != nil {
		return err
	}
	runs := make([]string, len(d.Runs))
	for i, r := range d.Runs {
		runs[i] = r.String()
	}
	cases := make([]string, len(d.Cases))
	for i, c := range d.Cases {
		cases[i] = c.String()
	}
	runsJSON, err := json.Marshal(runs)
	if err != nil {
		return err
	}
	casesJSON, err := json.Marshal(cases)
	if err != nil {
		return err
	}
	for _, n := range []uint64{d.Checkpoint.Size, d.Carried, d.Sealed, d.Records} {
		if n > math.MaxInt64 {
			return &store.InvalidArgumentError{Field: "disclosure", Detail: "a count does not fit a signed 64-bit integer"}
		}
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		bg := context.Background()
		var n int
		if err := tx.QueryRowContext(bg, `SELECT count(*) FROM disclosures WHERE tenant=? AND id=?`, s.tenant, d.ID).Scan(&n); err != nil {
			return fmt.Errorf("record disclosure: %w", err)
		}
		if n > 0 {
			return &store.InvalidArgumentError{Field: "id", Detail: fmt.Sprintf("disclosure %s is already recorded", d.ID)}
		}
		_, err := tx.ExecContext(bg, `INSERT INTO disclosures(tenant, id, at, actor, basis, recipient, runs, cases,
			origin, size, root, package, bytes, runs_carried, sealed, records, signed_by) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
			s.tenant, d.ID, d.At.UnixNano(), d.By.Actor, string(d.By.Basis), d.Recipient, string(runsJSON), string(casesJSON),
			d.Checkpoint.Origin, int64(d.Checkpoint.Size), d.Checkpoint.Root[:], d.Package[:], d.Bytes,
			int64(d.Carried), int64(d.Sealed), int64(d.Records), d.SignedBy)
		if err != nil {
			return fmt.Errorf("record disclosure: %w", err)
		}
		return nil
	})
}

// Disclosures lists the tenant's acts of disclosure oldest first (ids are
// ULIDs, so id order is time order), strictly after the id after ("" from
// the start), at most limit of them. It implements disclosure.Register.
func (s *Store) Disclosures(ctx context.Context, after string, limit int) ([]store.Disclosure, error) {
	if err := store.ValidateLimit(limit); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT id, at, actor, basis, recipient, runs, cases, origin, size, root, package, bytes,
		runs_carried, sealed, records, signed_by FROM disclosures WHERE tenant=? AND id > ? ORDER BY id LIMIT ?`, s.tenant, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list disclosures: %w", err)
	}
	defer rows.Close()
	out := []store.Disclosure{}
	for rows.Next() {
		var d store.Disclosure
		var at, size, carried, sealed, records int64
		var basis, runsJSON, casesJSON string
		var root, pkg []byte
		if err := rows.Scan(&d.ID, &at, &d.By.Actor, &basis, &d.Recipient, &runsJSON, &casesJSON, &d.Checkpoint.Origin,
			&size, &root, &pkg, &d.Bytes, &carried, &sealed, &records, &d.SignedBy); err != nil {
			return nil, fmt.Errorf("list disclosures: %w", err)
		}
		corrupt := func(detail string) error {
			return &store.CorruptError{Detail: fmt.Sprintf("disclosure %s: %s", d.ID, detail)}
		}
		if len(root) != 32 || len(pkg) != 32 || size < 0 || carried < 0 || sealed < 0 || records < 0 {
			return nil, corrupt("malformed row")
		}
		d.At = time.Unix(0, at).UTC()
		d.By.Basis = store.Basis(basis)
		d.Checkpoint.Size, d.Checkpoint.Root, d.Package = uint64(size), store.Digest(root), store.Digest(pkg)
		d.Carried, d.Sealed, d.Records = uint64(carried), uint64(sealed), uint64(records)
		if err := json.Unmarshal([]byte(runsJSON), &d.Runs); err != nil {
			return nil, corrupt("runs do not parse")
		}
		if err := json.Unmarshal([]byte(casesJSON), &d.Cases); err != nil {
			return nil, corrupt("cases do not parse")
		}
		out = append(out, d)
	}
	return out, rows.Err()
}
