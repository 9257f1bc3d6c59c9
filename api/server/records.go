package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/store"
)

// Records are read from the store a few at a time, so one request holds at
// most recordsChunkMax records in memory however large its limit: the
// first read takes recordsChunkFirst (a run of 1 MiB records then costs a
// few MiB, not the page), later reads as many as the byte bound left could
// take at the largest size seen so far.
const (
	recordsChunkFirst = 8
	recordsChunkMax   = 256
)

// readRecords streams a page of a run's records: at most limit records and,
// past the first, no more than the server's byte bound of raw bodies. When
// the bound cuts the page short the answer's "next" is the seq to ask from.
func (s *Server) readRecords(w http.ResponseWriter, r *http.Request, t *Tenant) error {
	run, err := runParam(r)
	if err != nil {
		return err
	}
	from := uint64(1)
	if v := r.URL.Query().Get("from"); v != "" {
		if from, err = parseSize("from", v); err != nil || from == 0 {
			return badRequest("from", "from must be a seq from 1")
		}
	}
	limit, err := limitParam(r, 1000)
	if err != nil {
		return err
	}
	ctx := r.Context()
	// The first chunk is read before the status is written, so a refusal
	// (an unknown run, a corrupt row) is still a proper error answer.
	chunk := min(limit, recordsChunkFirst)
	recs, err := t.Store.ReadPage(ctx, run, store.Seq(from), chunk)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.WriteString(`{"records":[`)
	var one bytes.Buffer
	enc := json.NewEncoder(&one)
	enc.SetEscapeHTML(false)
	sent, size, largest := 0, 0, 1
	var next store.Seq
	for {
		for _, rec := range recs {
			if sent > 0 && size+len(rec.Raw) > s.maxBytes {
				next = rec.Seq
				break
			}
			if sent > 0 {
				bw.WriteByte(',')
			}
			one.Reset()
			if err := enc.Encode(api.Record{Seq: rec.Seq, PrevHash: rec.PrevHash, Hash: rec.Hash, Raw: rec.Raw}); err != nil {
				s.log.Error("serve: encoding a record after the answer began", "run", run, "seq", rec.Seq, "err", err)
				return nil // the status is sent; the cut answer does not parse, which the client sees
			}
			bw.Write(one.Bytes()[:one.Len()-1]) // without Encode's newline
			sent++
			size += len(rec.Raw)
			largest = max(largest, len(rec.Raw))
		}
		if next != 0 || len(recs) < chunk || sent >= limit {
			break
		}
		from := recs[len(recs)-1].Seq + 1
		chunk = min(limit-sent, recordsChunkMax, max(1, (s.maxBytes-size)/largest))
		if recs, err = t.Store.ReadPage(ctx, run, from, chunk); err != nil {
			s.log.Error("serve: reading records after the answer began", "run", run, "from", from, "err", err)
			return nil // as above: the client sees an answer that does not parse
		}
		if len(recs) == 0 {
			break
		}
	}
	bw.WriteString(`]`)
	if next != 0 {
		bw.WriteString(`,"next":` + strconv.FormatUint(uint64(next), 10))
	}
	runText, _ := run.MarshalText()
	bw.WriteString(`,"run":"` + string(runText) + "\"}\n")
	return bw.Flush()
}
