package witness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// maxResponseSize caps what a Client reads of an answer. Cosignature lines
// are about 130 bytes each (ML-DSA ones about 3.3 KiB); no witness needs
// more than this for a handful of keys.
const maxResponseSize = 64 << 10

// A Client submits checkpoints to one C2SP tlog-witness over HTTP, as a log
// publisher does. It is safe for concurrent use; the underlying
// http.Client keeps connections alive, as the protocol recommends.
type Client struct {
	prefix string // submission and monitoring prefix, without trailing slash
	hc     *http.Client
}

// NewClient returns a client for the witness whose submission (and
// monitoring) prefix is prefix, an http or https URL such as
// "https://witness.example/tlog". hc is used for every request;
// http.DefaultClient if nil. Deadlines come from the context of each call.
func NewClient(prefix string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(prefix)
	if err != nil {
		return nil, fmt.Errorf("witness: client prefix %q: %w", prefix, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("witness: client prefix %q must be an http or https URL without user, query or fragment", prefix)
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{prefix: strings.TrimSuffix(u.String(), "/"), hc: hc}, nil
}

// AddCheckpoint asks the witness to cosign signedNote, given the size old
// that the caller believes the witness last cosigned (0 if none or unknown)
// and an RFC 6962 consistency proof from old to the checkpoint's size. It
// returns the witness's cosignature lines (note signature lines, each
// ending in a newline) for the caller to verify and add to its note, for
// instance with checkpoint.Signed.WithSignatures.
//
// A 409 answer is a *ConflictError carrying the witness's size: retry with
// a proof from there. Other refusals are *StatusError values wrapping the
// sentinel of their status (ErrMalformedRequest, ErrNotTrusted,
// ErrUnknownLog, ErrInconsistent, ErrRateLimited with RetryAfter,
// ErrUnavailable, or ErrUnexpectedResponse). A request the witness would
// refuse as malformed (more than MaxProofHashes hashes, an empty note, a
// body over MaxRequestSize) is not sent and fails with ErrMalformedRequest.
// Transport failures are returned as they are.
func (c *Client) AddCheckpoint(ctx context.Context, old uint64, proof [][32]byte, signedNote []byte) ([]byte, error) {
	if len(proof) > MaxProofHashes {
		return nil, fmt.Errorf("witness: %w: %d proof hashes, more than %d", ErrMalformedRequest, len(proof), MaxProofHashes)
	}
	if len(signedNote) == 0 {
		return nil, fmt.Errorf("witness: %w: empty note", ErrMalformedRequest)
	}
	body := (&AddCheckpointRequest{Old: old, Proof: proof, Note: signedNote}).Marshal()
	if len(body) > MaxRequestSize {
		return nil, fmt.Errorf("witness: %w: request of %d bytes, more than %d", ErrMalformedRequest, len(body), MaxRequestSize)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.prefix+"/add-checkpoint", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("witness: %w", err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("witness: add-checkpoint: %w", err)
	}
	defer resp.Body.Close()
	return ReadAddCheckpointResponse(resp)
}

// ReadAddCheckpointResponse reads a witness's answer to add-checkpoint, as
// Client.AddCheckpoint does (it returns what AddCheckpoint returns), for a
// caller that sends requests its own way, such as a load generator on a
// connection of its own. It reads at most 64 KiB of the body and leaves
// closing it to the caller.
func ReadAddCheckpointResponse(resp *http.Response) ([]byte, error) {
	b, err := readCapped(resp.Body)
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		if !isSignatureLines(b) {
			return nil, &StatusError{StatusCode: resp.StatusCode, Body: snippet(b), err: fmt.Errorf("%w: 200 body is not signature lines", ErrUnexpectedResponse)}
		}
		return b, nil
	case http.StatusConflict:
		mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		if mt != ContentTypeTlogSize {
			// tlog-witness v1.0.0 answered 409 without a size for a
			// second root of the same size; later versions say 422.
			return nil, &StatusError{StatusCode: resp.StatusCode, Body: snippet(b), err: ErrInconsistent}
		}
		num, ok := bytes.CutSuffix(b, []byte{'\n'})
		size, ok2 := parseDecimal(num)
		if !ok || !ok2 {
			return nil, &StatusError{StatusCode: resp.StatusCode, Body: snippet(b), err: fmt.Errorf("%w: 409 body is not a size", ErrUnexpectedResponse)}
		}
		return nil, &ConflictError{Size: size}
	}
	return nil, statusError(resp, b)
}

// LatestCheckpoint fetches the latest checkpoint the witness cosigned for
// origin from its monitoring API. The note is returned unverified: open it
// with checkpoint.Open and the keys you trust. A witness that never cosigned
// origin answers 404, returned as a *StatusError wrapping ErrNotCosigned.
func (c *Client) LatestCheckpoint(ctx context.Context, origin string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.prefix+"/"+OriginHash(origin)+"/checkpoint", nil)
	if err != nil {
		return nil, fmt.Errorf("witness: %w", err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("witness: checkpoint: %w", err)
	}
	defer resp.Body.Close()
	b, err := readCapped(resp.Body)
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return b, nil
	case http.StatusNotFound:
		return nil, &StatusError{StatusCode: resp.StatusCode, Body: snippet(b), err: ErrNotCosigned}
	}
	return nil, statusError(resp, b)
}

func readCapped(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxResponseSize+1))
	if err != nil {
		return nil, fmt.Errorf("witness: reading answer: %w", err)
	}
	if len(b) > maxResponseSize {
		return nil, fmt.Errorf("witness: %w: answer longer than %d bytes", ErrUnexpectedResponse, maxResponseSize)
	}
	return b, nil
}

func statusError(resp *http.Response, body []byte) *StatusError {
	e := &StatusError{StatusCode: resp.StatusCode, Body: snippet(body), err: sentinelForStatus(resp.StatusCode)}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		e.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return e
}

// parseRetryAfter reads a Retry-After header: delay seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		return time.Duration(min(n, 86400)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// snippet returns the start of a body as text for an error message.
func snippet(b []byte) string {
	const n = 200
	b = bytes.TrimSpace(b)
	if len(b) > n {
		b = b[:n]
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// isSignatureLines reports whether b is one or more note signature lines,
// each starting with an em dash and a space and ending in a newline.
func isSignatureLines(b []byte) bool {
	if len(b) == 0 || b[len(b)-1] != '\n' {
		return false
	}
	for len(b) > 0 {
		var l []byte
		l, b, _ = bytes.Cut(b, []byte{'\n'})
		if !bytes.HasPrefix(l, []byte("\u2014 ")) {
			return false
		}
	}
	return true
}
