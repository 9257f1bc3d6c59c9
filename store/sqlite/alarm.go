package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/runseal/runseal/store"
)

var _ store.AlarmStore = (*Store)(nil)

// RecordWitnessAlarm implements store.AlarmStore.
func (s *Store) RecordWitnessAlarm(ctx context.Context, a store.WitnessAlarm) error {
	if err := a.Validate(); err != nil {
		return err
	}
	at := a.At
	if at.IsZero() {
		at = s.now()
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(context.Background(), `INSERT INTO witness_alarms(tenant, witness, kind, reported, cosigned, at, detail)
			VALUES(?,?,?,?,?,?,?) ON CONFLICT DO NOTHING`,
			s.tenant, a.Witness, a.Kind, int64(a.Reported), int64(a.Cosigned), at.UnixNano(), a.Detail)
		if err != nil {
			return fmt.Errorf("record witness alarm for %s: %w", a.Witness, err)
		}
		return nil
	})
}

// WitnessAlarms implements store.AlarmStore.
func (s *Store) WitnessAlarms(ctx context.Context) ([]store.WitnessAlarm, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT witness, kind, reported, cosigned, at, detail FROM witness_alarms
		WHERE tenant=? ORDER BY at, witness`, s.tenant)
	if err != nil {
		return nil, fmt.Errorf("witness alarms: %w", err)
	}
	defer rows.Close()
	var out []store.WitnessAlarm
	for rows.Next() {
		var a store.WitnessAlarm
		var reported, cosigned, at int64
		if err := rows.Scan(&a.Witness, &a.Kind, &reported, &cosigned, &at, &a.Detail); err != nil {
			return nil, fmt.Errorf("witness alarms: %w", err)
		}
		if reported < 0 || cosigned < 0 {
			return nil, &store.CorruptError{Detail: "negative size in a witness alarm"}
		}
		a.Reported, a.Cosigned, a.At = uint64(reported), uint64(cosigned), time.Unix(0, at).UTC()
		out = append(out, a)
	}
	return out, rows.Err()
}
