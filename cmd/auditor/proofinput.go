package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/runseal/runseal/disclosure"
	"github.com/runseal/runseal/log"
)

// jsonProof is the JSON form of a proof that journal serve answers
// (spec/http.md section 2) and "journal proof ... --json" prints: the
// members a check needs, others ignored. Sizes are pointers so that a
// missing one is told from zero.
type jsonProof struct {
	OldSize    *uint64  `json:"old_size"`
	NewSize    *uint64  `json:"new_size"`
	Index      *uint64  `json:"index"`
	Size       *uint64  `json:"size"`
	Proof      []string `json:"proof"`
	Checkpoint *struct {
		Note string `json:"note"`
	} `json:"checkpoint"`
}

// isJSON reports whether a proof file is JSON rather than text lines.
func isJSON(b []byte) bool {
	return len(bytes.TrimLeft(b, " \t\r\n")) > 0 && bytes.TrimLeft(b, " \t\r\n")[0] == '{'
}

func parseJSONProof(b []byte) (*jsonProof, []log.Hash, error) {
	var p jsonProof
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, nil, fmt.Errorf("not a JSON proof: %v", err)
	}
	if p.Proof == nil {
		return nil, nil, fmt.Errorf("the JSON has no \"proof\" array")
	}
	hs, err := decodeHashes(p.Proof)
	return &p, hs, err
}

func decodeHashes(ss []string) ([]log.Hash, error) {
	if len(ss) > disclosure.MaxProof {
		return nil, fmt.Errorf("proof longer than %d hashes", disclosure.MaxProof)
	}
	out := make([]log.Hash, len(ss))
	for i, s := range ss {
		d, err := base64.StdEncoding.Strict().DecodeString(s)
		if err != nil || len(d) != 32 {
			return nil, fmt.Errorf("proof hash %d is not the base64 of 32 bytes", i+1)
		}
		copy(out[i][:], d)
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
