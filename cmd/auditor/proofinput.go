package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/log"
)

// jsonProof is a proof in the JSON that journal serve answers
// (api.ConsistencyProof, api.InclusionProof; spec/http.md section 2) or
// that "journal proof ... --json" prints (the same members and the
// api.ProofCheckpoint it is against). has records which members were
// present, so that a missing size is told from zero.
type jsonProof struct {
	has         map[string]bool
	consistency api.ConsistencyProof
	inclusion   api.InclusionProof
	checkpoint  *api.ProofCheckpoint
}

// isJSON reports whether a proof file is JSON rather than text lines.
func isJSON(b []byte) bool {
	return len(bytes.TrimLeft(b, " \t\r\n")) > 0 && bytes.TrimLeft(b, " \t\r\n")[0] == '{'
}

// parseJSONProof reads a consistency proof (inclusion false) or an
// inclusion proof, and its hashes.
func parseJSONProof(b []byte, inclusion bool) (*jsonProof, []log.Hash, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil {
		return nil, nil, fmt.Errorf("not a JSON proof: %v", err)
	}
	p := &jsonProof{has: map[string]bool{}}
	for k, v := range members {
		p.has[k] = string(v) != "null"
	}
	var proof []string
	var err error
	if inclusion {
		var v struct {
			api.InclusionProof
			Checkpoint *api.ProofCheckpoint `json:"checkpoint"`
		}
		err = json.Unmarshal(b, &v)
		p.inclusion, p.checkpoint, proof = v.InclusionProof, v.Checkpoint, v.Proof
	} else {
		err = json.Unmarshal(b, &p.consistency)
		proof = p.consistency.Proof
	}
	if err != nil {
		return nil, nil, fmt.Errorf("not a JSON proof: %v", err)
	}
	if !p.has["proof"] {
		return nil, nil, fmt.Errorf("the JSON has no \"proof\" array")
	}
	hs, err := decodeHashes(proof)
	return p, hs, err
}

func decodeHashes(ss []string) ([]log.Hash, error) {
	ds, err := api.DecodeHashes(ss)
	if err != nil {
		return nil, err
	}
	out := make([]log.Hash, len(ds))
	for i, d := range ds {
		out[i] = log.Hash(d)
	}
	return out, nil
}

// parseLeaf reads a leaf given as 64 hex characters or as base64 (the form
// journal proof prints).
func parseLeaf(s string) (log.Hash, error) {
	var h log.Hash
	if len(s) == 64 {
		if _, err := hex.Decode(h[:], []byte(s)); err == nil {
			return h, nil
		}
	}
	if d, err := base64.StdEncoding.Strict().DecodeString(s); err == nil && len(d) == 32 {
		copy(h[:], d)
		return h, nil
	}
	return h, fmt.Errorf("%q is neither 64 hex characters nor the base64 of 32 bytes", s)
}
