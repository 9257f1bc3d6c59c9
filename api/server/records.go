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

// readRecords answers a page of a run's records as stored: at most limit
// records and, past the first, no more than the server's byte bound of raw
// bodies. The store reads within that bound (store.Reader.ReadStored), so
// the page costs its bound plus at most one record whatever its limit and
// its records' sizes, and a sealed journal opens nothing, since the answer
// is the stored bytes. When the bound cuts the page short the answer's
// "next" is the seq to ask from.
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
	// The page is read before the status is written, so a refusal (an
	// unknown run, a corrupt row) is always a proper error answer.
	recs, next, err := t.Store.ReadStored(r.Context(), run, store.Seq(from), limit, s.maxBytes)
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
	for i, rec := range recs {
		if i > 0 {
			bw.WriteByte(',')
		}
		one.Reset()
		if err := enc.Encode(api.Record{Seq: rec.Seq, PrevHash: rec.PrevHash, Hash: rec.Hash, Raw: rec.Raw}); err != nil {
			s.log.Error("serve: encoding a record after the answer began", "run", run, "seq", rec.Seq, "err", err)
			return nil // the status is sent; the cut answer does not parse, which the client sees
		}
		bw.Write(one.Bytes()[:one.Len()-1]) // without Encode's newline
		recs[i] = store.Record{}            // written: its bytes need not stay held
	}
	bw.WriteString(`]`)
	if next != 0 {
		bw.WriteString(`,"next":` + strconv.FormatUint(uint64(next), 10))
	}
	runText, _ := run.MarshalText()
	bw.WriteString(`,"run":"` + string(runText) + "\"}\n")
	return bw.Flush()
}
