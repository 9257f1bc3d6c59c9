package publish

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/witness"
)

// Store is what a Publisher needs of the journal store: the signed
// checkpoints, the durable outbox of publications (store.PublicationStore),
// and consistency proofs of the log. Declared here, as sumdb/tlog declares
// HashReader, so that a publisher takes only these methods of a store and
// tests can stand in for them.
type Store interface {
	// LatestCheckpoint returns the signed checkpoint of the largest size
	// kept, or nil.
	LatestCheckpoint(ctx context.Context) (*store.SignedCheckpoint, error)
	// SignedCheckpointAt returns the signed checkpoint kept at size, or nil.
	SignedCheckpointAt(ctx context.Context, size uint64) (*store.SignedCheckpoint, error)
	// Checkpoint returns the log's current size and root.
	Checkpoint(ctx context.Context) (store.Checkpoint, error)
	// ConsistencyProof proves the log at newSize extends it at oldSize.
	ConsistencyProof(ctx context.Context, oldSize, newSize uint64) ([]store.Digest, error)

	// The outbox, as documented on store.PublicationStore.
	EnqueuePublication(ctx context.Context, size uint64, witnesses []string) error
	NextPublication(ctx context.Context, witness string) (*store.Publication, error)
	DeferPublication(ctx context.Context, witness string, size uint64, next time.Time, lastErr string) error
	RecordCosignature(ctx context.Context, witness string, size uint64, lines []byte) error
	LastCosigned(ctx context.Context, witness string) (uint64, bool, error)
	Cosignatures(ctx context.Context, size uint64) (map[string][]byte, error)
	MarkWitnessed(ctx context.Context, size uint64, note []byte) error
}

// Options configures a Publisher. The zero value is valid.
type Options struct {
	// HTTPClient sends every request; one with a 30s timeout when nil.
	HTTPClient *http.Client
	// MinBackoff is the first retry delay after a failure; 1s when zero.
	MinBackoff time.Duration
	// MaxBackoff caps the retry delay; 5m when zero.
	MaxBackoff time.Duration
	// Poll is how often a worker looks for work it was not told about
	// (checkpoints queued by another process); 5s when zero.
	Poll time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Logger receives operational logs; slog.Default() when nil.
	Logger *slog.Logger
	// Registerer, if not nil, receives the publisher's metrics.
	Registerer prometheus.Registerer
}

// A Publisher sends a log's signed checkpoints to the witnesses of a policy
// and keeps the cosignatures they return, from a durable outbox in the
// journal store (store.PublicationStore). One worker per witness sends the
// newest queued checkpoint with a consistency proof from the size that
// witness last cosigned, re-proves from the size a 409 reports, verifies
// every returned cosignature with that witness's key before keeping it,
// and retries failures with capped exponential backoff and jitter. A
// checkpoint is marked witnessed once the kept cosignatures meet the
// policy's quorum, checked with Policy.Verify over the rebuilt note.
//
// Every step's state is in the store, so a publisher that restarts resumes
// where the last one stopped; a publication cut off between the witness's
// commit and ours is sent again and the witness cosigns the same checkpoint
// again, so nothing is lost and nothing is kept twice.
type Publisher struct {
	st      Store
	policy  *checkpoint.Policy
	logKey  note.Verifier
	logArgs []note.Verifier // logKey, unless the policy already lists it
	workers []*pubWorker
	opts    Options
	log     *slog.Logger
	m       *pubMetrics
}

type pubWorker struct {
	id     string // store key: "<key name>+<key hash>", stable across policy renames
	name   string // the policy's name, for logs
	v      *checkpoint.CosignatureVerifier
	client *witness.Client
	wake   chan struct{}
}

// WitnessID is how the store names a witness: its cosignature key's name
// and key ID, which stay the same when a policy file renames it.
func WitnessID(v *checkpoint.CosignatureVerifier) string {
	return fmt.Sprintf("%s+%08x", v.Name(), v.KeyHash())
}

// New returns a publisher of the log whose note key verifies with logKey,
// to the witnesses of policy that have a URL. A policy none of whose
// witnesses has a URL is refused with ErrNoWitnesses: it could never be met
// by us.
func New(st Store, policy *checkpoint.Policy, logKey note.Verifier, opts Options) (*Publisher, error) {
	if st == nil || policy == nil || logKey == nil {
		return nil, errors.New("publish: New needs a store, a policy and the log's key")
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Minute
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = opts.MinBackoff
	}
	if opts.Poll <= 0 {
		opts.Poll = 5 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	p := &Publisher{st: st, policy: policy, logKey: logKey, opts: opts, log: opts.Logger}
	if p.log == nil {
		p.log = slog.Default()
	}
	p.logArgs = []note.Verifier{logKey}
	for _, l := range policy.Logs() {
		if l.Name() == logKey.Name() && l.KeyHash() == logKey.KeyHash() {
			p.logArgs = nil
		}
	}
	for _, w := range policy.Witnesses() {
		if w.URL == "" {
			p.log.Warn("publisher: policy witness has no URL; its cosignatures must come from elsewhere", "witness", w.Name)
			continue
		}
		c, err := witness.NewClient(w.URL, opts.HTTPClient)
		if err != nil {
			return nil, fmt.Errorf("publish: witness %s: %w", w.Name, err)
		}
		p.workers = append(p.workers, &pubWorker{id: WitnessID(w.Verifier), name: w.Name, v: w.Verifier, client: c, wake: make(chan struct{}, 1)})
	}
	if len(p.workers) == 0 && policy.RequiresWitnesses() {
		return nil, fmt.Errorf("%w: no witness of the policy has a URL", ErrNoWitnesses)
	}
	m, err := newPubMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	p.m = m
	return p, nil
}

// Witnesses returns the store ids of the witnesses published to.
func (p *Publisher) Witnesses() []string {
	out := make([]string, len(p.workers))
	for i, w := range p.workers {
		out[i] = w.id
	}
	return out
}

// Enqueue queues the signed checkpoint kept at size for every witness and
// wakes the workers. It returns once the queue rows are durable.
func (p *Publisher) Enqueue(ctx context.Context, size uint64) error {
	if err := p.st.EnqueuePublication(ctx, size, p.Witnesses()); err != nil {
		return err
	}
	for _, w := range p.workers {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	if !p.policy.RequiresWitnesses() {
		// "quorum none": no cosignature will ever arrive to trigger the
		// check, and none is needed.
		return p.checkWitnessed(ctx, size)
	}
	return nil
}

// Run publishes until ctx ends, and returns nil then. It first queues the
// latest signed checkpoint, so one signed just before a crash and never
// queued is not lost.
func (p *Publisher) Run(ctx context.Context) error {
	if latest, err := p.st.LatestCheckpoint(ctx); err != nil {
		return fmt.Errorf("publisher: %w", err)
	} else if latest != nil {
		if err := p.Enqueue(ctx, latest.Size); err != nil {
			return fmt.Errorf("publisher: %w", err)
		}
		// A quorum met by cosignatures kept before a crash, but not yet
		// marked, is marked now.
		if err := p.checkWitnessed(ctx, latest.Size); err != nil {
			p.log.Warn("publisher: checking quorum", "size", latest.Size, "err", err)
		}
	}
	done := make(chan struct{})
	for _, w := range p.workers {
		go func() {
			defer func() { done <- struct{}{} }()
			p.work(ctx, w)
		}()
	}
	for range p.workers {
		<-done
	}
	return nil
}

func (p *Publisher) work(ctx context.Context, w *pubWorker) {
	for ctx.Err() == nil {
		wait := p.opts.Poll
		pub, err := p.st.NextPublication(ctx, w.id)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				p.log.Error("publisher: reading the outbox", "witness", w.name, "err", err)
			}
		case pub == nil:
		case pub.NextAttempt.After(p.opts.Now()) && pub.NextAttempt.Sub(p.opts.Now()) <= p.opts.MaxBackoff:
			// A retry further off than the longest backoff was timed
			// by a clock that has since gone back: it is due now.
			wait = min(wait, pub.NextAttempt.Sub(p.opts.Now()))
		default:
			err := p.publish(ctx, w, pub.Size)
			if err == nil {
				wait = 0
				break
			}
			if ctx.Err() != nil {
				return
			}
			delay := p.backoff(pub.Attempts + 1)
			var se *witness.StatusError
			if errors.As(err, &se) && se.RetryAfter > delay {
				delay = min(se.RetryAfter, p.opts.MaxBackoff)
			}
			p.m.failed(w.id)
			lvl := slog.LevelWarn
			if errors.Is(err, ErrWitnessAhead) || errors.Is(err, witness.ErrInconsistent) {
				// Not a flaky network: the witness and this log disagree
				// about history. Someone must look.
				lvl = slog.LevelError
			}
			p.log.Log(ctx, lvl, "publisher: add-checkpoint failed; will retry", "witness", w.name, "size", pub.Size,
				"attempt", pub.Attempts+1, "retry_in", delay.Round(time.Millisecond), "err", err)
			// A fresh context: the failure must be recorded even as ctx ends.
			if derr := p.st.DeferPublication(context.WithoutCancel(ctx), w.id, pub.Size, p.opts.Now().Add(delay), err.Error()); derr != nil {
				p.log.Error("publisher: recording a failed attempt", "witness", w.name, "err", derr)
			}
			wait = min(wait, delay)
		}
		if wait <= 0 {
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-w.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// backoff returns the delay before attempt n (from 1): MinBackoff doubled
// each attempt, capped at MaxBackoff, then jittered to between half and all
// of it, so many logs retrying one witness do not arrive together.
func (p *Publisher) backoff(n int) time.Duration {
	d := p.opts.MinBackoff
	for i := 1; i < n && d < p.opts.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, p.opts.MaxBackoff)
	return d/2 + rand.N(d/2+1)
}

// maxReproves bounds the 409 round trips of one attempt; a witness whose
// size keeps moving is someone else publishing too, and the next attempt
// will catch up.
const maxReproves = 3

func (p *Publisher) publish(ctx context.Context, w *pubWorker, size uint64) error {
	sc, err := p.st.SignedCheckpointAt(ctx, size)
	if err != nil {
		return err
	}
	if sc == nil {
		return fmt.Errorf("%w: size %d", ErrNoCheckpoint, size)
	}
	signed, err := checkpoint.Open(sc.Note, note.VerifierList(p.logKey))
	if err != nil {
		return fmt.Errorf("%w: the checkpoint at %d does not verify with the log's key: %v", ErrNoCheckpoint, size, err)
	}
	old, _, err := p.st.LastCosigned(ctx, w.id)
	if err != nil {
		return err
	}
	cosigned := old
	for range maxReproves {
		if old > size {
			return p.ahead(ctx, w, old, size)
		}
		var proof [][32]byte
		if old > 0 && old < size {
			ds, err := p.st.ConsistencyProof(ctx, old, size)
			if err != nil {
				return fmt.Errorf("consistency proof %d..%d: %w", old, size, err)
			}
			proof = make([][32]byte, len(ds))
			for i, d := range ds {
				proof[i] = d
			}
		}
		lines, err := w.client.AddCheckpoint(ctx, old, proof, sc.Note)
		var ce *witness.ConflictError
		if errors.As(err, &ce) {
			if ce.Size < cosigned {
				p.rolledBack(ctx, w, &RollbackError{Witness: w.name, Reported: ce.Size, Cosigned: cosigned})
			} else {
				p.log.Info("publisher: witness is at another size; proving from there", "witness", w.name, "sent_old", old, "witness_size", ce.Size)
			}
			old = ce.Size
			continue
		}
		if err != nil {
			return err
		}
		line, err := verifiedLine(signed, lines, w.v)
		if err != nil {
			return fmt.Errorf("witness %s: %w", w.name, err)
		}
		if err := p.st.RecordCosignature(ctx, w.id, size, line); err != nil {
			return fmt.Errorf("keeping the cosignature: %w", err)
		}
		p.m.cosigned(w.id, size)
		p.log.Info("publisher: cosigned", "witness", w.name, "size", size)
		return p.checkWitnessed(ctx, size)
	}
	return fmt.Errorf("%w: %s (last %d)", ErrWitnessMoving, w.name, old)
}

// AlarmRecorder is what a Store may also offer to keep alarms where status
// commands show them (store.AlarmStore). Without it, alarms are logged and
// counted only.
type AlarmRecorder interface {
	RecordWitnessAlarm(ctx context.Context, a store.WitnessAlarm) error
}

// rolledBack raises the alarm for a witness that reported a size below the
// largest it cosigned for us: it lost or rolled back its state, so it would
// now cosign a fork of what it vouched for. The alarm is logged at ERROR,
// counted, and kept in the store; publishing goes on from the size the
// witness reports, since a fresh cosignature from it is still worth having
// and refusing it would hide nothing.
func (p *Publisher) rolledBack(ctx context.Context, w *pubWorker, rb *RollbackError) {
	p.m.rollback(w.id)
	p.log.Error("publisher: ALARM: witness lost or rolled back its state; publishing from its size",
		"witness", w.name, "reported_size", rb.Reported, "cosigned_size", rb.Cosigned, "err", rb)
	ar, ok := p.st.(AlarmRecorder)
	if !ok {
		return
	}
	a := store.WitnessAlarm{
		Witness: w.id, Kind: store.AlarmWitnessRolledBack, Reported: rb.Reported, Cosigned: rb.Cosigned,
		At: p.opts.Now(), Detail: rb.Error(),
	}
	// A fresh context: the alarm must be kept even as ctx ends.
	if err := ar.RecordWitnessAlarm(context.WithoutCancel(ctx), a); err != nil {
		p.log.Error("publisher: keeping a witness alarm", "witness", w.name, "err", err)
	}
}

// ahead handles a witness whose size is above the checkpoint queued for it.
// Above the whole log is an alarm; within it, the witness already holds a
// newer checkpoint of ours, and only a newer one can be cosigned.
func (p *Publisher) ahead(ctx context.Context, w *pubWorker, witnessSize, size uint64) error {
	cur, err := p.st.Checkpoint(ctx)
	if err != nil {
		return err
	}
	if witnessSize > cur.Size {
		p.m.alarm(w.id)
		return &AheadError{Witness: w.name, WitnessSize: witnessSize, LogSize: cur.Size}
	}
	return fmt.Errorf("%w: %s is at %d, the queued checkpoint %d; waiting for a newer one", ErrSuperseded, w.name, witnessSize, size)
}

// verifiedLine returns the one signature line in lines by the witness's key,
// after checking it over the exact checkpoint signed. Lines by other keys
// are dropped; a line by the key that does not verify is an error, never
// kept.
func verifiedLine(signed *checkpoint.Signed, lines []byte, v *checkpoint.CosignatureVerifier) ([]byte, error) {
	with, err := signed.WithSignatures(lines, note.VerifierList(v))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadCosignature, err)
	}
	for _, s := range with.Signatures() {
		if s.Name == v.Name() && s.Hash == v.KeyHash() {
			return []byte("\u2014 " + s.Name + " " + s.Base64 + "\n"), nil
		}
	}
	return nil, fmt.Errorf("%w: no line by its key", ErrBadCosignature)
}

// checkWitnessed marks size witnessed if the log signature and the
// cosignatures kept for it satisfy the policy, judged by Policy.Verify, the
// auditor's own check, over the note rebuilt from what is kept.
func (p *Publisher) checkWitnessed(ctx context.Context, size uint64) error {
	note, met, err := WitnessedNote(ctx, p.st, p.policy, p.logArgs, size)
	if err != nil || !met {
		return err
	}
	if err := p.st.MarkWitnessed(ctx, size, note); err != nil {
		return err
	}
	p.m.witnessed(size)
	p.log.Info("publisher: checkpoint witnessed", "size", size)
	return nil
}

// WitnessedNote rebuilds the note of the signed checkpoint at size with the
// cosignatures kept for it, and reports whether it passes policy.Verify
// with the policy's log keys plus logs. The note holds verified signatures
// only. A note that verifies but misses the quorum is returned with false.
func WitnessedNote(ctx context.Context, st Store, policy *checkpoint.Policy, logs []note.Verifier, size uint64) ([]byte, bool, error) {
	sc, err := st.SignedCheckpointAt(ctx, size)
	if err != nil || sc == nil {
		return nil, false, err
	}
	cos, err := st.Cosignatures(ctx, size)
	if err != nil {
		return nil, false, err
	}
	ids := make([]string, 0, len(cos))
	for id := range cos {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	msg := bytes.Clone(sc.Note)
	for _, id := range ids {
		msg = append(msg, cos[id]...)
	}
	signed, err := policy.Verify(msg, logs...)
	if errors.Is(err, checkpoint.ErrPolicyNotMet) {
		return msg, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return signed.Note(), true, nil
}

// pubMetrics are the publisher's Prometheus metrics; nil records nothing.
type pubMetrics struct {
	cosignedSize  *prometheus.GaugeVec
	failures      *prometheus.CounterVec
	alarms        *prometheus.CounterVec
	rollbacks     *prometheus.CounterVec
	witnessedSize prometheus.Gauge
}

func newPubMetrics(reg prometheus.Registerer) (*pubMetrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &pubMetrics{
		cosignedSize: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "runseal_publisher_cosigned_size", Help: "Largest checkpoint size each witness cosigned.",
		}, []string{"witness"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runseal_publisher_failures_total", Help: "Failed add-checkpoint attempts by witness.",
		}, []string{"witness"}),
		alarms: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runseal_publisher_witness_ahead_total", Help: "Witness answers claiming a size beyond the log: another log under our origin.",
		}, []string{"witness"}),
		rollbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runseal_publisher_witness_rollback_total", Help: "Witness answers reporting a size below one it cosigned for us: lost or rolled-back witness state.",
		}, []string{"witness"}),
		witnessedSize: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "runseal_publisher_witnessed_size", Help: "Size of the newest checkpoint whose cosignatures meet the policy.",
		}),
	}
	for _, c := range []prometheus.Collector{m.cosignedSize, m.failures, m.alarms, m.rollbacks, m.witnessedSize} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("publish: registering metrics: %w", err)
		}
	}
	return m, nil
}

func (m *pubMetrics) cosigned(w string, size uint64) {
	if m != nil {
		m.cosignedSize.WithLabelValues(w).Set(float64(size))
	}
}

func (m *pubMetrics) failed(w string) {
	if m != nil {
		m.failures.WithLabelValues(w).Inc()
	}
}

func (m *pubMetrics) alarm(w string) {
	if m != nil {
		m.alarms.WithLabelValues(w).Inc()
	}
}

func (m *pubMetrics) rollback(w string) {
	if m != nil {
		m.rollbacks.WithLabelValues(w).Inc()
	}
}

func (m *pubMetrics) witnessed(size uint64) {
	if m != nil {
		m.witnessedSize.Set(float64(size))
	}
}
