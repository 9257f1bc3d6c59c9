package witness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/time/rate"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/log"
)

// Options configures a Witness. The zero value is valid.
type Options struct {
	// Now is the clock for cosignature timestamps and rate limits;
	// time.Now when nil.
	Now func() time.Time
	// Logger receives operational logs; slog.Default() when nil.
	Logger *slog.Logger
	// Metrics, if not nil, is updated with every request and commit.
	Metrics *Metrics
	// ConfigTTL bounds how long an operator's change to the logs' keys
	// and limits takes to reach a running witness; 1s when zero. The
	// witness asks the store at most once per ConfigTTL whether the
	// configuration changed (one read for all logs: the store counts
	// changes), and reads a log's keys and limits again only when it did.
	// A removed key stops counting at once regardless (see Store.DelKey),
	// and an added key or log is read as soon as a request needs it.
	ConfigTTL time.Duration
}

// A Witness is a C2SP tlog-witness: it cosigns a log's checkpoint only if it
// is consistent with the latest checkpoint it cosigned for that log, and
// records the new one durably before it answers.
//
// Requests for one log are serialized, so the check of the old size and the
// write of the new checkpoint cannot interleave with another request for
// that log; the write itself is a compare-and-swap on (origin, size, root)
// in the store, so even a second process on the same file cannot make the
// witness cosign two roots of one size. Requests for different logs run in
// parallel and share the store's group commit.
//
// A Witness is safe for concurrent use.
type Witness struct {
	store     *Store
	cosigners []*checkpoint.Cosigner
	now       func() time.Time
	log       *slog.Logger
	metrics   *Metrics
	ttl       time.Duration

	mu   sync.Mutex
	logs map[string]*logEntry

	// The store's configuration generation as last read, and when: a
	// log's configuration read at this generation is current for up to
	// ttl. genMu makes concurrent requests share one read.
	genMu sync.Mutex
	gen   int64
	genAt time.Time

	// beforeCommit, if set, runs while a request holds its log's lock,
	// after every check and before the commit. Tests use it to stall a
	// request and race another against it.
	beforeCommit func(origin string)
}

// logEntry is the in-memory side of one log.
type logEntry struct {
	// lock serializes the requests for the log: a buffered channel of
	// capacity 1, so a waiting request can give up when its context ends.
	lock chan struct{}

	// Under lock: the log's state as last read or written, if valid.
	stateOK bool
	size    uint64
	root    [32]byte

	// Under lock, valid only while stateOK: the body this process last
	// cosigned for the log, the answer it gave and the Unix second it
	// signed at. A resubmission of that body within the same second gets
	// the same answer without a write: Ed25519 is deterministic and
	// cosignature/v1 timestamps are whole seconds, so signing again would
	// give these very bytes.
	lastBody  []byte
	lastLines []byte
	lastAt    int64

	cfg     atomic.Pointer[logCfg]
	limiter *rate.Limiter
	// evidence paces rewrites of the evidence row last recorded for the
	// log (see keepEvidence); it refills at the log's own rate.
	evidence     *rate.Limiter
	lastEvidence evidenceKey
}

// evidenceKey identifies a row of evidence: identical submissions share it.
type evidenceKey struct {
	kind      string
	size      uint64
	root      [32]byte
	knownSize uint64
}

// logCfg is a log's configuration as read from the store.
type logCfg struct {
	verifiers  note.Verifiers
	vkeyOf     map[keyRef]string // which vkey a verified signature came from
	qpd, burst int64
	// gen is the store's configuration generation read before the
	// configuration was; -1 marks a configuration to read again.
	gen int64
}

type keyRef struct {
	name string
	hash uint32
}

// New returns a witness over st that cosigns with cosigners (one signature
// line each, in order). It records the cosigners' names in st, and fails
// with ErrOwnName if a witnessed log has one of them as its origin.
func New(ctx context.Context, st *Store, cosigners []*checkpoint.Cosigner, opts Options) (*Witness, error) {
	if len(cosigners) == 0 {
		return nil, errors.New("witness: at least one cosigner key is needed")
	}
	seen := make(map[keyRef]bool)
	var names []string
	for _, c := range cosigners {
		k := keyRef{c.Name(), c.KeyHash()}
		if seen[k] {
			return nil, fmt.Errorf("witness: cosigner key %s+%08x given twice", k.name, k.hash)
		}
		seen[k] = true
		names = append(names, c.Name())
	}
	if err := st.AddWitnessNames(ctx, names...); err != nil {
		return nil, fmt.Errorf("witness: %w", err)
	}
	w := &Witness{
		store: st, cosigners: cosigners, now: opts.Now, log: opts.Logger,
		metrics: opts.Metrics, ttl: opts.ConfigTTL, logs: make(map[string]*logEntry),
	}
	if w.now == nil {
		w.now = time.Now
	}
	if w.log == nil {
		w.log = slog.Default()
	}
	if w.ttl <= 0 {
		w.ttl = time.Second
	}
	if w.metrics != nil {
		st.groupHook = w.metrics.observeGroup
	}
	return w, nil
}

// Verifiers returns the verifiers of the witness's cosignatures, for
// clients and policies.
func (w *Witness) Verifiers() []*checkpoint.CosignatureVerifier {
	out := make([]*checkpoint.CosignatureVerifier, len(w.cosigners))
	for i, c := range w.cosigners {
		out[i] = c.Verifier()
	}
	return out
}

// AddCheckpoint handles one add-checkpoint request. It returns the
// witness's cosignature lines, once the checkpoint is durably recorded, or
// an error wrapping the sentinel of the protocol outcome (see StatusCode):
//
//   - ErrMalformedRequest: the note does not parse, the size is above
//     2^63-1 (the most the store holds), or ErrOldTooLarge;
//   - ErrUnknownLog: the origin is not a witnessed log;
//   - ErrNotTrusted: no valid signature from the log's keys, or an invalid
//     one from such a key;
//   - *ConflictError: req.Old is not the size last cosigned (0 if none);
//   - ErrInconsistent: a size-0 checkpoint without the empty root, a
//     proof with old size 0 or between equal sizes, a proof that does not
//     verify, or ErrSplitView: another root for the size held. Refused
//     checkpoints that a log key signed are kept as evidence.
//   - *RateLimitError: the log is over its quota. Only a request that
//     passed every other check and advances the log takes from the quota:
//     a replay of the log's public checkpoints is refused or answered
//     before it is counted, so nobody but the log can use up its quota
//     (spec/witness.md section 5).
//   - ErrUnavailable: the store failed or is closed; nothing was released.
func (w *Witness) AddCheckpoint(ctx context.Context, req *AddCheckpointRequest) ([]byte, error) {
	lines, _, err := w.addCheckpoint(ctx, req)
	return lines, err
}

// addCheckpoint is AddCheckpoint that also returns the origin when it is a
// witnessed log, for per-log metrics that an unknown origin cannot inflate.
func (w *Witness) addCheckpoint(ctx context.Context, req *AddCheckpointRequest) (lines []byte, knownOrigin string, err error) {
	if len(req.Proof) > MaxProofHashes {
		return nil, "", &RequestSyntaxError{Reason: fmt.Sprintf("%d proof hashes, more than %d", len(req.Proof), MaxProofHashes)}
	}
	origin, err := checkpoint.NoteOrigin(req.Note)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrMalformedRequest, err)
	}
	e, cfg, fresh, err := w.entry(ctx, origin, false)
	if err != nil {
		return nil, "", err
	}
	signed, err := checkpoint.Open(req.Note, cfg.verifiers)
	if (errors.Is(err, checkpoint.ErrUnverified) || errors.Is(err, checkpoint.ErrInvalidSignature)) && !fresh {
		// The operator may have just added or replaced the key: read the
		// configuration again before refusing.
		if e, cfg, _, err = w.entry(ctx, origin, true); err != nil {
			return nil, origin, err
		}
		signed, err = checkpoint.Open(req.Note, cfg.verifiers)
	}
	// An incoherent checkpoint (size 0, another root) is reported only
	// once a log key's signature verified; its status comes after the
	// old-size checks, as the protocol orders them.
	incoherent := errors.Is(err, checkpoint.ErrIncoherent)
	switch {
	case incoherent:
	case errors.Is(err, checkpoint.ErrUnverified), errors.Is(err, checkpoint.ErrInvalidSignature):
		return nil, origin, fmt.Errorf("%w: %v", ErrNotTrusted, err)
	case errors.Is(err, checkpoint.ErrMalformedNote), errors.Is(err, checkpoint.ErrMalformedCheckpoint):
		return nil, origin, fmt.Errorf("%w: %v", ErrMalformedRequest, err)
	case err != nil:
		return nil, origin, fmt.Errorf("witness: opening checkpoint of %q: %w", origin, err)
	}
	var cp checkpoint.Checkpoint
	if !incoherent {
		cp = signed.Checkpoint()
	}
	if cp.Size > math.MaxInt64 {
		return nil, origin, &RequestSyntaxError{Reason: fmt.Sprintf("checkpoint size %d is above 2^63-1", cp.Size)}
	}
	if req.Old > cp.Size {
		return nil, origin, fmt.Errorf("%w: old %d, checkpoint size %d", ErrOldTooLarge, req.Old, cp.Size)
	}

	select {
	case e.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, origin, fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
	}
	defer func() { <-e.lock }()
	// A compare-and-swap lost to another process is retried once against
	// the state it found; losing twice in a row is reported as unavailable.
	for attempt := 0; ; attempt++ {
		lines, err = w.locked(ctx, e, &submission{origin, cfg, req, signed, cp, incoherent})
		if !errors.Is(err, errStateChanged) {
			return lines, origin, err
		}
		if attempt == 1 {
			return nil, origin, fmt.Errorf("%w: log %q keeps changing under this witness", ErrUnavailable, origin)
		}
	}
}

// A submission is an add-checkpoint request whose log signature verified.
type submission struct {
	origin     string
	cfg        *logCfg
	req        *AddCheckpointRequest
	signed     *checkpoint.Signed // nil if incoherent
	cp         checkpoint.Checkpoint
	incoherent bool // size 0 with another root than the empty root
}

// locked runs the state-dependent part of AddCheckpoint with e's lock held.
func (w *Witness) locked(ctx context.Context, e *logEntry, sub *submission) ([]byte, error) {
	origin, req, signed, cp := sub.origin, sub.req, sub.signed, sub.cp
	if !e.stateOK {
		size, root, err := w.store.readState(ctx, origin)
		if err != nil {
			if errors.Is(err, ErrUnknownLog) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: reading state of %q: %w", ErrUnavailable, origin, err)
		}
		e.size, e.root, e.stateOK = size, root, true
	}
	if req.Old != e.size {
		return nil, &ConflictError{Size: e.size}
	}
	if sub.incoherent {
		return nil, fmt.Errorf("%w: size 0 with a root other than the empty root", ErrInconsistent)
	}
	if cp.Size == e.size && cp.Root != e.root {
		w.keepEvidence(ctx, e, signed, req, EvidenceSplitView)
		return nil, fmt.Errorf("%w: size %d", ErrSplitView, cp.Size)
	}
	if err := log.VerifyConsistency(e.size, cp.Size, e.root, cp.Root, req.Proof); err != nil {
		if e.size > 0 && cp.Size > e.size {
			w.keepEvidence(ctx, e, signed, req, EvidenceBadProof)
		}
		return nil, fmt.Errorf("%w: from size %d to %d: %v", ErrInconsistent, e.size, cp.Size, err)
	}

	now := w.now()
	body := signed.Text()
	if cp.Size > e.size {
		// Only an advance is charged: it is the one request that only a
		// log can make more of (each needs a new checkpoint it signed).
		if d := e.reserve(now); d > 0 {
			return nil, &RateLimitError{Origin: origin, RetryAfter: d}
		}
	} else if e.lastLines != nil && e.lastAt == now.Unix() && bytes.Equal(e.lastBody, body) {
		// A resubmission of the held checkpoint is free, since anyone
		// can replay it; it is written at most once a second.
		w.metrics.observeCosigned(origin, cp.Size, now)
		return bytes.Clone(e.lastLines), nil
	}
	signers := make([]note.Signer, len(w.cosigners))
	for i, c := range w.cosigners {
		signers[i] = c.At(now)
	}
	lines, err := checkpoint.SignatureLines(cp, signers...)
	if err != nil {
		return nil, fmt.Errorf("witness: cosigning %q at size %d: %w", origin, cp.Size, err)
	}
	u := &casUpdate{
		origin: origin, oldSize: e.size, oldRoot: e.root, newSize: cp.Size, newRoot: cp.Root,
		note: append(signed.Note(), lines...), cosignedAt: now.Unix(),
	}
	for _, s := range signed.Signatures() {
		if k, ok := sub.cfg.vkeyOf[keyRef{s.Name, s.Hash}]; ok {
			u.keys = append(u.keys, k)
		}
	}
	if w.beforeCommit != nil {
		w.beforeCommit(origin)
	}
	if err := w.store.commitCheckpoint(ctx, u); err != nil {
		// Whatever happened, the stored state is what counts now.
		e.stateOK, e.lastLines = false, nil
		switch {
		case errors.Is(err, errStateChanged):
			return nil, err
		case errors.Is(err, ErrNotTrusted):
			w.expire(e)
			return nil, err
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		w.log.Error("witness: committing a checkpoint failed", "origin", origin, "size", cp.Size, "err", err)
		if !errors.Is(err, ErrUnavailable) {
			err = fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		return nil, err
	}
	e.size, e.root = cp.Size, cp.Root
	e.lastBody, e.lastLines, e.lastAt = body, bytes.Clone(lines), now.Unix()
	w.metrics.observeCosigned(origin, cp.Size, now)
	return lines, nil
}

// keepEvidence records a validly signed checkpoint that the witness refuses
// as inconsistent with the state in e. A failure to record is logged, not
// returned: the refusal stands either way.
func (w *Witness) keepEvidence(ctx context.Context, e *logEntry, signed *checkpoint.Signed, req *AddCheckpointRequest, kind string) {
	cp := signed.Checkpoint()
	ev := &Evidence{
		Origin: cp.Origin, Kind: kind, Size: cp.Size, Root: cp.Root, Note: signed.Note(),
		KnownSize: e.size, KnownRoot: e.root,
	}
	if kind == EvidenceBadProof {
		ev.Proof = req.Proof
	}
	// Anyone can replay a refused checkpoint the log signed, so a repeat
	// of the evidence last recorded is written only within the log's own
	// rate (refused all the same when it is not): replays cannot turn
	// into unbounded writes, nor into charges on the log's quota. New
	// evidence is always written; only the log can sign more of it.
	key := evidenceKey{kind, cp.Size, cp.Root, e.size}
	if key == e.lastEvidence && reserve(e.evidence, w.now()) > 0 {
		w.log.Debug("witness: repeated evidence over the log's rate; not counted again", "kind", kind, "origin", cp.Origin, "size", cp.Size)
		return
	}
	e.lastEvidence = key
	level := slog.LevelWarn
	if kind == EvidenceSplitView {
		// Two validly signed roots for one size: the log forked.
		level = slog.LevelError
	}
	w.log.Log(ctx, level, "witness: refused an inconsistent checkpoint signed by the log; kept as evidence",
		"kind", kind, "origin", cp.Origin, "size", cp.Size, "root", cp.Root[:], "known_size", e.size, "known_root", e.root[:])
	w.metrics.observeEvidence(cp.Origin, kind)
	if err := w.store.recordEvidence(ctx, ev); err != nil {
		w.log.Error("witness: could not record evidence", "origin", cp.Origin, "kind", kind, "err", err)
	}
}

// entry returns the in-memory entry and configuration of a witnessed log,
// reading the configuration from the store if it is missing, older than the
// TTL, or reload is set; fresh reports that it was read now. It fails with
// ErrUnknownLog for an origin the store does not have.
func (w *Witness) entry(ctx context.Context, origin string, reload bool) (e *logEntry, cfg *logCfg, fresh bool, err error) {
	now := w.now()
	w.mu.Lock()
	e = w.logs[origin]
	w.mu.Unlock()
	// The generation is read before the row, so a change that lands
	// between the two is read again later, never missed.
	gen, err := w.configGeneration(ctx, now)
	if err != nil {
		return nil, nil, false, fmt.Errorf("%w: reading the configuration generation: %w", ErrUnavailable, err)
	}
	if e != nil && !reload {
		if cfg := e.cfg.Load(); cfg != nil && cfg.gen == gen {
			return e, cfg, false, nil
		}
	}
	row, ok, err := w.store.readLogRow(ctx, origin)
	if err != nil {
		return nil, nil, false, fmt.Errorf("%w: reading log %q: %w", ErrUnavailable, origin, err)
	}
	if !ok {
		return nil, nil, false, fmt.Errorf("%w: %q", ErrUnknownLog, origin)
	}
	cfg = &logCfg{vkeyOf: make(map[keyRef]string, len(row.keys)), qpd: row.qpd, burst: row.burst, gen: gen}
	vs := make([]note.Verifier, 0, len(row.keys))
	for _, k := range row.keys {
		v, err := checkpoint.NewVerifier(k)
		if err != nil {
			// Keys are checked when added; one that fails now is skipped
			// rather than disabling the log's other keys.
			w.log.Error("witness: stored log key does not parse; ignoring it", "origin", origin, "vkey", k, "err", err)
			continue
		}
		vs = append(vs, v)
		cfg.vkeyOf[keyRef{v.Name(), v.KeyHash()}] = k
	}
	cfg.verifiers = note.VerifierList(vs...)
	if e == nil {
		w.mu.Lock()
		if e = w.logs[origin]; e == nil {
			e = &logEntry{
				lock:     make(chan struct{}, 1),
				limiter:  rate.NewLimiter(perDay(row.qpd), int(row.burst)),
				evidence: rate.NewLimiter(perDay(row.qpd), int(row.burst)),
			}
			w.logs[origin] = e
		}
		w.mu.Unlock()
	}
	if old := e.cfg.Swap(cfg); old != nil && (old.qpd != cfg.qpd || old.burst != cfg.burst) {
		for _, l := range []*rate.Limiter{e.limiter, e.evidence} {
			l.SetLimitAt(now, perDay(cfg.qpd))
			l.SetBurstAt(now, int(cfg.burst))
		}
	}
	return e, cfg, true, nil
}

// expire makes the next request for e read its configuration again.
func (w *Witness) expire(e *logEntry) {
	if cfg := e.cfg.Load(); cfg != nil {
		c := *cfg
		c.gen = -1
		e.cfg.CompareAndSwap(cfg, &c)
	}
}

// configGeneration returns the store's configuration generation, read at
// most once per ttl: until it moves, every log's configuration read at it
// is current.
func (w *Witness) configGeneration(ctx context.Context, now time.Time) (int64, error) {
	w.genMu.Lock()
	defer w.genMu.Unlock()
	if !w.genAt.IsZero() && now.Sub(w.genAt) < w.ttl && now.Sub(w.genAt) >= 0 {
		return w.gen, nil
	}
	g, err := w.store.configGeneration(ctx)
	if err != nil {
		return 0, err
	}
	w.gen, w.genAt = g, now
	return g, nil
}

func perDay(qpd int64) rate.Limit { return rate.Limit(float64(qpd) / 86400) }

// reserve takes one request from the log's quota at now and returns zero, or
// leaves the quota untouched and returns how long until a request would be
// allowed.
func (e *logEntry) reserve(now time.Time) time.Duration {
	return reserve(e.limiter, now)
}

func reserve(l *rate.Limiter, now time.Time) time.Duration {
	r := l.ReserveN(now, 1)
	if !r.OK() {
		return time.Hour // burst below 1; the store's checks make this unreachable
	}
	d := r.DelayFrom(now)
	if d > 0 {
		r.CancelAt(now)
	}
	return d
}

// LatestCheckpoint returns the latest checkpoint cosigned for the log whose
// origin hash (lowercase hex SHA-256 of the origin) is originHash: the
// monitoring read of C2SP tlog-witness. It fails with ErrNotCosigned if the
// witness never cosigned that log.
func (w *Witness) LatestCheckpoint(ctx context.Context, originHash string) ([]byte, error) {
	return w.store.LatestCheckpoint(ctx, originHash)
}
