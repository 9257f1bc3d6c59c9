package console

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/runseal/runseal/store"
)

// CookieName is the session cookie's name when the console is reached
// over plain HTTP. Browsers send such a cookie to every port of the host,
// so it holds only a session id, never a token.
const CookieName = "runseal_console"

// SecureCookieName is the session cookie's name when clients reach the
// console over HTTPS (Config.SecureCookie, or a request over TLS). The
// __Host- prefix makes the browser accept it only with Secure, Path=/ and
// no Domain, so no other host, and no plain-HTTP port of this one, can set
// or overwrite it; browsers refuse it without Secure, which is why plain
// HTTP keeps CookieName.
const SecureCookieName = "__Host-" + CookieName

// The session defaults (SessionLimits' zero values). A session lasts at
// most a working shift (12 h) from sign-in, whatever its use, so a stolen
// cookie is worth at most that and every operator signs in again daily;
// it ends sooner after 30 minutes without a page, the usual idle bound
// for an application that shows data but changes nothing. Sixteen
// sessions per token let a team share a reader token across browsers;
// 1024 in all is a few hundred KiB.
const (
	DefaultSessionMaxAge    = 12 * time.Hour
	DefaultSessionIdle      = 30 * time.Minute
	DefaultSessionsPerToken = 16
	DefaultSessions         = 1024
)

// SessionLimits bounds the console's sessions; a zero field takes its
// default.
type SessionLimits struct {
	// MaxAge ends a session this long after sign-in.
	MaxAge time.Duration
	// Idle ends a session this long after its last request.
	Idle time.Duration
	// PerToken is how many sessions one token may hold; signing in once
	// more ends that token's least recently used session.
	PerToken int
	// Total is how many sessions the console holds; signing in once more
	// ends the least recently used session of all.
	Total int
}

func (l SessionLimits) withDefaults() SessionLimits {
	if l.MaxAge <= 0 {
		l.MaxAge = DefaultSessionMaxAge
	}
	if l.Idle <= 0 {
		l.Idle = DefaultSessionIdle
	}
	if l.PerToken <= 0 {
		l.PerToken = DefaultSessionsPerToken
	}
	if l.Total <= 0 {
		l.Total = DefaultSessions
	}
	return l
}

// sessionIDBytes is a session id's length: 256 bits from crypto/rand.
const sessionIDBytes = 32

// sessionKey is what a session is found by: the SHA-256 of its cookie
// value, so memory holds no value a cookie could be made from.
type sessionKey [sha256.Size]byte

// signedIn is one live session: whose token it was opened with (its id
// and the SHA-256 of its secret, as the token store keeps them; never the
// secret) and its times.
type signedIn struct {
	tokenID   string
	tokenHash store.Digest
	created   time.Time
	seen      time.Time
}

// sessions keeps the console's sessions in memory: a restart ends them all.
// It is safe for concurrent use.
type sessions struct {
	lim SessionLimits
	now func() time.Time

	mu       sync.Mutex
	byKey    map[sessionKey]*signedIn
	perToken map[string]int
	full     bool // the total bound was met and logged; cleared below it
}

func newSessions(lim SessionLimits, now func() time.Time) *sessions {
	return &sessions{lim: lim.withDefaults(), now: now, byKey: map[sessionKey]*signedIn{}, perToken: map[string]int{}}
}

// endReason says why a cookie names no live session, for the sign-in page.
type endReason int

const (
	endUnknown endReason = iota // signed out, evicted, a restart, or never a session
	endMaxAge
	endIdle
)

func (s *sessions) message(why endReason) string {
	switch why {
	case endMaxAge:
		return fmt.Sprintf("Your session ended %s after sign-in; sessions last at most that long. Sign in again.", durText(s.lim.MaxAge))
	case endIdle:
		return fmt.Sprintf("Your session ended after %s without use. Sign in again.", durText(s.lim.Idle))
	}
	return "Your session has ended (signed out, replaced by newer sign-ins, or the server restarted). Sign in again."
}

// create opens a session for tok and returns its cookie value, and
// whether the total bound was newly met (for the caller to log once).
// Over a bound it first ends the expired sessions, then the least
// recently used of the token's (PerToken) or of all (Total).
func (s *sessions) create(tok *store.Token) (value string, full bool, err error) {
	var id [sessionIDBytes]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", false, fmt.Errorf("console: a session id: %w", err)
	}
	value = base64.RawURLEncoding.EncodeToString(id[:])
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perToken[tok.ID] >= s.lim.PerToken || len(s.byKey) >= s.lim.Total {
		s.sweepLocked(now)
	}
	if s.perToken[tok.ID] >= s.lim.PerToken {
		s.evictLocked(tok.ID)
	}
	if len(s.byKey) >= s.lim.Total {
		full = !s.full
		s.full = true
		s.evictLocked("")
	} else if len(s.byKey) < s.lim.Total/2 {
		s.full = false
	}
	s.byKey[keyOf(value)] = &signedIn{tokenID: tok.ID, tokenHash: tok.Hash, created: now, seen: now}
	s.perToken[tok.ID]++
	return value, full, nil
}

// get returns the live session of a cookie value and marks it used, or
// false and why there is none; an expired session is ended.
func (s *sessions) get(value string) (signedIn, bool, endReason) {
	if len(value) != base64.RawURLEncoding.EncodedLen(sessionIDBytes) {
		return signedIn{}, false, endUnknown
	}
	k, now := keyOf(value), s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.byKey[k]
	if e == nil {
		return signedIn{}, false, endUnknown
	}
	if why := s.expired(e, now); why != endUnknown {
		s.deleteLocked(k, e)
		return signedIn{}, false, why
	}
	e.seen = now
	return *e, true, endUnknown
}

// expired says whether e has outlived a bound at now.
func (s *sessions) expired(e *signedIn, now time.Time) endReason {
	switch {
	case !now.Before(e.created.Add(s.lim.MaxAge)):
		return endMaxAge
	case !now.Before(e.seen.Add(s.lim.Idle)):
		return endIdle
	}
	return endUnknown
}

// end ends the session of a cookie value, if it has one.
func (s *sessions) end(value string) {
	k := keyOf(value)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.byKey[k]; e != nil {
		s.deleteLocked(k, e)
	}
}

// endToken ends every session opened with the token id: it was revoked,
// deleted, or its secret replaced.
func (s *sessions) endToken(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, e := range s.byKey {
		if e.tokenID == id {
			s.deleteLocked(k, e)
		}
	}
}

// len is how many sessions are held, expired ones not yet swept included.
func (s *sessions) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byKey)
}

func (s *sessions) sweepLocked(now time.Time) {
	for k, e := range s.byKey {
		if s.expired(e, now) != endUnknown {
			s.deleteLocked(k, e)
		}
	}
}

// evictLocked ends the least recently used session of the token id, or
// of all when id is "".
func (s *sessions) evictLocked(id string) {
	var (
		oldK sessionKey
		old  *signedIn
	)
	for k, e := range s.byKey {
		if (id == "" || e.tokenID == id) && (old == nil || e.seen.Before(old.seen)) {
			oldK, old = k, e
		}
	}
	if old != nil {
		s.deleteLocked(oldK, old)
	}
}

func (s *sessions) deleteLocked(k sessionKey, e *signedIn) {
	delete(s.byKey, k)
	if s.perToken[e.tokenID]--; s.perToken[e.tokenID] <= 0 {
		delete(s.perToken, e.tokenID)
	}
}

// durText writes a session bound as people read it: "12h", "30m", "1h30m".
func durText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

func keyOf(value string) sessionKey { return sha256.Sum256([]byte(value)) }

// cookieName is the session cookie's name for r: SecureCookieName when
// the operator says clients come over HTTPS or r came over TLS.
func (c *Console) cookieName(r *http.Request) (name string, secure bool) {
	if c.cfg.SecureCookie || r.TLS != nil {
		return SecureCookieName, true
	}
	return CookieName, false
}

// startSession opens a session for the token r signed in with and sets
// its cookie. A session the browser already held ends first: signing in
// again neither keeps the old id alive nor piles up sessions.
func (c *Console) startSession(w http.ResponseWriter, r *http.Request, tok *store.Token) error {
	name, _ := c.cookieName(r)
	if old, err := r.Cookie(name); err == nil && old.Value != "" {
		c.sessions.end(old.Value)
	}
	id, full, err := c.sessions.create(tok)
	if err != nil {
		return err
	}
	if full {
		c.log.Warn("console: the session bound is met; each sign-in now ends the least recently used session", "sessions", c.sessions.lim.Total)
	}
	c.setCookie(w, r, id)
	return nil
}

// endSession ends r's session on the server, so its cookie is refused if
// replayed, and clears the cookie.
func (c *Console) endSession(w http.ResponseWriter, r *http.Request) {
	name, _ := c.cookieName(r)
	if ck, err := r.Cookie(name); err == nil && ck.Value != "" {
		c.sessions.end(ck.Value)
	}
	c.setCookie(w, r, "")
}

// setCookie sets r's session cookie to value; "" clears it. The cookie has
// no Expires or Max-Age: it ends with the browser session, and the server
// ends the session itself sooner (SessionLimits).
func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, value string) {
	name, secure := c.cookieName(r)
	ck := &http.Cookie{Name: name, Value: value, Path: "/", HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode}
	if value == "" {
		ck.MaxAge = -1
	}
	http.SetCookie(w, ck)
}
