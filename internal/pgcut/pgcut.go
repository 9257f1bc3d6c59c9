// Package pgcut is a PostgreSQL protocol-aware TCP proxy for tests: it
// relays a test server's connections and can cut one at its next COMMIT,
// losing the acknowledgement the way a network partition or a crashed
// client host would. store/postgres's tests and lifecycle/journalstore's
// use it to prove that a write whose COMMIT went unanswered is reported as
// unknown and leaves state whole or absent.
package pgcut

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Cutter is a TCP proxy in front of the test server that can cut a
// connection at its next COMMIT.
//
//   - CutAfter: the COMMIT reaches the server, which commits; the reply is
//     swallowed and the connection closed. The write landed.
//   - CutBefore: the connection is closed instead of forwarding the COMMIT.
//     The server rolls back. The write did not land.
//
// Either way the client has sent its COMMIT and hears nothing back, and
// must report the outcome as unknown.
type Cutter struct {
	ln       net.Listener
	upstream func() (net.Conn, error)
	mode     atomic.Int32 // CutOff, CutAfter or CutBefore; disarms after one cut
	// Cuts counts the connections cut.
	Cuts atomic.Int32
	wg   sync.WaitGroup
}

// The cut modes.
const (
	CutOff    int32 = iota // relay everything
	CutAfter               // forward the next COMMIT, swallow its reply, close
	CutBefore              // close instead of forwarding the next COMMIT
)

// New starts a proxy for the server behind cfg, stopped when the test
// ends, and returns it with a pool config pointing at it.
func New(t testing.TB, cfg *pgxpool.Config) (*Cutter, *pgxpool.Config) {
	t.Helper()
	if cfg.ConnConfig.TLSConfig != nil {
		t.Skip("the commit-cutting proxy reads the protocol and cannot sit in front of TLS; use sslmode=disable")
	}
	host, port := cfg.ConnConfig.Host, cfg.ConnConfig.Port
	up := func() (net.Conn, error) {
		if strings.HasPrefix(host, "/") {
			return net.Dial("unix", fmt.Sprintf("%s/.s.PGSQL.%d", host, port))
		}
		return net.Dial("tcp", net.JoinHostPort(host, fmt.Sprint(port)))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cutter{ln: ln, upstream: up}
	c.wg.Add(1)
	go c.serve()
	t.Cleanup(func() { ln.Close(); c.wg.Wait() })
	pc := cfg.Copy()
	pc.ConnConfig.Host = "127.0.0.1"
	pc.ConnConfig.Port = uint16(ln.Addr().(*net.TCPAddr).Port)
	pc.ConnConfig.Fallbacks = nil
	return c, pc
}

// Arm cuts the next COMMIT of any connection the way mode says, once.
func (c *Cutter) Arm(mode int32) { c.mode.Store(mode) }

func (c *Cutter) serve() {
	defer c.wg.Done()
	for {
		client, err := c.ln.Accept()
		if err != nil {
			return
		}
		server, err := c.upstream()
		if err != nil {
			client.Close()
			continue
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.pipe(client, server)
		}()
	}
}

func readTyped(r io.Reader) ([]byte, error) {
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(hdr[1:5]))
	if n < 4 {
		return nil, fmt.Errorf("bad message length %d", n)
	}
	msg := make([]byte, 1+n)
	copy(msg, hdr)
	_, err := io.ReadFull(r, msg[5:])
	return msg, err
}

// pipe relays one connection, reading the client's messages to spot the
// COMMIT: a simple query "commit", or the Bind of a statement prepared as
// "commit" (pgx pipelines COMMIT as a prepared statement).
func (c *Cutter) pipe(client, server net.Conn) {
	var once sync.Once
	closeBoth := func() { once.Do(func() { client.Close(); server.Close() }) }
	defer closeBoth()
	var swallow atomic.Bool // the server's replies are no longer forwarded
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer closeBoth()
		// Without TLS the server speaks only typed messages.
		for {
			msg, err := readTyped(server)
			if err != nil {
				return
			}
			if swallow.Load() {
				if msg[0] == 'Z' {
					// ReadyForQuery after the COMMIT: the server is done
					// with it. Close without telling the client.
					return
				}
				continue
			}
			if _, err := client.Write(msg); err != nil {
				return
			}
		}
	}()
	// The startup packet (and an SSL or GSS request before it) has no type
	// byte.
	for {
		hdr := make([]byte, 8)
		if _, err := io.ReadFull(client, hdr); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(hdr[:4]))
		if n < 8 {
			return
		}
		body := make([]byte, n-8)
		if _, err := io.ReadFull(client, body); err != nil {
			return
		}
		if _, err := server.Write(append(hdr, body...)); err != nil {
			return
		}
		code := binary.BigEndian.Uint32(hdr[4:8])
		if code != 80877103 && code != 80877104 { // SSLRequest, GSSENCRequest
			break
		}
	}
	stmts := map[string]string{}
	for {
		msg, err := readTyped(client)
		if err != nil {
			return
		}
		body := msg[5:]
		isCommit := false
		switch msg[0] {
		case 'Q':
			isCommit = strings.EqualFold(strings.TrimRight(string(body), "\x00; "), "commit")
		case 'P':
			parts := bytes.SplitN(body, []byte{0}, 3)
			if len(parts) >= 2 {
				stmts[string(parts[0])] = string(parts[1])
			}
		case 'B':
			parts := bytes.SplitN(body, []byte{0}, 3)
			if len(parts) >= 2 {
				isCommit = strings.EqualFold(stmts[string(parts[1])], "commit")
			}
		}
		if isCommit {
			switch c.mode.Swap(CutOff) {
			case CutBefore:
				c.Cuts.Add(1)
				return // the COMMIT never reaches the server
			case CutAfter:
				c.Cuts.Add(1)
				swallow.Store(true)
			}
		}
		if _, err := server.Write(msg); err != nil {
			return
		}
		if swallow.Load() && (msg[0] == 'S' || msg[0] == 'Q') {
			// The pipeline holding the COMMIT is with the server; the
			// reader closes both ends on its reply.
			<-done
			return
		}
	}
}
