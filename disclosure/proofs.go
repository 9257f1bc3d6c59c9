package disclosure

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strconv"

	"github.com/runseal/runseal/log"
)

// MarshalProofLines writes proof hashes one per line, each the standard
// padded base64 of 32 bytes: the body of the consistency proof endpoint
// (spec/http.md) and of a proof file given to auditor consistency. An empty
// proof is an empty text.
func MarshalProofLines(hs []log.Hash) []byte {
	b := make([]byte, 0, len(hs)*45)
	for _, h := range hs {
		b = base64.StdEncoding.AppendEncode(b, h[:])
		b = append(b, '\n')
	}
	return b
}

// ParseProofLines parses what MarshalProofLines writes, and nothing else:
// every line canonical padded base64 of exactly 32 bytes, each ending in a
// newline, at most MaxProof of them.
func ParseProofLines(b []byte) ([]log.Hash, error) {
	var out []log.Hash
	for n := 1; len(b) > 0; n++ {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return nil, fmt.Errorf("proof line %d: no newline at the end", n)
		}
		h, err := parseB64Hash(b[:i])
		if err != nil {
			return nil, fmt.Errorf("proof line %d: %w", n, err)
		}
		if len(out) == MaxProof {
			return nil, fmt.Errorf("proof longer than %d hashes", MaxProof)
		}
		out = append(out, h)
		b = b[i+1:]
	}
	return out, nil
}

func parseB64Hash(s []byte) (log.Hash, error) {
	var h log.Hash
	if len(s) != 44 {
		return h, fmt.Errorf("%q is not the base64 of 32 bytes", s)
	}
	d, err := base64.StdEncoding.Strict().DecodeString(string(s))
	if err != nil || len(d) != 32 {
		return h, fmt.Errorf("%q is not the base64 of 32 bytes", s)
	}
	copy(h[:], d)
	return h, nil
}

// tlogProofHeader is the first line of a C2SP tlog-proof.
const tlogProofHeader = "c2sp.org/tlog-proof@v1"

// TLogProof is a C2SP tlog-proof: an inclusion proof together with the
// signed checkpoint it is against, so that it can be checked alone. For a
// runseal log the leaf is a sealed run's terminal hash, which the checker
// must get from the run's records, never from Extra.
type TLogProof struct {
	Extra []byte // optional and unauthenticated
	Index uint64
	Proof []log.Hash // from the leaf's sibling upwards
	Note  []byte     // the signed checkpoint, with its cosignatures
}

// Marshal writes the proof in the tlog-proof text form.
func (p *TLogProof) Marshal() []byte {
	b := []byte(tlogProofHeader + "\n")
	if p.Extra != nil {
		b = append(b, "extra "...)
		b = base64.StdEncoding.AppendEncode(b, p.Extra)
		b = append(b, '\n')
	}
	b = append(b, "index "...)
	b = strconv.AppendUint(b, p.Index, 10)
	b = append(b, '\n')
	b = append(b, MarshalProofLines(p.Proof)...)
	b = append(b, '\n')
	return append(b, p.Note...)
}

// ParseTLogProof parses a tlog-proof strictly: the header line, an
// optional extra line, the index in decimal without leading zeros, at most
// MaxProof hash lines, a blank line, then a non-empty note, which the caller
// verifies.
func ParseTLogProof(b []byte) (*TLogProof, error) {
	line := func() ([]byte, bool) {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return nil, false
		}
		l := b[:i]
		b = b[i+1:]
		return l, true
	}
	l, ok := line()
	if !ok || string(l) != tlogProofHeader {
		return nil, fmt.Errorf("tlog-proof: the first line is not %q", tlogProofHeader)
	}
	p := &TLogProof{}
	if l, ok = line(); ok && bytes.HasPrefix(l, []byte("extra ")) {
		e, err := base64.StdEncoding.Strict().DecodeString(string(l[len("extra "):]))
		if err != nil {
			return nil, fmt.Errorf("tlog-proof: extra is not base64")
		}
		p.Extra = e
		l, ok = line()
	}
	idx, found := bytes.CutPrefix(l, []byte("index "))
	if !ok || !found || len(idx) == 0 || (idx[0] == '0' && len(idx) > 1) {
		return nil, fmt.Errorf("tlog-proof: no valid index line")
	}
	n, err := strconv.ParseUint(string(idx), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("tlog-proof: index %q is not a 64-bit decimal", idx)
	}
	p.Index = n
	for {
		l, ok = line()
		if !ok {
			return nil, fmt.Errorf("tlog-proof: no blank line before the checkpoint")
		}
		if len(l) == 0 {
			break
		}
		h, err := parseB64Hash(l)
		if err != nil {
			return nil, fmt.Errorf("tlog-proof: %w", err)
		}
		if len(p.Proof) == MaxProof {
			return nil, fmt.Errorf("tlog-proof: more than %d proof hashes", MaxProof)
		}
		p.Proof = append(p.Proof, h)
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("tlog-proof: no checkpoint after the blank line")
	}
	p.Note = b
	return p, nil
}
