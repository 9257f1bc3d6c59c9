package faulty

import (
	"context"
	"time"

	"github.com/runseal/runseal/store"
)

// The optional interfaces' methods (signed checkpoints, the publication
// outbox and the cosignatures and witness state it earns, witness alarms,
// the disclosure register, API tokens) take numbers and fail on the same
// schedule as the journal's own, so that a publisher's or a server's crash
// test covers a store that fails under them too: a write fails before it
// runs (FailBeforeCommit, and FailInTx: no caller work runs inside these
// transactions), or commits and loses its acknowledgement (LoseAck); a read
// fails before it runs. A method the wrapped store lacks still answers
// store.ErrNotSupported when it draws no fault.

// doErr is do for a method that returns only an error.
func doErr(ctx context.Context, j *Journal, method string, write bool, inner func() error) error {
	_, err := do(ctx, j, method, write, func() (struct{}, error) { return struct{}{}, inner() })
	return err
}

// LatestCheckpoint fails on schedule.
func (j *Journal) LatestCheckpoint(ctx context.Context) (*store.SignedCheckpoint, error) {
	return do(ctx, j, "LatestCheckpoint", false, func() (*store.SignedCheckpoint, error) { return j.Delegate.LatestCheckpoint(ctx) })
}

// SignedCheckpointAt fails on schedule.
func (j *Journal) SignedCheckpointAt(ctx context.Context, size uint64) (*store.SignedCheckpoint, error) {
	return do(ctx, j, "SignedCheckpointAt", false, func() (*store.SignedCheckpoint, error) { return j.Delegate.SignedCheckpointAt(ctx, size) })
}

// CheckpointAt fails on schedule.
func (j *Journal) CheckpointAt(ctx context.Context, size uint64) (store.Checkpoint, error) {
	return do(ctx, j, "CheckpointAt", false, func() (store.Checkpoint, error) { return j.Delegate.CheckpointAt(ctx, size) })
}

// EnqueuePublication fails on schedule.
func (j *Journal) EnqueuePublication(ctx context.Context, size uint64, witnesses []string) error {
	return doErr(ctx, j, "EnqueuePublication", true, func() error { return j.Delegate.EnqueuePublication(ctx, size, witnesses) })
}

// NextPublication fails on schedule.
func (j *Journal) NextPublication(ctx context.Context, witness string) (*store.Publication, error) {
	return do(ctx, j, "NextPublication", false, func() (*store.Publication, error) { return j.Delegate.NextPublication(ctx, witness) })
}

// DeferPublication fails on schedule.
func (j *Journal) DeferPublication(ctx context.Context, witness string, size uint64, next time.Time, lastErr string) error {
	return doErr(ctx, j, "DeferPublication", true, func() error { return j.Delegate.DeferPublication(ctx, witness, size, next, lastErr) })
}

// RecordCosignature fails on schedule.
func (j *Journal) RecordCosignature(ctx context.Context, witness string, size uint64, lines []byte) error {
	return doErr(ctx, j, "RecordCosignature", true, func() error { return j.Delegate.RecordCosignature(ctx, witness, size, lines) })
}

// LastCosigned fails on schedule.
func (j *Journal) LastCosigned(ctx context.Context, witness string) (uint64, bool, error) {
	type last struct {
		size uint64
		ok   bool
	}
	l, err := do(ctx, j, "LastCosigned", false, func() (last, error) {
		n, ok, err := j.Delegate.LastCosigned(ctx, witness)
		return last{n, ok}, err
	})
	return l.size, l.ok, err
}

// Cosignatures fails on schedule.
func (j *Journal) Cosignatures(ctx context.Context, size uint64) (map[string][]byte, error) {
	return do(ctx, j, "Cosignatures", false, func() (map[string][]byte, error) { return j.Delegate.Cosignatures(ctx, size) })
}

// MarkWitnessed fails on schedule.
func (j *Journal) MarkWitnessed(ctx context.Context, size uint64, note []byte) error {
	return doErr(ctx, j, "MarkWitnessed", true, func() error { return j.Delegate.MarkWitnessed(ctx, size, note) })
}

// LatestWitnessed fails on schedule.
func (j *Journal) LatestWitnessed(ctx context.Context) (*store.SignedCheckpoint, error) {
	return do(ctx, j, "LatestWitnessed", false, func() (*store.SignedCheckpoint, error) { return j.Delegate.LatestWitnessed(ctx) })
}

// RecordWitnessAlarm fails on schedule.
func (j *Journal) RecordWitnessAlarm(ctx context.Context, a store.WitnessAlarm) error {
	return doErr(ctx, j, "RecordWitnessAlarm", true, func() error { return j.Delegate.RecordWitnessAlarm(ctx, a) })
}

// WitnessAlarms fails on schedule.
func (j *Journal) WitnessAlarms(ctx context.Context) ([]store.WitnessAlarm, error) {
	return do(ctx, j, "WitnessAlarms", false, func() ([]store.WitnessAlarm, error) { return j.Delegate.WitnessAlarms(ctx) })
}

// RecordDisclosure fails on schedule.
func (j *Journal) RecordDisclosure(ctx context.Context, d store.Disclosure) error {
	return doErr(ctx, j, "RecordDisclosure", true, func() error { return j.Delegate.RecordDisclosure(ctx, d) })
}

// Disclosures fails on schedule.
func (j *Journal) Disclosures(ctx context.Context, after string, limit int) ([]store.Disclosure, error) {
	return do(ctx, j, "Disclosures", false, func() ([]store.Disclosure, error) { return j.Delegate.Disclosures(ctx, after, limit) })
}

// CreateToken fails on schedule.
func (j *Journal) CreateToken(ctx context.Context, t store.Token) error {
	return doErr(ctx, j, "CreateToken", true, func() error { return j.Delegate.CreateToken(ctx, t) })
}

// Tokens fails on schedule.
func (j *Journal) Tokens(ctx context.Context) ([]store.Token, error) {
	return do(ctx, j, "Tokens", false, func() ([]store.Token, error) { return j.Delegate.Tokens(ctx) })
}

// RevokeToken fails on schedule.
func (j *Journal) RevokeToken(ctx context.Context, id string) (bool, error) {
	return do(ctx, j, "RevokeToken", true, func() (bool, error) { return j.Delegate.RevokeToken(ctx, id) })
}

// TokenByID fails on schedule.
func (j *Journal) TokenByID(ctx context.Context, id string) (*store.Token, error) {
	return do(ctx, j, "TokenByID", false, func() (*store.Token, error) { return j.Delegate.TokenByID(ctx, id) })
}

var (
	_ store.CheckpointStore  = (*Journal)(nil)
	_ store.PublicationStore = (*Journal)(nil)
	_ store.AlarmStore       = (*Journal)(nil)
	_ store.TokenStore       = (*Journal)(nil)
)
