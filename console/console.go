// Package console is the operator console of 'journal serve': read-only
// HTML pages, rendered by the server from the same reads that answer the
// API's JSON twins (package api/server), with their templates, stylesheet
// and one small script embedded in the binary.
//
// Invariants:
//   - Every page but sign-in needs a session, opened by pasting a reader or
//     writer token on the sign-in page. The session lives in the server's
//     memory (session.go); the cookie holds only its random 256-bit id,
//     never the token. A session ends at sign-out (on the server: the old
//     cookie is refused if replayed), after SessionLimits.MaxAge from
//     sign-in or Idle without use, when its token is revoked (the token
//     store is read on every request), and when the server restarts. The
//     cookie is HttpOnly and SameSite=Strict; behind TLS it is the Secure
//     __Host- cookie. A token's secret is never kept nor rendered.
//   - Sessions are bounded per token and in all (SessionLimits), so no
//     client fills memory by signing in.
//   - A session sees only its token's tenant.
//   - Every answer carries a Content-Security-Policy that allows scripts
//     and styles from this origin only (no inline script), forbids framing
//     (frame-ancestors 'none', X-Frame-Options DENY), and pages with data
//     are never cached.
//   - Pages work without JavaScript. The one script (inclusion.js) checks a
//     run's inclusion proof in the browser with SubtleCrypto; the page shows
//     the server's own check without it.
//   - A failure is a page with a message, never a stack trace; store
//     failures are logged and shown without their detail.
package console

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/api/server"
	"github.com/runseal/runseal/internal/blame"
	"github.com/runseal/runseal/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// CSP is the Content-Security-Policy of every console answer.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// maxSignInBody bounds the sign-in form: a token is 63 bytes.
const maxSignInBody = 4 << 10

// Config is what a Console is built from.
type Config struct {
	// Tenants are the tenants served, as the API serves them.
	Tenants []server.Tenant
	// Tokens authenticates the session's token on every request, and
	// lists tokens on the Disclosures page.
	Tokens store.TokenStore
	// Meter answers the Activity page; nil shows it empty.
	Meter *server.Meter
	// FirstToken is the exact command that creates a token for this
	// journal, shown on the sign-in page while the journal has none.
	FirstToken string
	// Logger receives failures the operator must act on; slog.Default()
	// when nil.
	Logger *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// SecureCookie says clients reach the console over HTTPS, through a
	// TLS-terminating proxy ('journal serve --behind-tls'): the session
	// cookie is then SecureCookieName, with Secure. A request that came
	// over TLS itself gets it too.
	SecureCookie bool
	// Sessions bounds the sessions' lives and numbers.
	Sessions SessionLimits
	// Heavy is the API server's heavy-read slots (a *server.Server): the
	// Run page, which may hold MiBs of records, is read and rendered in
	// one, so the console and the API's pages of records count against
	// one bound (server.Config.MaxHeavyReads). Required.
	Heavy HeavyReads
}

// HeavyReads is what the console needs of the server's heavy-read slots:
// server.Server.HeavyRead.
type HeavyReads interface {
	// HeavyRead runs fn in a slot, or returns the 503 error (with
	// Retry-After set on w) when none comes free in time.
	HeavyRead(w http.ResponseWriter, r *http.Request, fn func() error) error
}

// Console serves the operator console.
type Console struct {
	cfg    Config
	byName map[string]*server.Tenant
	log    *slog.Logger
	pages  map[string]*template.Template
	mux    *http.ServeMux
	// sessions are the signed-in browsers.
	sessions *sessions
}

// New builds a Console.
func New(cfg Config) (*Console, error) {
	if len(cfg.Tenants) == 0 || cfg.Tokens == nil {
		return nil, errors.New("console: needs tenants and a token store")
	}
	if cfg.Heavy == nil {
		return nil, errors.New("console: needs the server's heavy-read slots (Config.Heavy)")
	}
	c := &Console{cfg: cfg, byName: map[string]*server.Tenant{}, log: cfg.Logger, pages: map[string]*template.Template{}}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.cfg.Now == nil {
		c.cfg.Now = time.Now
	}
	for i := range c.cfg.Tenants {
		t := &c.cfg.Tenants[i]
		c.byName[t.Store.Tenant()] = t
	}
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.Must(layout.Clone()).ParseFS(templateFS, n)
		if err != nil {
			return nil, fmt.Errorf("console: %w", err)
		}
		c.pages[name] = t
	}
	c.sessions = newSessions(cfg.Sessions, c.cfg.Now)
	c.mux = c.routes()
	return c, nil
}

// Handler serves the console at / and /console/, and everything else
// with next (the API).
func (c *Console) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" || strings.HasPrefix(r.URL.Path, "/console/") {
			c.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ServeHTTP serves the console's own paths.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	// Pages, redirects and errors alike are never cached: they carry a
	// tenant's data or depend on the session. Static assets say otherwise.
	h.Set("Cache-Control", "no-store")
	c.mux.ServeHTTP(w, r)
}

func (c *Console) routes() *http.ServeMux {
	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	files := http.StripPrefix("/console/static/", http.FileServerFS(static))
	mux.Handle("GET /console/static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	}))
	mux.HandleFunc("GET /{$}", c.root)
	mux.HandleFunc("GET /console/{$}", c.root)
	mux.HandleFunc("GET /console/signin", c.signInPage)
	mux.HandleFunc("POST /console/signin", c.signIn)
	mux.HandleFunc("POST /console/signout", c.signOut)
	page := func(pattern string, fn pageFunc) { mux.Handle(pattern, c.page(fn, false)) }
	page("GET /console/log", c.logPage)
	page("GET /console/activity", c.activityPage)
	page("GET /console/backlogs", c.backlogsPage)
	mux.Handle("GET /console/runs/{run}", c.page(c.runPage, true))
	page("GET /console/disclosures", c.disclosuresPage)
	page("GET /console/studies", c.studiesPage)
	page("GET /console/studies/{study}", c.studyPage)
	mux.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		c.render(w, r, http.StatusNotFound, "error", view{Title: "Not found", Data: "There is no console page at " + r.URL.Path + "."})
	})
	return mux
}

// session is a signed-in request: its live token and its tenant.
type session struct {
	Token  *store.Token
	tenant *server.Tenant
}

// view is what every page template receives.
type view struct {
	Title   string
	Nav     string // the nav entry to mark current
	Session *session
	Twin    string // the JSON twin's path, for the footer
	Message string // sign-in: why the user is here
	Hint    string // sign-in: how to create the first token
	Data    any
}

// Tenant and the token's name and role, for the header; never its secret.
func (v view) Tenant() string {
	if v.Session == nil {
		return ""
	}
	return v.Session.Token.Tenant
}

type pageFunc func(w http.ResponseWriter, r *http.Request, s *session) (status int, name string, v view, err error)

// authenticate checks the session cookie. It returns the session, or a
// message for the sign-in page saying what is wrong ("" when there is no
// cookie at all). The session's token is read from the token store on
// every request: a token revoked, deleted or given a new secret ends every
// session opened with it.
func (c *Console) authenticate(r *http.Request) (*session, string, error) {
	name, _ := c.cookieName(r)
	ck, err := r.Cookie(name)
	if err != nil || ck.Value == "" {
		return nil, "", nil
	}
	e, ok, why := c.sessions.get(ck.Value)
	if !ok {
		return nil, c.sessions.message(why), nil
	}
	t, err := c.cfg.Tokens.TokenByID(r.Context(), e.tokenID)
	if err != nil {
		return nil, "", err
	}
	switch {
	case t == nil || subtle.ConstantTimeCompare(t.Hash[:], e.tokenHash[:]) != 1:
		c.sessions.endToken(e.tokenID)
		return nil, "The token this session was opened with no longer exists. Sign in with another token.", nil
	case t.Revoked != nil:
		c.sessions.endToken(t.ID)
		return nil, revokedMessage(t), nil
	}
	ten := c.byName[t.Tenant]
	if ten == nil { // checked at sign-in; tenants do not change while serving
		c.sessions.end(ck.Value)
		return nil, notServed(t), nil
	}
	return &session{Token: t, tenant: ten}, "", nil
}

// check authenticates tok as the API does, and says why it failed.
func (c *Console) check(ctx context.Context, tok string) (*session, string, error) {
	t, err := server.Authenticate(ctx, c.cfg.Tokens, tok)
	if errors.Is(err, api.ErrUnauthorized) {
		return nil, c.whyRefused(ctx, tok), nil
	}
	if err != nil {
		return nil, "", err
	}
	ten := c.byName[t.Tenant]
	if ten == nil {
		return nil, notServed(t), nil
	}
	return &session{Token: t, tenant: ten}, "", nil
}

func notServed(t *store.Token) string {
	return fmt.Sprintf("That token is for tenant %q, which this server does not serve.", t.Tenant)
}

func revokedMessage(t *store.Token) string {
	return fmt.Sprintf("Token %s was revoked at %s. Sign in with another token.", t.ID, t.Revoked.UTC().Format(time.RFC3339))
}

// whyRefused tells a revoked token from one that is not a token at all.
// It says "revoked" only for the token's exact secret (compared in
// constant time, as Authenticate does), so it tells a guesser nothing.
func (c *Console) whyRefused(ctx context.Context, tok string) string {
	const invalid = "That is not a valid token for this journal. Paste a token printed by 'journal token create'."
	id, ok := server.TokenID(tok)
	if !ok {
		return invalid
	}
	t, err := c.cfg.Tokens.TokenByID(ctx, id)
	if err != nil || t == nil {
		return invalid
	}
	sum := sha256.Sum256([]byte(tok))
	if subtle.ConstantTimeCompare(sum[:], t.Hash[:]) == 1 && t.Revoked != nil {
		return revokedMessage(t)
	}
	return invalid
}

// signedIn returns r's session. Without one it answers, and returns nil:
// the sign-in page with status, or with 401 and the reason for a cookie
// that names no live session (the cookie is cleared).
func (c *Console) signedIn(w http.ResponseWriter, r *http.Request, status int) *session {
	s, msg, err := c.authenticate(r)
	if err != nil {
		c.fail(w, r, nil, err)
		return nil
	}
	if s == nil {
		if msg != "" {
			c.setCookie(w, r, "")
			status = http.StatusUnauthorized
		}
		c.renderSignIn(w, r, status, msg)
	}
	return s
}

// page serves fn's page to a signed-in session. A heavy page (one that
// may hold MiBs) is read and rendered in one of the server's heavy-read
// slots, taken once the session is known; without one in time the answer
// is the 503 page with Retry-After.
func (c *Console) page(fn pageFunc, heavy bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := c.signedIn(w, r, http.StatusUnauthorized)
		if s == nil {
			return
		}
		serve := func() error {
			status, name, v, err := fn(w, r, s)
			if err != nil {
				return err
			}
			v.Session = s
			c.render(w, r, status, name, v)
			return nil
		}
		var err error
		if heavy {
			err = c.cfg.Heavy.HeavyRead(w, r, serve)
		} else {
			err = serve()
		}
		if err != nil {
			c.fail(w, r, s, err)
		}
	})
}

// fail renders err as an error page: the caller's own mistakes (a bad run
// id, an unknown run) with their message, anything else as an internal
// error, logged.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, s *session, err error) {
	status, msg := http.StatusInternalServerError, "The server could not read the journal; the failure is in its log."
	var ae *api.Error
	var ia *store.InvalidArgumentError
	switch {
	case errors.As(err, &ae):
		status, msg = ae.Status, ae.Error()
	case errors.As(err, &ia):
		status, msg = http.StatusBadRequest, err.Error()
	case errors.Is(err, store.ErrNotFound):
		status, msg = http.StatusNotFound, err.Error()
	case errors.Is(err, store.ErrCorrupt):
		// Corruption is the answer the operator needs, not a detail to hide.
		msg = "The journal is corrupt: " + err.Error()
		c.log.Error("console: the store is corrupt", "path", r.URL.Path, "err", err)
	default:
		// A client that went away is not a failure of ours (internal/blame).
		c.log.Log(r.Context(), blame.Level(r.Context(), err), "console: request failed", "path", r.URL.Path, "err", err)
	}
	if status >= 500 && msg == "" {
		msg = "internal error"
	}
	c.render(w, r, status, "error", view{Title: http.StatusText(status), Session: s, Data: msg})
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, v view) {
	t := c.pages[name]
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout.html", v); err != nil {
		c.log.Error("console: rendering a page", "page", name, "err", err)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte("internal error\n"))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

func (c *Console) renderSignIn(w http.ResponseWriter, r *http.Request, status int, msg string) {
	v := view{Title: "Sign in", Message: msg, Data: c.sessions.lim}
	toks, err := c.cfg.Tokens.Tokens(r.Context())
	if err != nil {
		c.log.Log(r.Context(), blame.Level(r.Context(), err), "console: listing tokens", "err", err)
	} else if len(toks) == 0 {
		v.Hint = c.cfg.FirstToken
		if v.Hint == "" {
			v.Hint = "journal token create --role reader --name console"
		}
	}
	c.render(w, r, status, "signin", v)
}

func (c *Console) root(w http.ResponseWriter, r *http.Request) {
	if c.signedIn(w, r, http.StatusOK) == nil {
		return
	}
	http.Redirect(w, r, "/console/log", http.StatusSeeOther)
}

func (c *Console) signInPage(w http.ResponseWriter, r *http.Request) {
	c.renderSignIn(w, r, http.StatusOK, "")
}

// sameOrigin refuses a form posted from another site: SameSite=Strict keeps
// the cookie from such a post, but sign-in sets one (login CSRF).
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin" || site == "none"
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		return err == nil && u.Host == r.Host
	}
	return true // a client that sends neither is not a browser following a cross-site form
}

func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		c.renderSignIn(w, r, http.StatusForbidden, "Sign-in must come from this console's own page.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxSignInBody)
	if err := r.ParseForm(); err != nil {
		c.renderSignIn(w, r, http.StatusBadRequest, "The sign-in form was too large or malformed.")
		return
	}
	tok := strings.TrimSpace(r.PostForm.Get("token"))
	if tok == "" {
		c.renderSignIn(w, r, http.StatusBadRequest, "Paste a token to sign in.")
		return
	}
	s, msg, err := c.check(r.Context(), tok)
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	if s == nil {
		c.renderSignIn(w, r, http.StatusUnauthorized, msg)
		return
	}
	if err := c.startSession(w, r, s.Token); err != nil {
		c.fail(w, r, nil, err)
		return
	}
	c.log.Info("console: signed in", "token", s.Token.ID, "tenant", s.Token.Tenant, "role", s.Token.Role)
	http.Redirect(w, r, "/console/log", http.StatusSeeOther)
}

func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		c.render(w, r, http.StatusForbidden, "error", view{Title: "Forbidden", Data: "Sign-out must come from this console's own page."})
		return
	}
	c.endSession(w, r)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}
