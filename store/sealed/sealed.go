// Package sealed is a decorator over any store.Journal that seals the
// caller's data field by field, so that erasing a scope's key (a case, or a
// run without a case) makes those fields unreadable in every copy of the
// journal, backups included, while the chain, the seals, the Merkle log and
// every proof still verify with no key.
//
// Invariants:
//   - The kind, every routing field (seq, run, case, step, phase,
//     effect_key, epoch, v) and every field a store index reads stay clear
//     (see Seals and spec/sealing.md), so fencing, exactly-once, admission,
//     the outcome index, waiting runs and cases work unchanged.
//   - Every other field is replaced by an Envelope: a fresh data key per
//     record, wrapped under the scope's key by the key ring, a fresh nonce
//     per field, XChaCha20-Poly1305 with associated data binding tenant,
//     run, seq and field.
//   - The chain hashes the sealed bytes; Record.Raw is always the stored
//     bytes. Reads return the opened fields in Record.Fields beside them.
//   - An erased scope's fields read as the erased marker, never as an error
//     of the whole read and never as plaintext; an envelope that does not
//     open (damaged or moved) is a store.CorruptError.
//   - A restored record (Append.Raw) is written exactly as recorded, never
//     sealed a second time.
package sealed

import (
	"context"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/runseal/runseal/internal/canon"
	"github.com/runseal/runseal/internal/optional"
	"github.com/runseal/runseal/keyring"
	"github.com/runseal/runseal/store"
)

// Options configures a sealing journal.
type Options struct {
	// Rand supplies nonces; nil is crypto/rand. Only vectors set it.
	Rand io.Reader
}

// Journal seals on append and opens on read. It implements store.Journal
// and delegates everything but appends and reads of records.
type Journal struct {
	store.Journal
	optional.Delegate
	ring keyring.Ring
	rand io.Reader
	ad   func(tenant string, run store.RunID, seq store.Seq, field string) []byte

	mu    sync.Mutex
	heads map[store.RunID]store.Seq // last seq this handle appended, per run
}

var _ store.Journal = (*Journal)(nil)

// New wraps inner so that it seals under ring.
func New(inner store.Journal, ring keyring.Ring, o Options) *Journal {
	r := o.Rand
	if r == nil {
		r = rand.Reader
	}
	return &Journal{Journal: inner, Delegate: optional.Delegate{Inner: inner}, ring: ring, rand: r, ad: AssociatedData, heads: map[store.RunID]store.Seq{}}
}

// Inner returns the journal this one wraps (its reads return stored bytes
// with no opening).
func (j *Journal) Inner() store.Journal { return j.Journal }

// Seals is true: this store rewrites what it is handed.
func (j *Journal) Seals() bool { return true }

// WritesRawVerbatim reports that a restored append (Append.Raw) is written
// exactly as recorded, so a restore may write through this store.
func (j *Journal) WritesRawVerbatim() bool { return true }

// Scope is the key scope of a record: its case, else its run.
func Scope(tenant string, c store.CaseID, run store.RunID) string {
	if !c.IsZero() {
		return tenant + "/case/" + c.String()
	}
	return tenant + "/run/" + run.String()
}

// CaseScope and RunScope name the scopes an erasure destroys.
func CaseScope(tenant string, c store.CaseID) string { return tenant + "/case/" + c.String() }

// RunScope names the scope of a run's records that carry no case.
func RunScope(tenant string, run store.RunID) string { return tenant + "/run/" + run.String() }

const maxAttempts = 256

// Append seals every non-restored append of the batch and writes it as a
// restored append at the position it will take, so the associated data can
// name the seq. If another writer moved the run's head in between, the
// store refuses the position and the batch is sealed again on the new head.
func (j *Journal) Append(ctx context.Context, epoch store.Epoch, batch []store.Append) ([]store.Record, error) {
	run, err := store.ValidateBatch(epoch, batch)
	if err != nil {
		return nil, err
	}
	var plain [][]byte
	return j.retry(ctx, run, func(i int) []byte { return plain[i] }, func(head store.Seq) ([]store.Record, error) {
		var out []store.Append
		out, plain, err = j.sealBatch(ctx, head, epoch, batch)
		if err != nil {
			return nil, err
		}
		return j.Journal.Append(ctx, epoch, out)
	})
}

// retry runs try on the run's head as this handle last saw it, again on the
// head the store names when another writer moved it. plain(i) is the i-th
// record's opened fields as the caller handed them (the returned record
// carries them, with no unwrap), or nil for a restored append, which comes
// back as stored: a restore needs no key, and its bytes may be bound
// elsewhere.
func (j *Journal) retry(ctx context.Context, run store.RunID, plain func(i int) []byte, try func(head store.Seq) ([]store.Record, error)) ([]store.Record, error) {
	j.mu.Lock()
	head, ok := j.heads[run]
	j.mu.Unlock()
	if !ok {
		h, err := j.Journal.Head(ctx, run)
		if err != nil {
			return nil, err
		}
		head = h.Seq
	}
	for attempt := 0; ; attempt++ {
		recs, err := try(head)
		if err == nil {
			j.remember(run, recs[len(recs)-1].Seq)
			for i := range recs {
				if p := plain(i); p != nil {
					recs[i].Fields = p
				}
			}
			return recs, nil
		}
		var ia *store.InvalidArgumentError
		if !errors.As(err, &ia) || !strings.HasSuffix(ia.Field, ".raw") || attempt >= maxAttempts {
			j.forget(run)
			return nil, err
		}
		// The store names the seq it would assign; under group commit that
		// can be ahead of what Head reads, so prefer it.
		next, ok := assignedHead(ia.Field, ia.Detail)
		if !ok {
			h, herr := j.Journal.Head(ctx, run)
			if herr != nil {
				return nil, herr
			}
			next = h.Seq
		}
		if next == head {
			return nil, err // not a moved head: a real refusal
		}
		head = next
	}
}

// assignedHead reads the head a refused restored append implies from the
// store's refusal ("batch[i].raw": "... the store assigns run R seq N ...").
func assignedHead(field, detail string) (store.Seq, bool) {
	var i int
	if _, err := fmt.Sscanf(field, "batch[%d].raw", &i); err != nil {
		return 0, false
	}
	k := strings.Index(detail, "the store assigns run ")
	if k < 0 {
		return 0, false
	}
	var run string
	var seq uint64
	if _, err := fmt.Sscanf(detail[k+len("the store assigns run "):], "%s seq %d", &run, &seq); err != nil || seq < uint64(i)+1 {
		return 0, false
	}
	return store.Seq(seq - uint64(i) - 1), true
}

func (j *Journal) remember(run store.RunID, seq store.Seq) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.heads) >= 4096 {
		clear(j.heads)
	}
	j.heads[run] = seq
}

func (j *Journal) forget(run store.RunID) {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.heads, run)
}

// sealBatch turns each fresh append into a restored append of its sealed
// body at seq head+1+i.
// It also returns each fresh append's fields in canonical form (nil for a
// restored one), which is what a read would open them to.
func (j *Journal) sealBatch(ctx context.Context, head store.Seq, epoch store.Epoch, batch []store.Append) ([]store.Append, [][]byte, error) {
	out := make([]store.Append, len(batch))
	plain := make([][]byte, len(batch))
	tenant := j.Journal.Tenant()
	for i, a := range batch {
		if a.Raw != nil {
			out[i] = a // recorded bytes go in as they were: never sealed twice
			continue
		}
		seq := head + store.Seq(i) + 1
		fields, canonical, err := j.sealFields(ctx, tenant, a, seq)
		if err != nil {
			return nil, nil, err
		}
		// The sealed fields go in as the value they are: the body is
		// encoded once, with no second parse (the store decodes it once
		// more, as it does every restored append).
		raw, err := store.EncodeBodyValue(store.Body{Seq: seq, Run: a.Run, Case: a.Case, Step: a.Step, Phase: a.Phase,
			EffectKey: a.EffectKey, Epoch: epoch, V: store.RecordVersion, Kind: a.Kind}, fields)
		if err != nil {
			return nil, nil, err
		}
		out[i] = store.Append{Run: a.Run, Raw: raw}
		plain[i] = canonical
	}
	return out, plain, nil
}

// sealFields seals a's fields by the rule under one fresh data key for the
// record (each field with its own nonce and associated data), and returns
// the sealed fields (as a value, for store.EncodeBodyValue) and the
// caller's fields in canonical form. The caller's fields are parsed once.
func (j *Journal) sealFields(ctx context.Context, tenant string, a store.Append, seq store.Seq) (sealed canon.Value, canonical []byte, err error) {
	if len(a.Fields) == 0 {
		return canon.Value{Kind: canon.Object}, []byte("{}"), nil
	}
	v, err := canon.Parse(a.Fields)
	if err != nil {
		return canon.Value{}, nil, &store.InvalidArgumentError{Field: "fields", Detail: err.Error()}
	}
	if v.Kind != canon.Object {
		return canon.Value{}, nil, &store.InvalidArgumentError{Field: "fields", Detail: "must be a JSON object"}
	}
	scope := Scope(tenant, a.Case, a.Run)
	var aead cipher.AEAD
	var wrapped, nonces []byte
	ms := make([]canon.Member, len(v.Members))
	for i, m := range v.Members {
		ms[i] = m
		if !Seals(a.Kind, m.Key) {
			continue
		}
		if aead == nil {
			var key []byte
			key, wrapped, err = j.ring.Wrap(ctx, scope)
			if errors.Is(err, keyring.ErrErased) {
				return canon.Value{}, nil, &store.ErasedError{Scope: scope, Run: a.Run, Case: a.Case, Err: err}
			}
			if err != nil {
				return canon.Value{}, nil, fmt.Errorf("sealed: wrap a data key: %w", err)
			}
			if aead, err = chacha20poly1305.NewX(key); err != nil {
				return canon.Value{}, nil, err
			}
			clear(key)
			// Every field's nonce in one read: a read of the system's
			// randomness is a system call.
			n := 0
			for _, m := range v.Members[i:] {
				if Seals(a.Kind, m.Key) {
					n++
				}
			}
			nonces = make([]byte, n*chacha20poly1305.NonceSizeX)
			if _, err := io.ReadFull(j.rand, nonces); err != nil {
				return canon.Value{}, nil, fmt.Errorf("sealed: nonce: %w", err)
			}
		}
		nonce := nonces[:chacha20poly1305.NonceSizeX:chacha20poly1305.NonceSizeX]
		nonces = nonces[chacha20poly1305.NonceSizeX:]
		ms[i].Value = canon.StringValue(sealEnvelope(aead, wrapped, nonce, m.Value.MarshalSized(), j.ad(tenant, a.Run, seq, m.Key)))
	}
	return canon.Value{Kind: canon.Object, Members: ms}, v.MarshalSized(), nil
}

// State says how a field of a record read through a sealing journal stands.
type State uint8

// The states of a field.
const (
	Clear  State = iota // stored in the clear (the rule leaves it, or it was restored unsealed)
	Opened              // sealed, and opened with the scope's key
	Erased              // sealed under a scope whose key was erased
)

func (s State) String() string {
	switch s {
	case Clear:
		return "clear"
	case Opened:
		return "opened"
	case Erased:
		return "erased"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Field is one of a record's own fields as read through the key ring.
type Field struct {
	Name  string `json:"name"`
	State State  `json:"state"`
	// Value is the field's canonical JSON value: the stored value when
	// Clear, the opened plaintext when Opened, nil when Erased.
	Value []byte `json:"value,omitempty"`
	Scope string `json:"scope,omitempty"` // the key scope, when sealed
}

// ErasedMarker is the value an erased field takes in Record.Fields of a
// read: {"$erased":"<scope>"}. It is for display; Fields gives the typed
// answer (a caller could store an object of that shape in the clear).
func ErasedMarker(scope string) []byte {
	return canon.Value{Kind: canon.Object, Members: []canon.Member{{Key: "$erased", Value: canon.StringValue(scope)}}}.Marshal()
}

// Fields opens a record's own fields from its stored bytes (r.Raw). An
// erased scope gives Erased fields; an envelope that does not parse or open
// is a store.CorruptError; a scope the key ring never had is a
// *keyring.ScopeError naming it.
func (j *Journal) Fields(ctx context.Context, r store.Record) ([]Field, error) {
	b, err := store.DecodeBody(r.Raw)
	if err != nil {
		return nil, &store.CorruptError{Run: r.Run, Seq: r.Seq, Detail: err.Error()}
	}
	v, err := canon.Parse(b.Fields)
	if err != nil {
		return nil, &store.CorruptError{Run: r.Run, Seq: r.Seq, Detail: err.Error()}
	}
	tenant := j.Journal.Tenant()
	scope := Scope(tenant, b.Case, b.Run)
	out := make([]Field, 0, len(v.Members))
	for _, m := range v.Members {
		f := Field{Name: m.Key, State: Clear, Value: m.Value.Marshal()}
		if !Seals(b.Kind, m.Key) || m.Value.Kind != canon.String || !IsEnvelope(m.Value.Str) {
			// Not sealed: the rule leaves it clear, or the record was
			// written unsealed and restored as recorded.
			out = append(out, f)
			continue
		}
		f.Scope = scope
		plain, erased, err := j.open(ctx, scope, j.ad(tenant, b.Run, b.Seq, m.Key), m.Value.Str)
		if err != nil {
			var se *keyring.ScopeError
			if errors.As(err, &se) && errors.Is(err, keyring.ErrUnknownScope) {
				return nil, fmt.Errorf("sealed: run %s seq %d field %q: %w", b.Run, b.Seq, m.Key, err)
			}
			if errors.Is(err, errNotCorrupt) {
				return nil, err
			}
			return nil, &store.CorruptError{Run: b.Run, Seq: b.Seq, Detail: fmt.Sprintf("sealed field %q: %v", m.Key, err)}
		}
		if erased {
			f.State, f.Value = Erased, nil
		} else {
			f.State, f.Value = Opened, plain
		}
		out = append(out, f)
	}
	return out, nil
}

var errNotCorrupt = errors.New("key ring unavailable")

func (j *Journal) open(ctx context.Context, scope string, ad []byte, s string) (plain []byte, erased bool, err error) {
	env, err := ParseEnvelope(s)
	if err != nil {
		return nil, false, err
	}
	key, err := j.ring.Unwrap(ctx, scope, env.Wrapped)
	switch {
	case errors.Is(err, keyring.ErrErased):
		return nil, true, nil
	case errors.Is(err, keyring.ErrUnwrap):
		return nil, false, fmt.Errorf("its data key does not unwrap under scope %s (damaged, or moved from another scope)", scope)
	case errors.Is(err, keyring.ErrUnknownScope):
		return nil, false, err
	case err != nil:
		return nil, false, fmt.Errorf("%w: %w", errNotCorrupt, err)
	}
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		return nil, false, err
	}
	plain, err = aead.Open(nil, env.Nonce, env.Ciphertext, ad)
	if err != nil {
		return nil, false, errors.New("envelope does not open at this tenant, run, seq and field (damaged, or moved)")
	}
	if _, err := canon.Parse(plain); err != nil {
		return nil, false, fmt.Errorf("opened plaintext is not JSON: %v", err)
	}
	return plain, false, nil
}

// openRecord returns r with Fields replaced by the opened fields (erased
// ones as ErasedMarker); Raw, Hash and the routing fields are untouched.
func (j *Journal) openRecord(ctx context.Context, r store.Record) (store.Record, error) {
	fs, err := j.Fields(ctx, r)
	if err != nil {
		return store.Record{}, err
	}
	ms := make([]canon.Member, len(fs))
	for i, f := range fs {
		val := f.Value
		if f.State == Erased {
			val = ErasedMarker(f.Scope)
		}
		v, err := canon.Parse(val)
		if err != nil {
			return store.Record{}, &store.CorruptError{Run: r.Run, Seq: r.Seq, Detail: err.Error()}
		}
		ms[i] = canon.Member{Key: f.Name, Value: v}
	}
	r.Fields = canon.Value{Kind: canon.Object, Members: ms}.Marshal()
	return r, nil
}

func (j *Journal) openAll(ctx context.Context, recs []store.Record) ([]store.Record, error) {
	out := make([]store.Record, len(recs))
	for i, r := range recs {
		o, err := j.openRecord(ctx, r)
		if err != nil {
			return nil, err
		}
		out[i] = o
	}
	return out, nil
}

// Read returns a run's records with their fields opened.
func (j *Journal) Read(ctx context.Context, run store.RunID, from store.Seq) ([]store.Record, error) {
	recs, err := j.Journal.Read(ctx, run, from)
	if err != nil {
		return nil, err
	}
	return j.openAll(ctx, recs)
}

// ReadPage returns a page of a run's records with their fields opened.
func (j *Journal) ReadPage(ctx context.Context, run store.RunID, from store.Seq, limit int) ([]store.Record, error) {
	recs, err := j.Journal.ReadPage(ctx, run, from, limit)
	if err != nil {
		return nil, err
	}
	return j.openAll(ctx, recs)
}

// ReadStored returns a page of a run's records as stored, with nothing
// opened: no data key is unwrapped and no plaintext made, since its
// callers (GET /v1/runs/{run}/records) answer the stored bytes, which is
// what the chain hashes. The inner store's check of each record's hash
// and link is this path's integrity check; an envelope is checked when it
// is opened (Read, ReadPage, Fields).
func (j *Journal) ReadStored(ctx context.Context, run store.RunID, from store.Seq, limit, maxBytes int) ([]store.Record, store.Seq, error) {
	return j.Journal.ReadStored(ctx, run, from, limit, maxBytes)
}

// Erased reports whether scope's key was erased, from the key ring's
// state alone (keyring.Ring.Erased): nothing is unwrapped or opened. With
// ReadStored and Scope it lets a reader show which sealed fields are
// erased without opening any. A scope the ring never had is a
// *keyring.ScopeError of keyring.ErrUnknownScope, as a read that opens
// the field would be.
func (j *Journal) Erased(ctx context.Context, scope string) (bool, error) {
	return j.ring.Erased(ctx, scope)
}

// CaseHistory returns a case's records with their fields opened.
func (j *Journal) CaseHistory(ctx context.Context, c store.CaseID, limit int) ([]store.Record, error) {
	recs, err := j.Journal.CaseHistory(ctx, c, limit)
	if err != nil {
		return nil, err
	}
	return j.openAll(ctx, recs)
}

// Atomic wraps the inner store's transaction so that records appended in
// it are sealed too; nil when the inner store offers none.
func (j *Journal) Atomic() store.AtomicJournal {
	a := j.Journal.Atomic()
	if a == nil {
		return nil
	}
	return &atomic{j: j, inner: a}
}

type atomic struct {
	j     *Journal
	inner store.AtomicJournal
}

// AppendAtomic seals what work returns at the position it will take. If the
// head moved, the store refuses it, the transaction (work included) rolls
// back, and work runs again on the new head.
func (a *atomic) AppendAtomic(ctx context.Context, run store.RunID, epoch store.Epoch, work func(ctx context.Context, tx store.AtomicTx) ([]store.Append, error)) ([]store.Record, error) {
	var plain [][]byte // the opened fields of what the last try of work returned
	return a.j.retry(ctx, run, func(i int) []byte { return plain[i] }, func(head store.Seq) ([]store.Record, error) {
		return a.inner.AppendAtomic(ctx, run, epoch, func(ctx context.Context, tx store.AtomicTx) ([]store.Append, error) {
			batch, err := work(ctx, tx)
			if err != nil || len(batch) == 0 {
				plain = make([][]byte, len(batch))
				return batch, err
			}
			var out []store.Append
			out, plain, err = a.j.sealBatch(ctx, head, epoch, batch)
			return out, err
		})
	})
}
