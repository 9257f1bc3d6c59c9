package loadtest

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/runseal/runseal/witness"
)

// requestTimeout bounds one add-checkpoint exchange, as the transport's
// timeout did.
const requestTimeout = 30 * time.Second

// target is where the simulated logs send: the witness's add-checkpoint
// endpoint.
type target struct {
	addr   string // host:port
	tls    *tls.Config
	header []byte // the request line and the headers every request shares
}

// newTarget parses the witness's submission prefix, an http or https URL.
func newTarget(prefix string) (*target, error) {
	u, err := url.Parse(prefix)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.User != nil {
		return nil, fmt.Errorf("loadtest: %q is not an http or https URL without user or query", prefix)
	}
	t := &target{addr: u.Host}
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		t.addr = net.JoinHostPort(u.Hostname(), port)
	}
	if u.Scheme == "https" {
		t.tls = &tls.Config{ServerName: u.Hostname()}
	}
	path := strings.TrimSuffix(u.EscapedPath(), "/") + "/add-checkpoint"
	t.header = fmt.Appendf(nil, "POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: runseal-witness-loadtest\r\nContent-Type: text/plain\r\n", path, u.Host)
	return t, nil
}

// A logConn is one simulated log's keep-alive connection to the witness.
// A log sends one request at a time, as a real log must, so its connection
// serves one goroutine and needs none of net/http's transport machinery:
// the transport's read and write goroutines, and the handoffs between them,
// would cost the generator CPU time that the witness under test shares.
// Answers are read with net/http's parser and classified by
// witness.ReadAddCheckpointResponse, as witness.Client does.
type logConn struct {
	t   *target
	c   net.Conn
	br  *bufio.Reader
	buf []byte
}

// addCheckpoint sends one add-checkpoint request and reads its answer. On
// any transport failure the connection is closed, to be dialled again by
// the next request.
func (lc *logConn) addCheckpoint(ctx context.Context, old uint64, proof [][32]byte, msg []byte) ([]byte, error) {
	if lc.c == nil {
		d := net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
		var c net.Conn
		var err error
		if lc.t.tls != nil {
			c, err = (&tls.Dialer{NetDialer: &d, Config: lc.t.tls}).DialContext(ctx, "tcp", lc.t.addr)
		} else {
			c, err = d.DialContext(ctx, "tcp", lc.t.addr)
		}
		if err != nil {
			return nil, err
		}
		lc.c, lc.br = c, bufio.NewReader(c)
	}
	body := (&witness.AddCheckpointRequest{Old: old, Proof: proof, Note: msg}).Marshal()
	lc.buf = append(lc.buf[:0], lc.t.header...)
	lc.buf = append(lc.buf, "Content-Length: "...)
	lc.buf = strconv.AppendInt(lc.buf, int64(len(body)), 10)
	lc.buf = append(lc.buf, "\r\n\r\n"...)
	lc.buf = append(lc.buf, body...)
	lc.c.SetDeadline(time.Now().Add(requestTimeout))
	stop := context.AfterFunc(ctx, func() { lc.c.SetDeadline(time.Now()) })
	defer stop()
	if _, err := lc.c.Write(lc.buf); err != nil {
		lc.close()
		return nil, err
	}
	resp, err := http.ReadResponse(lc.br, nil)
	if err != nil {
		lc.close()
		return nil, err
	}
	lines, err := witness.ReadAddCheckpointResponse(resp)
	// The rest of the body, if any, must be read for the connection to
	// be used again.
	_, derr := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if derr != nil || resp.Close {
		lc.close()
	}
	return lines, err
}

func (lc *logConn) close() {
	if lc.c != nil {
		lc.c.Close()
		lc.c, lc.br = nil, nil
	}
}

// conns holds the logs' connections, to close them when the test ends.
type conns struct {
	mu  sync.Mutex
	all []*logConn
}

func (cs *conns) open(t *target) *logConn {
	lc := &logConn{t: t}
	cs.mu.Lock()
	cs.all = append(cs.all, lc)
	cs.mu.Unlock()
	return lc
}

// closeAll closes every connection; the logs must be done sending.
func (cs *conns) closeAll() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, lc := range cs.all {
		lc.close()
	}
}
