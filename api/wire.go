package api

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/runseal/runseal/store"
)

// The wire types of spec/http.md. Members are declared in the order the
// server has always written them (sorted by name), so answers are byte for
// byte what earlier versions sent.

// ErrorBody is the JSON of every refusal: {"error": MESSAGE, "field": F?}.
type ErrorBody struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
}

// ConsistencyProof answers GET /v1/proof/consistency: the RFC 6962 proof
// that the log at OldSize is a prefix of the log at NewSize. Hashes are
// standard base64.
type ConsistencyProof struct {
	NewSize uint64   `json:"new_size"`
	OldSize uint64   `json:"old_size"`
	Proof   []string `json:"proof"`
}

// InclusionProof answers GET /v1/proof/inclusion: Run's leaf is leaf Index
// of the log at Size.
type InclusionProof struct {
	Index uint64      `json:"index"`
	Leaf  string      `json:"leaf"`
	Proof []string    `json:"proof"`
	Run   store.RunID `json:"run"`
	Size  uint64      `json:"size"`
}

// Record is one chained record as GET /v1/runs/{run}/records returns it:
// Raw is the canonical body, verbatim.
type Record struct {
	Seq      store.Seq       `json:"seq"`
	PrevHash store.Digest    `json:"prev_hash"`
	Hash     store.Digest    `json:"hash"`
	Raw      json.RawMessage `json:"raw"`
}

// Records answers GET /v1/runs/{run}/records. Next, when not zero, is the
// seq to ask from for the rest of a page cut short by the byte bound.
type Records struct {
	Next    store.Seq   `json:"next,omitempty"`
	Records []Record    `json:"records"`
	Run     store.RunID `json:"run"`
}

// Head answers GET /v1/runs/{run}/head.
type Head struct {
	Hash store.Digest `json:"hash"`
	Run  store.RunID  `json:"run"`
	Seq  store.Seq    `json:"seq"`
}

// Verified answers GET /v1/runs/{run}/verify: the chain is intact up to Head.
type Verified struct {
	Head store.Digest `json:"head"`
	OK   bool         `json:"ok"`
	Run  store.RunID  `json:"run"`
}

// CancellationState answers GET /v1/runs/{run}/cancellation;
// Cancellation is null when none was requested.
type CancellationState struct {
	Cancellation *store.Cancellation `json:"cancellation"`
	Run          store.RunID         `json:"run"`
}

// Cancelled answers POST /v1/runs/{run}/cancel; Created is false when a
// request was already kept (the first one stands).
type Cancelled struct {
	Cancellation *store.Cancellation `json:"cancellation"`
	Created      bool                `json:"created"`
	Run          store.RunID         `json:"run"`
}

// Runs answers GET /v1/runs: T is store.RunID (by=id, outcome, abandoned),
// store.Activity (by=recent) or store.WaitingRun (by=waiting).
type Runs[T any] struct {
	Runs []T `json:"runs"`
}

// Ack acknowledges one durable record of an append: the input line it came
// from and where it sits. 'journal append --json' prints the same objects.
type Ack struct {
	Line int          `json:"line"`
	Run  store.RunID  `json:"run"`
	Seq  store.Seq    `json:"seq"`
	Hash store.Digest `json:"hash"`
}

// Appended answers POST /v1/append.
type Appended struct {
	Records []Ack `json:"records"`
}

// Released answers POST /v1/runs/{run}/lease/release.
type Released struct {
	Released bool        `json:"released"`
	Run      store.RunID `json:"run"`
}

// Sealed answers POST /v1/runs/{run}/seal: Leaf is the run's log leaf (its
// terminal chain hash).
type Sealed struct {
	Leaf    store.Digest `json:"leaf"`
	Outcome string       `json:"outcome"`
	Run     store.RunID  `json:"run"`
}

// LeaseRequest is the body of POST .../lease, .../lease/renew and
// .../lease/release (release reads only Epoch).
type LeaseRequest struct {
	Owner string `json:"owner"`
	Epoch uint64 `json:"epoch"`
	TTL   int64  `json:"ttl_seconds"`
}

// SealRequest is the body of POST /v1/runs/{run}/seal.
type SealRequest struct {
	Epoch   uint64 `json:"epoch"`
	Outcome string `json:"outcome"`
}

// CancelRequest is the body of POST /v1/runs/{run}/cancel.
type CancelRequest struct {
	Actor  string `json:"actor"`
	Reason string `json:"reason"`
}

// EncodeHash is the base64 form proofs carry on the wire.
func EncodeHash(d store.Digest) string { return base64.StdEncoding.EncodeToString(d[:]) }

// EncodeHashes is EncodeHash over a proof.
func EncodeHashes(ds []store.Digest) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = EncodeHash(d)
	}
	return out
}

// MaxProofHashes bounds a proof a client accepts, as disclosure.MaxProof
// bounds one in a package: a tree of fewer than 2^64 leaves has depth at
// most 64.
const MaxProofHashes = 64

// DecodeHashes parses a proof's base64 hashes, refusing more than
// MaxProofHashes and any hash that is not exactly 32 bytes.
func DecodeHashes(ss []string) ([]store.Digest, error) {
	if len(ss) > MaxProofHashes {
		return nil, fmt.Errorf("proof longer than %d hashes", MaxProofHashes)
	}
	out := make([]store.Digest, len(ss))
	for i, s := range ss {
		d, err := base64.StdEncoding.Strict().DecodeString(s)
		if err != nil || len(d) != 32 {
			return nil, fmt.Errorf("proof hash %d is not the base64 of 32 bytes", i+1)
		}
		copy(out[i][:], d)
	}
	return out, nil
}

// ProofCheckpoint is the checkpoint a proof is against, as 'journal proof
// --json' prints it beside the proof's members: Note is the signed note,
// empty when that size was never signed.
type ProofCheckpoint struct {
	Origin string `json:"origin"`
	Size   uint64 `json:"size"`
	Root   string `json:"root"`
	Note   string `json:"note,omitempty"`
}
