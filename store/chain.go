package store

import "fmt"

// ChainCheck checks one run's stored record rows as a backend reads them
// in seq order, before any is handed out: no seq is skipped, both stored
// hashes are 32 bytes, and each record's prev_hash links to the hash of the
// record before it. A backend reads rows with its own SQL and passes each
// to Next; the checks live here so that every backend makes the same ones.
type ChainCheck struct {
	run    RunID
	expect Seq
	prev   *Digest
}

// NewChainCheck starts checking run's rows from seq from.
func NewChainCheck(run RunID, from Seq) *ChainCheck {
	return &ChainCheck{run: run, expect: from}
}

// Next checks the row read next (seq, prev_hash, hash, raw body) and
// decodes it. Errors are *CorruptError, or DecodeRecord's.
func (c *ChainCheck) Next(seq int64, prevHash, hash, raw []byte) (Record, error) {
	if Seq(seq) != c.expect {
		return Record{}, &CorruptError{Run: c.run, Seq: c.expect, Detail: fmt.Sprintf("seq gap: found %d", seq)}
	}
	if len(prevHash) != 32 || len(hash) != 32 {
		return Record{}, &CorruptError{Run: c.run, Seq: Seq(seq), Detail: "stored hash is not 32 bytes"}
	}
	r, err := DecodeRecord(c.run, Seq(seq), Digest(prevHash), Digest(hash), raw)
	if err != nil {
		return Record{}, err
	}
	if c.prev != nil && r.PrevHash != *c.prev {
		return Record{}, &CorruptError{Run: c.run, Seq: r.Seq, Detail: "prev_hash does not link to the previous record"}
	}
	c.prev = &r.Hash
	c.expect++
	return r, nil
}

// Expect is the seq the next row must have: one past the last row checked.
func (c *ChainCheck) Expect() Seq { return c.expect }
