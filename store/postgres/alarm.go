package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/runseal/runseal/store"
)

var _ store.AlarmStore = (*Store)(nil)

// RecordWitnessAlarm implements store.AlarmStore.
func (s *Store) RecordWitnessAlarm(ctx context.Context, a store.WitnessAlarm) error {
	if err := a.Validate(); err != nil {
		return err
	}
	return s.inTx(ctx, "record witness alarm", func(tx pgx.Tx) error {
		at := any(nil)
		if !a.At.IsZero() {
			at = a.At
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+s.table("witness_alarms")+`(tenant, witness, kind, reported, cosigned, at, detail)
			VALUES($1,$2,$3,$4,$5,coalesce($6::timestamptz, now()),$7) ON CONFLICT DO NOTHING`,
			s.tenant, a.Witness, a.Kind, int64(a.Reported), int64(a.Cosigned), at, a.Detail); err != nil {
			return fmt.Errorf("record witness alarm for %s: %w", a.Witness, err)
		}
		return nil
	})
}

// WitnessAlarms implements store.AlarmStore.
func (s *Store) WitnessAlarms(ctx context.Context) ([]store.WitnessAlarm, error) {
	rows, err := s.pool.Query(ctx, `SELECT witness, kind, reported, cosigned, at, detail FROM `+s.table("witness_alarms")+`
		WHERE tenant=$1 ORDER BY at, witness`, s.tenant)
	if err != nil {
		return nil, fmt.Errorf("witness alarms: %w", err)
	}
	defer rows.Close()
	var out []store.WitnessAlarm
	for rows.Next() {
		var a store.WitnessAlarm
		var reported, cosigned int64
		if err := rows.Scan(&a.Witness, &a.Kind, &reported, &cosigned, &a.At, &a.Detail); err != nil {
			return nil, fmt.Errorf("witness alarms: %w", err)
		}
		if reported < 0 || cosigned < 0 {
			return nil, &store.CorruptError{Detail: "negative size in a witness alarm"}
		}
		a.Reported, a.Cosigned, a.At = uint64(reported), uint64(cosigned), a.At.UTC()
		out = append(out, a)
	}
	return out, rows.Err()
}
