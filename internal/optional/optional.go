// Package optional lets a store.Journal decorator keep the optional
// interfaces of the store it wraps (checkpoints, publications, tokens, the
// disclosure register, Origin, Close): a decorator that embeds only
// store.Journal would silently hide them, and callers that type-assert for
// them would conclude the store keeps none.
//
// A method whose interface the wrapped store lacks returns an error wrapping
// store.ErrNotSupported.
package optional

import (
	"context"
	"fmt"
	"time"

	"github.com/runseal/runseal/store"
)

// Delegate forwards the optional interfaces to Inner.
type Delegate struct {
	Inner store.Journal
}

func (d Delegate) missing(what string) error {
	return fmt.Errorf("%T keeps no %s: %w", d.Inner, what, store.ErrNotSupported)
}

// Close closes the wrapped store if it can be closed.
func (d Delegate) Close() error {
	if c, ok := d.Inner.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// Origin is the wrapped store's log origin, or "" if it names none.
func (d Delegate) Origin() string {
	if o, ok := d.Inner.(interface{ Origin() string }); ok {
		return o.Origin()
	}
	return ""
}

func (d Delegate) cs() (store.CheckpointStore, error) {
	cs, ok := d.Inner.(store.CheckpointStore)
	if !ok {
		return nil, d.missing("signed checkpoints")
	}
	return cs, nil
}

// SaveCheckpoint delegates store.CheckpointStore.
func (d Delegate) SaveCheckpoint(ctx context.Context, sc store.SignedCheckpoint) (store.SignedCheckpoint, error) {
	cs, err := d.cs()
	if err != nil {
		return store.SignedCheckpoint{}, err
	}
	return cs.SaveCheckpoint(ctx, sc)
}

// LatestCheckpoint delegates store.CheckpointStore.
func (d Delegate) LatestCheckpoint(ctx context.Context) (*store.SignedCheckpoint, error) {
	cs, err := d.cs()
	if err != nil {
		return nil, err
	}
	return cs.LatestCheckpoint(ctx)
}

// SignedCheckpointAt delegates store.CheckpointStore.
func (d Delegate) SignedCheckpointAt(ctx context.Context, size uint64) (*store.SignedCheckpoint, error) {
	cs, err := d.cs()
	if err != nil {
		return nil, err
	}
	return cs.SignedCheckpointAt(ctx, size)
}

// CheckpointAt delegates store.CheckpointStore.
func (d Delegate) CheckpointAt(ctx context.Context, size uint64) (store.Checkpoint, error) {
	cs, err := d.cs()
	if err != nil {
		return store.Checkpoint{}, err
	}
	return cs.CheckpointAt(ctx, size)
}

func (d Delegate) ps() (store.PublicationStore, error) {
	ps, ok := d.Inner.(store.PublicationStore)
	if !ok {
		return nil, d.missing("publication outbox")
	}
	return ps, nil
}

// EnqueuePublication delegates store.PublicationStore.
func (d Delegate) EnqueuePublication(ctx context.Context, size uint64, witnesses []string) error {
	ps, err := d.ps()
	if err != nil {
		return err
	}
	return ps.EnqueuePublication(ctx, size, witnesses)
}

// NextPublication delegates store.PublicationStore.
func (d Delegate) NextPublication(ctx context.Context, witness string) (*store.Publication, error) {
	ps, err := d.ps()
	if err != nil {
		return nil, err
	}
	return ps.NextPublication(ctx, witness)
}

// DeferPublication delegates store.PublicationStore.
func (d Delegate) DeferPublication(ctx context.Context, witness string, size uint64, next time.Time, lastErr string) error {
	ps, err := d.ps()
	if err != nil {
		return err
	}
	return ps.DeferPublication(ctx, witness, size, next, lastErr)
}

// RecordCosignature delegates store.PublicationStore.
func (d Delegate) RecordCosignature(ctx context.Context, witness string, size uint64, lines []byte) error {
	ps, err := d.ps()
	if err != nil {
		return err
	}
	return ps.RecordCosignature(ctx, witness, size, lines)
}

// LastCosigned delegates store.PublicationStore.
func (d Delegate) LastCosigned(ctx context.Context, witness string) (uint64, bool, error) {
	ps, err := d.ps()
	if err != nil {
		return 0, false, err
	}
	return ps.LastCosigned(ctx, witness)
}

// Cosignatures delegates store.PublicationStore.
func (d Delegate) Cosignatures(ctx context.Context, size uint64) (map[string][]byte, error) {
	ps, err := d.ps()
	if err != nil {
		return nil, err
	}
	return ps.Cosignatures(ctx, size)
}

// MarkWitnessed delegates store.PublicationStore.
func (d Delegate) MarkWitnessed(ctx context.Context, size uint64, note []byte) error {
	ps, err := d.ps()
	if err != nil {
		return err
	}
	return ps.MarkWitnessed(ctx, size, note)
}

// LatestWitnessed delegates store.PublicationStore.
func (d Delegate) LatestWitnessed(ctx context.Context) (*store.SignedCheckpoint, error) {
	ps, err := d.ps()
	if err != nil {
		return nil, err
	}
	return ps.LatestWitnessed(ctx)
}

func (d Delegate) ts() (store.TokenStore, error) {
	ts, ok := d.Inner.(store.TokenStore)
	if !ok {
		return nil, d.missing("tokens")
	}
	return ts, nil
}

// CreateToken delegates store.TokenStore.
func (d Delegate) CreateToken(ctx context.Context, t store.Token) error {
	ts, err := d.ts()
	if err != nil {
		return err
	}
	return ts.CreateToken(ctx, t)
}

// Tokens delegates store.TokenStore.
func (d Delegate) Tokens(ctx context.Context) ([]store.Token, error) {
	ts, err := d.ts()
	if err != nil {
		return nil, err
	}
	return ts.Tokens(ctx)
}

// RevokeToken delegates store.TokenStore.
func (d Delegate) RevokeToken(ctx context.Context, id string) (bool, error) {
	ts, err := d.ts()
	if err != nil {
		return false, err
	}
	return ts.RevokeToken(ctx, id)
}

// TokenByID delegates store.TokenStore.
func (d Delegate) TokenByID(ctx context.Context, id string) (*store.Token, error) {
	ts, err := d.ts()
	if err != nil {
		return nil, err
	}
	return ts.TokenByID(ctx, id)
}

type register interface {
	RecordDisclosure(ctx context.Context, d store.Disclosure) error
	Disclosures(ctx context.Context, after string, limit int) ([]store.Disclosure, error)
}

// RecordDisclosure delegates the disclosure register.
func (d Delegate) RecordDisclosure(ctx context.Context, dis store.Disclosure) error {
	r, ok := d.Inner.(register)
	if !ok {
		return d.missing("disclosure register")
	}
	return r.RecordDisclosure(ctx, dis)
}

// Disclosures delegates the disclosure register.
func (d Delegate) Disclosures(ctx context.Context, after string, limit int) ([]store.Disclosure, error) {
	r, ok := d.Inner.(register)
	if !ok {
		return nil, d.missing("disclosure register")
	}
	return r.Disclosures(ctx, after, limit)
}

// VerifyLog delegates store.LogVerifier.
func (d Delegate) VerifyLog(ctx context.Context) (store.LogReport, error) {
	lv, ok := d.Inner.(store.LogVerifier)
	if !ok {
		return store.LogReport{}, d.missing("log verifier")
	}
	return lv.VerifyLog(ctx)
}

// LogLeaves delegates the log's leaf reads (tiles.Source). Leaves are
// terminal chain hashes, never sealed payloads, so a sealing decorator
// passes them through unchanged.
func (d Delegate) LogLeaves(ctx context.Context, start, end uint64) ([]store.Digest, error) {
	l, ok := d.Inner.(interface {
		LogLeaves(ctx context.Context, start, end uint64) ([]store.Digest, error)
	})
	if !ok {
		return nil, d.missing("log leaves")
	}
	return l.LogLeaves(ctx, start, end)
}

// LogNodes delegates the log's stored node reads (tiles.Source).
func (d Delegate) LogNodes(ctx context.Context, level uint, start, end uint64) ([]store.Digest, error) {
	l, ok := d.Inner.(interface {
		LogNodes(ctx context.Context, level uint, start, end uint64) ([]store.Digest, error)
	})
	if !ok {
		return nil, d.missing("log nodes")
	}
	return l.LogNodes(ctx, level, start, end)
}

func (d Delegate) as() (store.AlarmStore, error) {
	as, ok := d.Inner.(store.AlarmStore)
	if !ok {
		return nil, d.missing("witness alarms")
	}
	return as, nil
}

// RecordWitnessAlarm delegates store.AlarmStore, so that a publisher over a
// decorated store keeps a witness's rollback where status commands and the
// console show it.
func (d Delegate) RecordWitnessAlarm(ctx context.Context, a store.WitnessAlarm) error {
	as, err := d.as()
	if err != nil {
		return err
	}
	return as.RecordWitnessAlarm(ctx, a)
}

// WitnessAlarms delegates store.AlarmStore.
func (d Delegate) WitnessAlarms(ctx context.Context) ([]store.WitnessAlarm, error) {
	as, err := d.as()
	if err != nil {
		return nil, err
	}
	return as.WitnessAlarms(ctx)
}
