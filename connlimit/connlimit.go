// Package connlimit bounds the connections a server holds, in total and
// per client address, as a net.Listener wrapper any http.Server (or other
// stream server) can serve on.
//
// Timeouts alone do not bound what one client holds: a client that sends a
// cheap request just inside the idle timeout keeps its connection, and its
// descriptor, for ever, so a few thousand of them exhaust RLIMIT_NOFILE and
// the next honest client's connection is never accepted. A Listener counts
// the connections it has handed out and, over a limit, accepts the new one
// only to answer it and close it at once.
//
// Invariants:
//   - At most MaxConns accepted connections are open at a time, and at most
//     MaxPerAddr of them from one client address (an IPv4 address, or the
//     /64 prefix of an IPv6 one, which one client usually holds whole).
//   - A connection over a limit is answered "HTTP/1.1 503 Service
//     Unavailable" with Retry-After and Connection: close (or closed without
//     a word, with Config.Silent) and never reaches the server. While it is
//     being answered it holds a descriptor, but at most MaxRefusing
//     connections are answered at once; beyond that they are closed at once.
//     So the listener holds at most MaxConns+MaxRefusing descriptors.
//   - At the total bound, when the server reports its connections' states
//     (http.Server.ConnState = Listener.ConnState), a connection idle
//     between requests for at least MinIdle is closed to make room for the
//     new one, rather than the new one refused: an idle keep-alive
//     connection may be closed at any time (RFC 9112 section 9.6; clients
//     open another), a waiting client may not be served otherwise. The one
//     closed is of the address holding most connections, the longest idle
//     among them. A connection in the middle of a request is never closed.
//   - Refusals and closings are logged once per episode, not once per
//     connection: one WARN when a limit is first reached, a WARN summary at
//     most every SummaryEvery while it lasts, and one INFO with the counts
//     when nothing has been refused or closed for Quiet.
package connlimit

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// MaxRefusing bounds the over-limit connections being answered at once.
const MaxRefusing = 64

// Defaults of the Config fields left zero.
const (
	DefaultRetryAfter   = 5 * time.Second
	DefaultQuiet        = time.Minute
	DefaultSummaryEvery = 10 * time.Minute
	DefaultMinIdle      = time.Second
)

// refuseLinger bounds how long an answered over-limit connection is kept
// open to read what the client sent: closing a socket with unread input
// makes the kernel send a reset, which can destroy the answer before the
// client reads it.
const refuseLinger = 2 * time.Second

// Config is how a Listener bounds connections.
type Config struct {
	// MaxConns bounds the connections open at once; zero takes
	// Default().MaxConns.
	MaxConns int
	// MaxPerAddr bounds the connections open at once from one client
	// address; zero takes Default().MaxPerAddr, below zero there is no
	// per-address bound (behind a reverse proxy every connection comes
	// from the proxy's address).
	MaxPerAddr int
	// RetryAfter is sent in the 503's Retry-After header;
	// DefaultRetryAfter when zero.
	RetryAfter time.Duration
	// MinIdle is how long a connection must have been idle to be closed
	// for a new one at the total bound: DefaultMinIdle when zero; below
	// zero, idle connections are never closed for new ones. The margin
	// keeps a connection whose next request is on its way from being
	// closed under it.
	MinIdle time.Duration
	// Silent closes an over-limit connection without answering it: for a
	// listener beneath TLS, where a plain HTTP answer would be noise.
	Silent bool
	// Quiet is how long without a refusal ends an episode;
	// DefaultQuiet when zero.
	Quiet time.Duration
	// SummaryEvery is how often a long episode is summed up in the log;
	// DefaultSummaryEvery when zero.
	SummaryEvery time.Duration
	// Name says which listener a log record is about ("api", "metrics").
	Name string
	// Logger receives the episodes; slog.Default() when nil.
	Logger *slog.Logger
}

// Default returns the limits for this process: MaxConns is half the
// descriptors RLIMIT_NOFILE allows (the other half is left to the store,
// its WAL, database connections, outgoing requests and logs), at least 8
// and at most 4096 (an idle connection costs some 10 KiB besides its
// descriptor), and MaxPerAddr an eighth of that, at least 2.
func Default() Config {
	return ForFiles(openFileLimit())
}

// ForFiles returns the limits Default chooses for a process allowed n open
// files.
func ForFiles(n uint64) Config {
	total := min(max(n/2, 8), 4096)
	return Config{MaxConns: int(total), MaxPerAddr: int(max(total/8, 2))}
}

// Stats counts what a Listener did.
type Stats struct {
	Open       int    // accepted connections not yet closed
	Idle       int    // of those, idle between requests (known through ConnState)
	Refused    uint64 // connections refused since the listener was made
	ClosedIdle uint64 // idle connections closed to make room for new ones
}

// Listener is a net.Listener that bounds the connections it hands out.
type Listener struct {
	net.Listener
	cfg      Config
	log      *slog.Logger
	answer   []byte
	refusing atomic.Int32
	refused  atomic.Uint64

	mu         sync.Mutex
	open       int
	byAddr     map[netip.Prefix]int
	idle       map[*conn]time.Time // idle connections, since when
	closedIdle uint64
	ep         *episode // nil outside an episode
	closed     bool
}

// episode is a stretch of time in which the limits are reached.
type episode struct {
	start, last, reported time.Time
	total, perAddr        uint64 // refusals by which limit was reached
	closedIdle            uint64 // idle connections closed for new ones
	timer                 *time.Timer
}

// withDefaults fills in the zero fields.
func (c Config) withDefaults() Config {
	def := Default()
	if c.MaxConns <= 0 {
		c.MaxConns = def.MaxConns
	}
	if c.MaxPerAddr == 0 {
		c.MaxPerAddr = min(def.MaxPerAddr, c.MaxConns)
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	if c.Quiet <= 0 {
		c.Quiet = DefaultQuiet
	}
	if c.SummaryEvery <= 0 {
		c.SummaryEvery = DefaultSummaryEvery
	}
	if c.MinIdle == 0 {
		c.MinIdle = DefaultMinIdle
	}
	return c
}

// New returns a Listener over inner with cfg's bounds (see Check).
func New(inner net.Listener, cfg Config) *Listener {
	cfg = cfg.withDefaults()
	l := &Listener{Listener: inner, cfg: cfg, log: cfg.Logger, byAddr: map[netip.Prefix]int{}, idle: map[*conn]time.Time{}}
	if l.log == nil {
		l.log = slog.Default()
	}
	l.log = l.log.With("listener", cfg.Name)
	secs := int64((cfg.RetryAfter + time.Second - 1) / time.Second)
	body := "too many connections; retry later\n"
	l.answer = []byte("HTTP/1.1 503 Service Unavailable\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n" +
		"Retry-After: " + strconv.FormatInt(secs, 10) + "\r\n" +
		"Connection: close\r\n\r\n" + body)
	return l
}

// Config returns the bounds in force, defaults filled in.
func (l *Listener) Config() Config { return l.cfg }

// Stats returns the listener's counts now.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{Open: l.open, Idle: len(l.idle), Refused: l.refused.Load(), ClosedIdle: l.closedIdle}
}

// Accept returns the next connection within the bounds. Connections over a
// bound are answered and closed here, never returned.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key, keyed := addrKey(c.RemoteAddr())
		if l.admit(key, keyed) {
			return &conn{Conn: c, l: l, key: key, keyed: keyed}, nil
		}
		l.refuse(c)
	}
}

// admit takes a slot for a connection from key, closing an idle connection
// for it at the total bound if one has been idle long enough, and reports
// whether it got one.
func (l *Listener) admit(key netip.Prefix, keyed bool) bool {
	for closedOne := false; ; closedOne = true {
		l.mu.Lock()
		var over string
		switch {
		case keyed && l.cfg.MaxPerAddr > 0 && l.byAddr[key] >= l.cfg.MaxPerAddr:
			over = "per-address"
		case l.open >= l.cfg.MaxConns:
			over = "total"
		}
		if over == "" {
			l.open++
			if keyed {
				l.byAddr[key]++
			}
			l.mu.Unlock()
			return true
		}
		if over == "total" && !closedOne {
			if v := l.idleVictim(); v != nil {
				delete(l.idle, v)
				l.closedIdle++
				l.note("closed-idle", v.key)
				l.mu.Unlock()
				v.Close() // gives back its slot
				continue
			}
		}
		l.note(over, key)
		l.mu.Unlock()
		return false
	}
}

// idleVictim is the connection to close for a new one at the total bound:
// idle for at least MinIdle, of the address holding most connections, the
// longest idle among them; nil if there is none. l.mu is held.
func (l *Listener) idleVictim() *conn {
	if l.cfg.MinIdle < 0 {
		return nil
	}
	now := time.Now()
	var best *conn
	var bestSince time.Time
	for c, since := range l.idle {
		if now.Sub(since) < l.cfg.MinIdle {
			continue
		}
		if best == nil || l.byAddr[c.key] > l.byAddr[best.key] ||
			(l.byAddr[c.key] == l.byAddr[best.key] && since.Before(bestSince)) {
			best, bestSince = c, since
		}
	}
	return best
}

// ConnState tracks which connections are idle between requests, so that at
// the total bound an idle one can be closed for a new one: set it as the
// http.Server's ConnState (or call it from that hook).
func (l *Listener) ConnState(nc net.Conn, state http.ConnState) {
	c, ok := nc.(*conn)
	if !ok || c.l != l {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if state == http.StateIdle && !c.closed.Load() {
		l.idle[c] = time.Now()
	} else {
		delete(l.idle, c)
	}
}

// Close closes the inner listener and ends the episode's timer.
func (l *Listener) Close() error {
	l.mu.Lock()
	l.closed = true
	if l.ep != nil {
		l.ep.timer.Stop()
	}
	l.mu.Unlock()
	return l.Listener.Close()
}

// release gives back the slot of a closed connection.
func (l *Listener) release(c *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	delete(l.idle, c)
	if !c.keyed {
		return
	}
	if n := l.byAddr[c.key] - 1; n > 0 {
		l.byAddr[c.key] = n
	} else {
		delete(l.byAddr, c.key)
	}
}

// refuse answers c with the 503 and closes it, without holding up Accept.
func (l *Listener) refuse(c net.Conn) {
	l.refused.Add(1)
	if l.cfg.Silent || l.refusing.Add(1) > MaxRefusing {
		if !l.cfg.Silent {
			l.refusing.Add(-1)
		}
		c.Close()
		return
	}
	go func() {
		defer l.refusing.Add(-1)
		defer c.Close()
		c.SetDeadline(time.Now().Add(refuseLinger))
		if _, err := c.Write(l.answer); err != nil {
			return
		}
		// Send FIN, then read what the client sent until it closes too
		// (it will, on Connection: close), so the close sends no reset.
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		io.Copy(io.Discard, io.LimitReader(c, 64<<10))
	}()
}

// note logs the start of an episode, or counts what happened (a refusal
// by the "total" or "per-address" bound, or "closed-idle") in the current
// one. l.mu is held.
func (l *Listener) note(what string, key netip.Prefix) {
	now := time.Now()
	if l.ep != nil {
		l.ep.last = now
		l.ep.count(what)
		return
	}
	if l.closed {
		return
	}
	ep := &episode{start: now, last: now, reported: now}
	ep.count(what)
	l.ep = ep
	ep.timer = time.AfterFunc(l.cfg.Quiet, l.checkEpisode)
	limit, bound, action := "total", l.cfg.MaxConns, "refusing new connections with 503"
	switch what {
	case "per-address":
		limit, bound = what, l.cfg.MaxPerAddr
	case "closed-idle":
		action = "closing idle connections for new ones"
	}
	l.log.Warn("connlimit: connection limit reached",
		"limit", limit, "max", bound, "action", action, "addr", key.String(), "open", l.open,
		"max_conns", l.cfg.MaxConns, "max_per_addr", l.cfg.MaxPerAddr)
}

func (e *episode) count(what string) {
	switch what {
	case "total":
		e.total++
	case "per-address":
		e.perAddr++
	default:
		e.closedIdle++
	}
}

// checkEpisode ends the episode after Quiet without a refusal or closing,
// or sums it up every SummaryEvery while it lasts.
func (l *Listener) checkEpisode() {
	l.mu.Lock()
	defer l.mu.Unlock()
	ep := l.ep
	if ep == nil || l.closed {
		return
	}
	now := time.Now()
	attrs := []any{"refused_total_limit", ep.total, "refused_per_address_limit", ep.perAddr,
		"closed_idle", ep.closedIdle, "since", ep.start.UTC().Format(time.RFC3339), "open", l.open}
	if quiet := now.Sub(ep.last); quiet >= l.cfg.Quiet {
		l.ep = nil
		l.log.Info("connlimit: no longer at the connection limit", attrs...)
		return
	}
	if now.Sub(ep.reported) >= l.cfg.SummaryEvery {
		ep.reported = now
		l.log.Warn("connlimit: still at the connection limit", attrs...)
	}
	ep.timer.Reset(l.cfg.Quiet - now.Sub(ep.last))
}

// addrKey is the per-address key of a: the IPv4 address, or the /64 of an
// IPv6 one. A non-IP address (a Unix socket) has none and is bound only by
// the total.
func addrKey(a net.Addr) (netip.Prefix, bool) {
	var ap netip.AddrPort
	switch a := a.(type) {
	case *net.TCPAddr:
		ap = a.AddrPort()
	default:
		p, err := netip.ParseAddrPort(a.String())
		if err != nil {
			return netip.Prefix{}, false
		}
		ap = p
	}
	ip := ap.Addr().Unmap()
	if !ip.IsValid() {
		return netip.Prefix{}, false
	}
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, err := ip.Prefix(bits)
	return p, err == nil
}

// conn gives its slot back on the first Close.
type conn struct {
	net.Conn
	l      *Listener
	key    netip.Prefix
	keyed  bool
	closed atomic.Bool
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	if c.closed.CompareAndSwap(false, true) {
		c.l.release(c)
	}
	return err
}

// ReadFrom keeps the inner connection's sendfile/splice path for servers
// that copy files into the connection.
func (c *conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// ErrConfig is the class of a Config that cannot be served.
var ErrConfig = errors.New("connlimit: invalid limits")

// Check refuses limits given below zero, or a per-address bound above the
// total (defaults filled in), which would never be reached.
func (c Config) Check() error {
	if c.MaxConns < 0 {
		return fmt.Errorf("%w: the total %d is below zero", ErrConfig, c.MaxConns)
	}
	c = c.withDefaults()
	if c.MaxPerAddr > c.MaxConns {
		return fmt.Errorf("%w: the per-address bound %d is above the total %d", ErrConfig, c.MaxPerAddr, c.MaxConns)
	}
	return nil
}
