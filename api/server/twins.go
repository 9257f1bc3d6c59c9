package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/appendinput"
	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/journalstore"
	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// The JSON twins of the operator console's pages (spec/http.md section 6):
// each page shows exactly what one of these answers, read by the same
// function, so a script sees what a person sees.

// storeAs returns t's store as T, an interface the server's Store does
// not require (Store is what the API's own routes call): the twins read
// more of a store than the API does. Every runseal backend, and the
// sealing decorator over one, has them; a store without is answered 501.
func storeAs[T any](t *Tenant, what string) (T, error) {
	s, ok := t.Store.(T)
	if !ok {
		return s, &api.Error{Status: http.StatusNotImplemented, Message: "this store keeps no " + what}
	}
	return s, nil
}

// positions is the log role's LogPositions, for a run's seal.
type positions interface {
	LogPositions(ctx context.Context, runs []store.RunID) ([]*store.Position, error)
}

// StatusRoutes returns the routes of the console's JSON twins, to pass in
// Config.Routes; m answers GET /v1/activity (nil: that route is left out).
func StatusRoutes(m *Meter) []Route {
	rs := []Route{
		{Pattern: "GET /v1/status", Role: RoleReader, Handle: getStatus},
		{Pattern: "GET /v1/runs/{run}/status", Role: RoleReader, Handle: getRunStatus},
		{Pattern: "GET /v1/disclosures", Role: RoleReader, Handle: getDisclosures},
		// A study folds its case's records, which may be many MiBs.
		{Pattern: "GET /v1/studies", Role: RoleReader, Handle: getStudies, Heavy: true},
		{Pattern: "GET /v1/studies/{study}", Role: RoleReader, Handle: getStudy, Heavy: true},
	}
	if m != nil {
		rs = append(rs, Route{Pattern: "GET /v1/activity", Role: RoleReader, Handle: func(w http.ResponseWriter, r *http.Request, t *Tenant) error {
			w.Header().Set("Cache-Control", "no-store")
			writeJSON(w, http.StatusOK, m.Activity(t.Store.Tenant()))
			return nil
		}})
	}
	return rs
}

// TokenRoute answers GET /v1/tokens: the tenant's tokens (never a
// secret, nor its hash), from ts.
func TokenRoute(ts store.TokenStore) Route {
	return Route{Pattern: "GET /v1/tokens", Role: RoleReader, Handle: func(w http.ResponseWriter, r *http.Request, t *Tenant) error {
		toks, err := TenantTokens(r.Context(), ts, t.Store.Tenant())
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, Tokens{Tokens: toks})
		return nil
	}}
}

// Tokens answers GET /v1/tokens.
type Tokens struct {
	Tokens []store.Token `json:"tokens"`
}

// TenantTokens lists tenant's tokens, revoked ones included, by creation.
// store.Token never marshals its hash.
func TenantTokens(ctx context.Context, ts store.TokenStore, tenant string) ([]store.Token, error) {
	all, err := ts.Tokens(ctx)
	if err != nil {
		return nil, err
	}
	out := []store.Token{}
	for _, tok := range all {
		if tok.Tenant == tenant {
			tok.Hash = store.Digest{}
			out = append(out, tok)
		}
	}
	return out, nil
}

// RunStatus answers GET /v1/runs/{run}/status: where a run stands, and
// its inclusion in the newest witnessed checkpoint. Its records are GET
// /v1/runs/{run}/records.
type RunStatus struct {
	Run          store.RunID         `json:"run"`
	Head         api.Head            `json:"head"`
	Sealed       *store.Position     `json:"sealed"` // null: not sealed
	Cancellation *store.Cancellation `json:"cancellation"`
	// Witnessed is the newest witnessed checkpoint, null when none is.
	Witnessed *CheckpointInfo `json:"witnessed"`
	// Inclusion proves the run's leaf in Witnessed; null when the run is
	// not sealed or was sealed at or after its size. InclusionVerified
	// says the server checked it against the root in Witnessed's note,
	// after checking the note's signatures against the log key and the
	// witness policy (RFC 9162; checkpoint.Policy.Verify).
	Inclusion         *api.InclusionProof `json:"inclusion"`
	InclusionVerified bool                `json:"inclusion_verified"`
	// WitnessedProblem says why the kept witnessed note does not verify
	// (kept under an earlier policy, or damaged); "" when it does.
	WitnessedProblem string `json:"witnessed_problem,omitempty"`
}

// openWitnessed checks a kept witnessed note as an auditor would (the log
// key, and the policy's quorum when there is a policy) and returns the
// checkpoint it signs, which must be the one kept beside it.
func openWitnessed(t *Tenant, wit *store.SignedCheckpoint) (checkpoint.Checkpoint, error) {
	var signed *checkpoint.Signed
	var err error
	if t.Policy != nil {
		signed, err = t.Policy.Verify(wit.Note, PolicyLogArgs(t.Policy, t.LogKey)...)
	} else {
		signed, err = checkpoint.Open(wit.Note, note.VerifierList(t.LogKey))
	}
	if err != nil {
		return checkpoint.Checkpoint{}, err
	}
	cp := signed.Checkpoint()
	if cp.Size != wit.Size || cp.Root != wit.Root {
		return cp, fmt.Errorf("the note signs size %d, root %s; kept beside it: size %d, root %s", cp.Size, api.EncodeHash(cp.Root), wit.Size, api.EncodeHash(wit.Root))
	}
	return cp, nil
}

// ReadRunStatus reads run's RunStatus in t.
func ReadRunStatus(ctx context.Context, t *Tenant, run store.RunID, now time.Time) (RunStatus, error) {
	rs := RunStatus{Run: run}
	h, err := t.Store.Head(ctx, run)
	if err != nil {
		return rs, err
	}
	if h.Seq == 0 {
		return rs, &api.Error{Status: http.StatusNotFound, Message: fmt.Sprintf("run %s has no records in tenant %s", run, appendinput.Quote(t.Store.Tenant()))}
	}
	rs.Head = api.Head{Run: run, Seq: h.Seq, Hash: h.Hash}
	lp, err := storeAs[positions](t, "log positions")
	if err != nil {
		return rs, err
	}
	pos, err := lp.LogPositions(ctx, []store.RunID{run})
	if err != nil {
		return rs, err
	}
	if len(pos) == 1 {
		rs.Sealed = pos[0]
	}
	if rs.Cancellation, err = t.Store.Cancellation(ctx, run); err != nil {
		return rs, err
	}
	wit, err := t.Store.LatestWitnessed(ctx)
	if err != nil {
		return rs, err
	}
	rs.Witnessed = checkpointInfo(wit, now)
	if wit == nil || rs.Sealed == nil || rs.Sealed.Index >= wit.Size {
		return rs, nil
	}
	inc, err := t.Store.InclusionProofAt(ctx, run, wit.Size)
	if err != nil || inc == nil {
		return rs, err
	}
	rs.Inclusion = &api.InclusionProof{Run: run, Index: inc.Index, Size: inc.Size, Leaf: api.EncodeHash(inc.Leaf), Proof: api.EncodeHashes(inc.Proof)}
	hs := make([]log.Hash, len(inc.Proof))
	for i, d := range inc.Proof {
		hs[i] = d
	}
	cp, err := openWitnessed(t, wit)
	if err != nil {
		rs.WitnessedProblem = fmt.Sprintf("the kept witnessed checkpoint %d does not verify: %v", wit.Size, err)
		return rs, nil
	}
	rs.InclusionVerified = inc.Size == cp.Size && log.VerifyInclusion(inc.Leaf, inc.Index, inc.Size, hs, cp.Root) == nil
	return rs, nil
}

func getRunStatus(w http.ResponseWriter, r *http.Request, t *Tenant) error {
	run, err := runParam(r)
	if err != nil {
		return err
	}
	rs, err := ReadRunStatus(r.Context(), t, run, time.Now())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rs)
	return nil
}

// Disclosures answers GET /v1/disclosures: a page of the disclosure
// register, oldest first; Next, when set, is the after= of the next page.
type Disclosures struct {
	Disclosures []store.Disclosure `json:"disclosures"`
	Next        string             `json:"next,omitempty"`
}

// ReadDisclosures reads a page of t's disclosure register strictly after
// the id after ("" from the start).
func ReadDisclosures(ctx context.Context, t *Tenant, after string, limit int) (Disclosures, error) {
	reg, ok := t.Store.(store.DisclosureRegister)
	if !ok {
		return Disclosures{Disclosures: []store.Disclosure{}}, nil
	}
	// One more than asked tells whether there is a next page.
	ds, err := reg.Disclosures(ctx, after, min(limit+1, store.MaxLimit))
	if err != nil {
		return Disclosures{}, err
	}
	out := Disclosures{Disclosures: ds}
	if len(ds) > limit {
		out.Disclosures = ds[:limit]
		out.Next = ds[limit-1].ID
	}
	if out.Disclosures == nil {
		out.Disclosures = []store.Disclosure{}
	}
	return out, nil
}

func getDisclosures(w http.ResponseWriter, r *http.Request, t *Tenant) error {
	limit, err := limitParam(r, 100)
	if err != nil {
		return err
	}
	d, err := ReadDisclosures(r.Context(), t, r.URL.Query().Get("after"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

// Studies answers GET /v1/studies: the journal's trial lifecycle studies,
// most recently active first, as 'journal study list --json'.
type Studies struct {
	Studies []journalstore.StudySummary `json:"studies"`
}

func getStudies(w http.ResponseWriter, r *http.Request, t *Tenant) error {
	limit, err := limitParam(r, 50)
	if err != nil {
		return err
	}
	ss, err := ListStudies(r.Context(), t, limit)
	if err != nil {
		return err
	}
	if ss == nil {
		ss = []journalstore.StudySummary{}
	}
	writeJSON(w, http.StatusOK, Studies{Studies: ss})
	return nil
}

// ListStudies lists t's studies, most recently active first, as 'journal
// study list'.
func ListStudies(ctx context.Context, t *Tenant, limit int) ([]journalstore.StudySummary, error) {
	j, err := storeAs[store.Journal](t, "studies (it is not a whole journal)")
	if err != nil {
		return nil, err
	}
	return journalstore.ListStudies(ctx, j, nil, limit)
}

// ReadStudy reads the study whose case id is s, as 'journal study show':
// an unknown study is ErrNotFound, a study whose records do not fold an
// error naming the first record that does not.
func ReadStudy(ctx context.Context, t *Tenant, s string) (journalstore.StudyView, error) {
	c, err := store.ParseCaseID(s)
	if err != nil || c.IsZero() {
		return journalstore.StudyView{}, badRequest("study", "study %s is not a study id (a ULID, optionally prefixed case_)", appendinput.Quote(s))
	}
	j, err := storeAs[store.Journal](t, "studies (it is not a whole journal)")
	if err != nil {
		return journalstore.StudyView{}, err
	}
	v, err := journalstore.ReadStudyView(ctx, j, lifecycle.StudyID(c.String()))
	if lifecycle.KindOf(err) == lifecycle.KindNotFound {
		return v, notFound("no study %s in tenant %s", c, appendinput.Quote(t.Store.Tenant()))
	}
	var ie *journalstore.InconsistentError
	if errors.As(err, &ie) {
		return v, &api.Error{Status: http.StatusConflict, Message: fmt.Sprintf("study %s: its records do not fold at run %s seq %d: %s", c, ie.Run, ie.Seq, ie.Detail)}
	}
	return v, err
}

func getStudy(w http.ResponseWriter, r *http.Request, t *Tenant) error {
	v, err := ReadStudy(r.Context(), t, r.PathValue("study"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}
