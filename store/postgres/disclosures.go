package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/runseal/runseal/store"
)

// The disclosure register: one row per act of disclosure, per tenant, kept
// beside the journal (no chain covers it, no export carries it). The act is
// stored whole as JSON: it is read back only to be listed.

// RecordDisclosure stores one act durably; a second act with the same id is
// refused. It implements disclosure.Register.
func (s *Store) RecordDisclosure(ctx context.Context, d store.Disclosure) error {
	if err := d.Validate(); err != nil {
		return err
	}
	if err := s.check(ctx); err != nil {
		return err
	}
	doc, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("record disclosure: %w", err)
	}
	tag, err := s.pool.Exec(ctx, `INSERT INTO `+pgx.Identifier{s.schema}.Sanitize()+`.disclosures(tenant, id, act) VALUES($1,$2,$3) ON CONFLICT DO NOTHING`,
		s.tenant, d.ID, doc)
	if err != nil {
		return fmt.Errorf("record disclosure: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return &store.InvalidArgumentError{Field: "id", Detail: fmt.Sprintf("disclosure %s is already recorded", d.ID)}
	}
	return nil
}

// Disclosures lists the tenant's acts oldest first (ids are ULIDs), strictly
// after the id after ("" from the start), at most limit of them. It
// implements disclosure.Register.
func (s *Store) Disclosures(ctx context.Context, after string, limit int) ([]store.Disclosure, error) {
	if err := store.ValidateLimit(limit); err != nil {
		return nil, err
	}
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT act FROM `+pgx.Identifier{s.schema}.Sanitize()+`.disclosures WHERE tenant=$1 AND id > $2 ORDER BY id LIMIT $3`,
		s.tenant, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list disclosures: %w", err)
	}
	defer rows.Close()
	out := []store.Disclosure{}
	for rows.Next() {
		var doc []byte
		if err := rows.Scan(&doc); err != nil {
			return nil, fmt.Errorf("list disclosures: %w", err)
		}
		var d store.Disclosure
		if err := json.Unmarshal(doc, &d); err != nil {
			return nil, &store.CorruptError{Detail: fmt.Sprintf("disclosure register row does not decode: %v", err)}
		}
		out = append(out, d)
	}
	return out, rows.Err()
}
