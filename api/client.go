package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/runseal/runseal/store"
)

// Bounds on what a Client reads of one answer: a signed note, a proof or
// a small JSON object, and a page of records.
const (
	maxNoteAnswer    = 1 << 20
	maxSmallAnswer   = 1 << 20
	maxProofAnswer   = 64 << 10 // spec/http.md section 5
	maxRecordsAnswer = 64 << 20
)

// ErrRedirect is the class of a redirect a Client refuses to follow: to
// another host, or from https to http.
var ErrRedirect = errors.New("redirect refused")

// ClientOptions configures a Client. The zero value is valid.
type ClientOptions struct {
	// Token is sent as the bearer token; none when empty.
	Token string
	// HTTPClient carries the requests; a client with a 30 s timeout when
	// nil. Its redirect policy is replaced by the Client's.
	HTTPClient *http.Client
	// UserAgent names the caller; "runseal" when empty.
	UserAgent string
}

// Client speaks the journal's HTTP API (spec/http.md) to one server. The
// base URL's query (such as ?tenant=acme) is kept on every request. It
// follows a redirect only to the same host and never from https to http,
// so a compromised or confused server cannot send the token, or a
// monitor's trust, elsewhere.
type Client struct {
	base  *url.URL
	token string
	ua    string
	hc    *http.Client
}

// NewClient returns a Client for the server at base, an http or https URL.
func NewClient(base string, opts ClientOptions) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s is not an http or https URL", Redact(base))
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	if opts.HTTPClient != nil {
		c := *opts.HTTPClient
		hc = &c
	}
	hc.CheckRedirect = checkRedirect
	ua := opts.UserAgent
	if ua == "" {
		ua = "runseal"
	}
	return &Client{base: u, token: opts.Token, ua: ua, hc: hc}, nil
}

func checkRedirect(req *http.Request, via []*http.Request) error {
	first := via[0].URL
	switch {
	case len(via) >= 10:
		return fmt.Errorf("%w: more than 10 redirects", ErrRedirect)
	case req.URL.Scheme != first.Scheme:
		return fmt.Errorf("%w: from %s to %s", ErrRedirect, first.Scheme, req.URL.Scheme)
	case !strings.EqualFold(req.URL.Host, first.Host):
		return fmt.Errorf("%w: to another host (%s)", ErrRedirect, Redact(req.URL.Host))
	}
	return nil
}

// Base is the server's base URL with its credentials redacted, for logs.
func (c *Client) Base() string { return Redact(c.base.String()) }

// Redact returns a URL fit for logs and evidence: its user information
// and the values of query parameters that carry secrets are replaced. A
// string that does not parse is cut to its scheme.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if i := strings.Index(raw, "://"); i >= 0 && i < 16 {
			return raw[:i+3] + "[redacted]"
		}
		return "[redacted]"
	}
	if u.User != nil {
		u.User = url.User("redacted")
	}
	q := u.Query()
	changed := false
	for k := range q {
		switch strings.ToLower(k) {
		case "token", "access_token", "auth", "key", "secret", "password", "pass", "apikey", "api_key", "sig", "signature":
			q[k] = []string{"redacted"}
			changed = true
		}
	}
	if changed {
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// do sends one request and returns the body of a 2xx answer, read to at
// most limit bytes; any other status is an *Error.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body []byte, limit int64) ([]byte, error) {
	u := c.base.JoinPath(path)
	all := c.base.Query()
	for k, v := range q {
		all[k] = v
	}
	u.RawQuery = all.Encode()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %v", method, Redact(u.String()), err)
	}
	req.Header.Set("User-Agent", c.ua)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			// url.Error prints the URL, credentials and all.
			return nil, fmt.Errorf("%s %s: %w", method, Redact(u.String()), ue.Err)
		}
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the answer: %w", method, Redact(u.String()), err)
	}
	if resp.StatusCode/100 != 2 {
		e := &Error{Status: resp.StatusCode}
		var eb ErrorBody
		if json.Unmarshal(b, &eb) == nil && eb.Error != "" {
			e.Message, e.Field = eb.Error, eb.Field
		} else {
			e.Message = fmt.Sprintf("%s: %.200q", resp.Status, b)
		}
		return nil, e
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s %s: answer longer than %d bytes", method, Redact(u.String()), limit)
	}
	return b, nil
}

func (c *Client) getJSON(ctx context.Context, path string, q url.Values, limit int64, v any) error {
	b, err := c.do(ctx, http.MethodGet, path, q, nil, limit)
	if err != nil {
		return err
	}
	return decodeAnswer(b, v)
}

func (c *Client) postJSON(ctx context.Context, path string, q url.Values, req, v any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	b, err := c.do(ctx, http.MethodPost, path, q, body, maxSmallAnswer)
	if err != nil {
		return err
	}
	return decodeAnswer(b, v)
}

func decodeAnswer(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("malformed answer: %w", err)
	}
	return nil
}

// Checkpoint returns the latest signed checkpoint note.
func (c *Client) Checkpoint(ctx context.Context) ([]byte, error) {
	return c.do(ctx, http.MethodGet, "v1/checkpoint", nil, nil, maxNoteAnswer)
}

// Witnessed returns the latest witnessed checkpoint note, with its
// cosignatures.
func (c *Client) Witnessed(ctx context.Context) ([]byte, error) {
	return c.do(ctx, http.MethodGet, "v1/checkpoint/witnessed", nil, nil, maxNoteAnswer)
}

// CheckpointAt returns the checkpoint signed at size, with the
// cosignatures kept for it.
func (c *Client) CheckpointAt(ctx context.Context, size uint64) ([]byte, error) {
	return c.do(ctx, http.MethodGet, "v1/checkpoint/"+strconv.FormatUint(size, 10), nil, nil, maxNoteAnswer)
}

// SignCheckpoint asks the server to sign its current checkpoint now.
func (c *Client) SignCheckpoint(ctx context.Context) ([]byte, error) {
	return c.do(ctx, http.MethodPost, "v1/checkpoint", nil, nil, maxNoteAnswer)
}

// Consistency returns the proof that the log at oldSize is a prefix of the
// log at newSize. An answer for other sizes, or with a malformed hash, is
// an error: it proves nothing.
func (c *Client) Consistency(ctx context.Context, oldSize, newSize uint64) ([]store.Digest, error) {
	q := url.Values{"old": {strconv.FormatUint(oldSize, 10)}, "new": {strconv.FormatUint(newSize, 10)}}
	var p struct {
		OldSize *uint64  `json:"old_size"`
		NewSize *uint64  `json:"new_size"`
		Proof   []string `json:"proof"`
	}
	if err := c.getJSON(ctx, "v1/proof/consistency", q, maxProofAnswer, &p); err != nil {
		return nil, err
	}
	if p.OldSize == nil || p.NewSize == nil || *p.OldSize != oldSize || *p.NewSize != newSize {
		return nil, fmt.Errorf("the proof answered is not for sizes %d to %d", oldSize, newSize)
	}
	if p.Proof == nil {
		return nil, errors.New("malformed proof: no \"proof\" array")
	}
	hs, err := DecodeHashes(p.Proof)
	if err != nil {
		return nil, fmt.Errorf("malformed proof: %w", err)
	}
	return hs, nil
}

// Inclusion returns the proof that run's leaf is in the log at size.
func (c *Client) Inclusion(ctx context.Context, run store.RunID, size uint64) (*InclusionProof, error) {
	q := url.Values{"run": {run.String()}, "size": {strconv.FormatUint(size, 10)}}
	var p InclusionProof
	if err := c.getJSON(ctx, "v1/proof/inclusion", q, maxProofAnswer, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Records returns up to limit records of run from seq from; the answer's
// Next says where to go on when the server's byte bound cut it short.
func (c *Client) Records(ctx context.Context, run store.RunID, from store.Seq, limit int) (*Records, error) {
	q := url.Values{"from": {strconv.FormatUint(uint64(from), 10)}, "limit": {strconv.Itoa(limit)}}
	var p Records
	if err := c.getJSON(ctx, "v1/runs/"+run.String()+"/records", q, maxRecordsAnswer, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Head returns run's last seq and hash.
func (c *Client) Head(ctx context.Context, run store.RunID) (*Head, error) {
	var h Head
	return &h, c.getJSON(ctx, "v1/runs/"+run.String()+"/head", nil, maxSmallAnswer, &h)
}

// Append writes JSON Lines (the input of 'journal append') under epoch.
func (c *Client) Append(ctx context.Context, epoch store.Epoch, lines []byte) (*Appended, error) {
	q := url.Values{"epoch": {strconv.FormatUint(uint64(epoch), 10)}}
	b, err := c.do(ctx, http.MethodPost, "v1/append", q, lines, maxRecordsAnswer)
	if err != nil {
		return nil, err
	}
	var a Appended
	return &a, decodeAnswer(b, &a)
}

// Acquire takes run's lease for owner.
func (c *Client) Acquire(ctx context.Context, run store.RunID, owner string, ttl time.Duration) (store.Lease, error) {
	var l store.Lease
	err := c.postJSON(ctx, "v1/runs/"+run.String()+"/lease", nil, LeaseRequest{Owner: owner, TTL: int64(ttl / time.Second)}, &l)
	return l, err
}

// Renew extends the lease owner holds at epoch.
func (c *Client) Renew(ctx context.Context, run store.RunID, owner string, epoch store.Epoch, ttl time.Duration) (store.Lease, error) {
	var l store.Lease
	err := c.postJSON(ctx, "v1/runs/"+run.String()+"/lease/renew", nil, LeaseRequest{Owner: owner, Epoch: uint64(epoch), TTL: int64(ttl / time.Second)}, &l)
	return l, err
}

// Release gives up the lease held at epoch.
func (c *Client) Release(ctx context.Context, run store.RunID, epoch store.Epoch) error {
	var r Released
	return c.postJSON(ctx, "v1/runs/"+run.String()+"/lease/release", nil, struct {
		Epoch uint64 `json:"epoch"`
	}{uint64(epoch)}, &r)
}

// Seal seals run with outcome under epoch.
func (c *Client) Seal(ctx context.Context, run store.RunID, epoch store.Epoch, outcome string) (*Sealed, error) {
	var s Sealed
	return &s, c.postJSON(ctx, "v1/runs/"+run.String()+"/seal", nil, SealRequest{Epoch: uint64(epoch), Outcome: outcome}, &s)
}
