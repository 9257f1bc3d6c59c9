package console

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/api/server"
	"github.com/runseal/runseal/store"
)

// pageSize is how many rows a listing shows per page.
const pageSize = 50

var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"whenp": func(t *time.Time) string {
		if t == nil || t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"age": ageText,
	"ago": agoText,
	"dur": durText,
	// ms shows a latency bound in milliseconds to two significant digits.
	"ms": func(v float64) string {
		switch {
		case v < 0:
			return "> 4600"
		case v < 10:
			return fmt.Sprintf("≤ %.2g", v)
		}
		return fmt.Sprintf("≤ %.0f", v)
	},
	"short": func(s string) string {
		if len(s) > 16 {
			return s[:16] + "…"
		}
		return s
	},
	"hex":  func(d store.Digest) string { return fmt.Sprintf("%x", d[:]) },
	"b64":  func(d store.Digest) string { return api.EncodeHash(d) },
	"join": strings.Join,
	// firstRuns bounds a list shown in a table cell.
	"firstRuns": func(rs []store.RunID) []store.RunID { return rs[:min(len(rs), 10)] },
	"add":       func(a, b int) int { return a + b },
	"mul":       func(a, b int) int { return a * b },
	"pager": func(d backlogsData, param string, page int, more bool, l ...any) pagerView {
		v := pagerView{D: d, Param: param, Page: page, More: more}
		if len(l) > 0 {
			v.L = l[0]
		}
		return v
	},
	"tenantq": func(s *session) string {
		return url.QueryEscape(s.Token.Tenant)
	},
}

// skewTolerance is how far in the future a time may be and still read
// "just now": a checkpoint stamped by another host's clock (a second
// server on the same PostgreSQL, a signer in another process) may be a
// little ahead of this server's even when both are kept by NTP, and the
// age is truncated to seconds. Beyond a minute the clocks disagree by
// more than noise, which the operator should see and fix.
const skewTolerance = time.Minute

// agoText says how long ago something happened, sec seconds before now, as
// a person would: "just now" for a moment ago or a moment ahead (within
// skewTolerance, clock skew not worth a word), "3m 12s ago" for the past,
// and "in the future (clock skew of 3m 12s)" for a time further ahead,
// which names the cause instead of a nonsense "in the future ago".
func agoText(sec int64) string {
	switch {
	case sec < -int64(skewTolerance/time.Second):
		return "in the future (clock skew of " + ageText(-sec) + ")"
	case sec <= 0:
		return "just now"
	}
	return ageText(sec) + " ago"
}

// ageText writes a duration in seconds as people read it: "42s", "3m 12s",
// "5h 02m", "2d 04h". A negative duration (a lag computed across skewed
// clocks) reads "0s": nothing is behind.
func ageText(sec int64) string {
	sec = max(sec, 0)
	d := time.Duration(sec) * time.Second
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", sec)
	case d < time.Hour:
		return fmt.Sprintf("%dm %02ds", sec/60, sec%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %02dm", sec/3600, sec%3600/60)
	}
	return fmt.Sprintf("%dd %02dh", sec/86400, sec%86400/3600)
}

// twin is the path of a page's JSON twin for the session's tenant.
func twin(s *session, path string) string {
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return path + sep + "tenant=" + url.QueryEscape(s.Token.Tenant)
}

func (c *Console) logPage(w http.ResponseWriter, r *http.Request, s *session) (int, string, view, error) {
	st, err := server.ReadLogStatus(r.Context(), s.tenant, c.cfg.Now())
	if err != nil {
		return 0, "", view{}, err
	}
	return http.StatusOK, "log", view{Title: "Log", Nav: "log", Twin: twin(s, "/v1/status"), Data: st}, nil
}

type activityData struct {
	server.Activity
	HourPlot, DayPlot plot
}

func (c *Console) activityPage(w http.ResponseWriter, r *http.Request, s *session) (int, string, view, error) {
	m := c.cfg.Meter
	if m == nil {
		m = server.NewMeter(c.cfg.Now)
	}
	a := m.Activity(s.Token.Tenant)
	d := activityData{Activity: a, HourPlot: newPlot(a.Hour, "last hour, per minute"), DayPlot: newPlot(a.Day, "last 24 hours, per 10 minutes")}
	return http.StatusOK, "activity", view{Title: "Activity", Nav: "activity", Twin: twin(s, "/v1/activity"), Data: d}, nil
}

// listing is one section of the Backlogs page: a page of runs from a store
// listing that has no cursor, read as a prefix of the listing (the store
// bounds every listing at store.MaxLimit).
type listing[T any] struct {
	Name  string
	Param string // the query parameter of its page number
	Page  int    // from 0
	Rows  []T
	More  bool
	Count *uint64 // the whole count, where the store keeps one
	Twin  string
}

func pageParam(r *http.Request, name string) int {
	n, err := strconv.Atoi(r.URL.Query().Get(name))
	if err != nil || n < 0 {
		return 0
	}
	return min(n, store.MaxLimit/pageSize-1)
}

// pageOf reads page (from 0) of a listing by asking for its prefix.
func pageOf[T any](page int, list func(limit int) ([]T, error)) ([]T, bool, error) {
	limit := min((page+1)*pageSize+1, store.MaxLimit)
	all, err := list(limit)
	if err != nil {
		return nil, false, err
	}
	from := min(page*pageSize, len(all))
	to := min(from+pageSize, len(all))
	return all[from:to], len(all) > to, nil
}

// pagerView is what a Backlogs section's pager links need.
type pagerView struct {
	D     backlogsData
	Param string
	Page  int
	More  bool
	L     any // the section, for the outcomes template
}

// outcomeCounter is the Finder role's count, which the API's Store does
// not require; without it a section shows no total.
type outcomeCounter interface {
	CountByOutcome(ctx context.Context, outcome string) (uint64, error)
}

type backlogsData struct {
	Abandoned   listing[store.RunID]
	Waiting     listing[store.WaitingRun]
	Quarantined listing[store.RunID]
	Cancelled   listing[store.RunID]
	// Query keeps the other sections' pages in each section's links.
	Query url.Values
}

// PageLink is the Backlogs URL with param set to page.
func (d backlogsData) PageLink(param string, page int) string {
	q := url.Values{}
	for k, v := range d.Query {
		q[k] = v
	}
	q.Set(param, strconv.Itoa(page))
	return "/console/backlogs?" + q.Encode()
}

func (c *Console) backlogsPage(w http.ResponseWriter, r *http.Request, s *session) (int, string, view, error) {
	ctx, st := r.Context(), s.tenant.Store
	d := backlogsData{Query: url.Values{}}
	for _, p := range []string{"abandoned", "waiting", "quarantined", "cancelled"} {
		if v := r.URL.Query().Get(p); v != "" {
			d.Query.Set(p, v)
		}
	}
	var err error
	d.Abandoned = listing[store.RunID]{Name: "Abandoned runs", Param: "abandoned", Page: pageParam(r, "abandoned"), Twin: twin(s, "/v1/runs?by=abandoned")}
	if d.Abandoned.Rows, d.Abandoned.More, err = pageOf(d.Abandoned.Page, func(n int) ([]store.RunID, error) { return st.AbandonedRuns(ctx, n) }); err != nil {
		return 0, "", view{}, err
	}
	d.Waiting = listing[store.WaitingRun]{Name: "Waiting runs", Param: "waiting", Page: pageParam(r, "waiting"), Twin: twin(s, "/v1/runs?by=waiting")}
	if d.Waiting.Rows, d.Waiting.More, err = pageOf(d.Waiting.Page, func(n int) ([]store.WaitingRun, error) { return st.WaitingRuns(ctx, n) }); err != nil {
		return 0, "", view{}, err
	}
	for _, o := range []struct {
		l       *listing[store.RunID]
		outcome string
		name    string
	}{{&d.Quarantined, "quarantined", "Quarantined runs"}, {&d.Cancelled, "cancelled", "Cancelled runs"}} {
		*o.l = listing[store.RunID]{Name: o.name, Param: o.outcome, Page: pageParam(r, o.outcome), Twin: twin(s, "/v1/runs?by=outcome&outcome="+o.outcome)}
		if o.l.Rows, o.l.More, err = pageOf(o.l.Page, func(n int) ([]store.RunID, error) { return st.RunsByOutcome(ctx, o.outcome, n) }); err != nil {
			return 0, "", view{}, err
		}
		if cs, ok := st.(outcomeCounter); ok {
			n, err := cs.CountByOutcome(ctx, o.outcome)
			if err != nil {
				return 0, "", view{}, err
			}
			o.l.Count = &n
		}
	}
	return http.StatusOK, "backlogs", view{Title: "Backlogs", Nav: "backlogs", Twin: twin(s, "/v1/runs?by=abandoned"), Data: d}, nil
}

type runData struct {
	server.RunStatus
	Records []recordView
	From    store.Seq
	Next    store.Seq // 0: no more
	Prev    store.Seq // 0: first page
	// Proof is the inclusion proof's hashes joined by spaces, for the
	// page's script.
	Proof string
}

// recordsPerPage and recordsPageBytes bound the records one Run page
// shows: a record may be 1 MiB, and a page of a hundred of them would be a
// page nobody can read and a server's memory spent for nothing. The byte
// bound is a quarter of the records API's (server.DefaultMaxRecordsBytes),
// since the page shows each record's bytes twice (its fields and its raw
// bytes), HTML-escaped.
const (
	recordsPerPage   = 100
	recordsPageBytes = 1 << 20
)

// storedReader is how the Run page reads records: as stored, bounded in
// bytes (store.Reader.ReadStored), with nothing opened.
type storedReader interface {
	ReadStored(ctx context.Context, run store.RunID, from store.Seq, limit, maxBytes int) ([]store.Record, store.Seq, error)
}

// readRecords reads the records of one Run page from from, as stored: at
// most recordsPerPage, and none past the one that takes their stored bytes
// over recordsPageBytes (at least one). next is the seq the next page
// starts at, 0 at the head. It is one ReadStored within the byte bound,
// which reads at most one record past it, so a page costs its bound plus
// one record whatever its records' sizes, and a sealed journal opens
// nothing. One record past the count is asked for, within the same byte
// bound, to learn whether there are more.
func readRecords(ctx context.Context, rd storedReader, run store.RunID, from store.Seq) (recs []store.Record, next store.Seq, err error) {
	recs, next, err = rd.ReadStored(ctx, run, from, recordsPerPage+1, recordsPageBytes)
	if err != nil {
		return nil, 0, err
	}
	if len(recs) > recordsPerPage {
		next = recs[recordsPerPage].Seq
		recs = recs[:recordsPerPage:recordsPerPage]
	}
	return recs, next, nil
}

// erasures is the sealed journal's view of its key ring's erasures
// (sealed.Journal.Erased); a store without it has no key ring, and its
// sealed fields show as sealed.
type erasures interface {
	Erased(ctx context.Context, scope string) (bool, error)
}

// erasedScopes answers, for the scopes of one page, whether each was
// erased, asking the store's key ring once per scope and opening nothing.
func erasedScopes(ctx context.Context, st any) func(scope string) (bool, error) {
	er, ok := st.(erasures)
	if !ok {
		return func(string) (bool, error) { return false, nil }
	}
	seen := map[string]bool{}
	return func(scope string) (bool, error) {
		if v, ok := seen[scope]; ok {
			return v, nil
		}
		v, err := er.Erased(ctx, scope)
		if err != nil {
			return false, err
		}
		seen[scope] = v
		return v, nil
	}
}

func (c *Console) runPage(w http.ResponseWriter, r *http.Request, s *session) (int, string, view, error) {
	run, err := store.ParseRunID(r.PathValue("run"))
	if err != nil {
		return 0, "", view{}, &api.Error{Status: http.StatusBadRequest, Message: fmt.Sprintf("%q is not a run id (a 26-character ULID)", shortText(r.PathValue("run")))}
	}
	from := store.Seq(1)
	if v := r.URL.Query().Get("from"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 {
			return 0, "", view{}, &api.Error{Status: http.StatusBadRequest, Message: fmt.Sprintf("from %q is not a seq from 1", shortText(v))}
		}
		from = store.Seq(n)
	}
	ctx := r.Context()
	rs, err := server.ReadRunStatus(ctx, s.tenant, run, c.cfg.Now())
	if err != nil {
		return 0, "", view{}, err
	}
	recs, next, err := readRecords(ctx, s.tenant.Store, run, from)
	if err != nil {
		return 0, "", view{}, err
	}
	d := runData{RunStatus: rs, From: from, Next: next}
	switch {
	case from > recordsPerPage:
		d.Prev = from - recordsPerPage
	case from > 1:
		d.Prev = 1
	}
	if d.Records, err = recordViews(recs, s.tenant.Store.Tenant(), erasedScopes(ctx, s.tenant.Store)); err != nil {
		return 0, "", view{}, err
	}
	if rs.Inclusion != nil {
		d.Proof = strings.Join(rs.Inclusion.Proof, " ")
	}
	return http.StatusOK, "run", view{Title: "Run " + run.String(), Nav: "backlogs", Twin: twin(s, "/v1/runs/"+run.String()+"/status"), Data: d}, nil
}

// shortText quotes at most a short prefix of outside input.
func shortText(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

type disclosuresData struct {
	Page   server.Disclosures
	After  string
	Tokens []store.Token
}

func (c *Console) disclosuresPage(w http.ResponseWriter, r *http.Request, s *session) (int, string, view, error) {
	after := r.URL.Query().Get("after")
	if after != "" && !strings.HasPrefix(after, "dsc_") {
		return 0, "", view{}, &api.Error{Status: http.StatusBadRequest, Message: fmt.Sprintf("after %q is not a disclosure id", shortText(after))}
	}
	d, err := server.ReadDisclosures(r.Context(), s.tenant, after, pageSize)
	if err != nil {
		return 0, "", view{}, err
	}
	toks, err := server.TenantTokens(r.Context(), c.cfg.Tokens, s.Token.Tenant)
	if err != nil {
		return 0, "", view{}, err
	}
	return http.StatusOK, "disclosures", view{Title: "Disclosures", Nav: "disclosures", Twin: twin(s, "/v1/disclosures"),
		Data: disclosuresData{Page: d, After: after, Tokens: toks}}, nil
}

func (c *Console) studiesPage(w http.ResponseWriter, r *http.Request, s *session) (int, string, view, error) {
	ss, err := server.ListStudies(r.Context(), s.tenant, pageSize)
	if err != nil {
		return 0, "", view{}, err
	}
	return http.StatusOK, "studies", view{Title: "Studies", Nav: "studies", Twin: twin(s, "/v1/studies"), Data: ss}, nil
}

func (c *Console) studyPage(w http.ResponseWriter, r *http.Request, s *session) (int, string, view, error) {
	v, err := server.ReadStudy(r.Context(), s.tenant, r.PathValue("study"))
	if err != nil {
		return 0, "", view{}, err
	}
	return http.StatusOK, "study", view{Title: "Study " + string(v.Study), Nav: "studies", Twin: twin(s, "/v1/studies/"+string(v.Study)), Data: v}, nil
}
