package store

import "fmt"

// StoredPage collects the answer of a ReadStored as a backend scans it:
// at most limit records and, past the first, no more than maxBytes of
// their stored bytes. A backend adds each record as it reads it and stops
// reading at the first Add that answers false, so what it read is the
// page plus at most that one record.
type StoredPage struct {
	limit, maxBytes, size int
	recs                  []Record
	next                  Seq
}

// NewStoredPage validates a ReadStored's arguments and starts its page.
func NewStoredPage(from Seq, limit, maxBytes int) (*StoredPage, error) {
	if from == 0 {
		return nil, &InvalidArgumentError{Field: "from", Detail: "seqs start at 1"}
	}
	if err := ValidateLimit(limit); err != nil {
		return nil, err
	}
	if maxBytes < 1 {
		return nil, &InvalidArgumentError{Field: "max_bytes", Detail: fmt.Sprintf("%d is not positive", maxBytes)}
	}
	return &StoredPage{limit: limit, maxBytes: maxBytes}, nil
}

// Add keeps r, without its decoded Fields, if the page has room for it,
// and reports whether it did; false means the page is complete and r is
// not part of it.
func (p *StoredPage) Add(r Record) bool {
	if len(p.recs) >= p.limit {
		return false
	}
	if len(p.recs) > 0 && p.size+len(r.Raw) > p.maxBytes {
		p.next = r.Seq
		return false
	}
	r.Fields = nil
	p.recs = append(p.recs, r)
	p.size += len(r.Raw)
	return true
}

// Records returns the page's records, in seq order, and the seq of the
// record the byte bound left out (0 when none was): ReadStored's answer.
func (p *StoredPage) Records() ([]Record, Seq) { return p.recs, p.next }
