// Package pkcs11 is a key ring whose scope keys live in a PKCS#11 token
// (an HSM, or SoftHSM2 for tests): each scope key is a non-extractable,
// sensitive AES-256 token object labelled "runseal:<scope>", data keys are
// generated and wrapped by the token (CKM_AES_KEY_WRAP_PAD, RFC 5649), and
// erasure destroys the token object and leaves a data object
// "runseal-erased:<scope>" as its tombstone. No scope key ever leaves the
// token; the data keys do, as they must to seal and open.
//
// The ring serialises its use of one logged-in session: PKCS#11 sessions
// are not safe for concurrent use.
package pkcs11

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	p11 "github.com/miekg/pkcs11"

	"github.com/runseal/runseal/keyring"
)

const (
	keyLabel  = "runseal:"
	tombLabel = "runseal-erased:"
)

// Config says which token to use and how to log in.
type Config struct {
	Module string // path of the PKCS#11 module (.so)
	Token  string // token label
	PIN    string // user PIN
}

// ParseURI reads an RFC 7512 PKCS#11 URI:
//
//	pkcs11:token=runseal?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=/etc/runseal/pin
//
// The PIN comes from pin-value, or from the file named by pin-source, or
// from the environment variable RUNSEAL_PKCS11_PIN.
func ParseURI(uri string) (Config, error) {
	rest, ok := strings.CutPrefix(uri, "pkcs11:")
	if !ok {
		return Config{}, fmt.Errorf("pkcs11 URI %q does not start with \"pkcs11:\"", short(uri))
	}
	path, query, _ := strings.Cut(rest, "?")
	var c Config
	for _, attr := range strings.Split(path, ";") {
		if attr == "" {
			continue
		}
		k, v, _ := strings.Cut(attr, "=")
		v, err := url.PathUnescape(v)
		if err != nil {
			return Config{}, fmt.Errorf("pkcs11 URI: attribute %q: %v", k, err)
		}
		if k == "token" {
			c.Token = v
		}
	}
	q, err := url.ParseQuery(strings.ReplaceAll(query, ";", "&"))
	if err != nil {
		return Config{}, fmt.Errorf("pkcs11 URI: query: %v", err)
	}
	c.Module = q.Get("module-path")
	switch {
	case q.Get("pin-value") != "":
		c.PIN = q.Get("pin-value")
	case q.Get("pin-source") != "":
		b, err := os.ReadFile(strings.TrimPrefix(q.Get("pin-source"), "file:"))
		if err != nil {
			return Config{}, fmt.Errorf("pkcs11 URI: pin-source: %w", err)
		}
		c.PIN = strings.TrimRight(string(b), "\r\n")
	default:
		c.PIN = os.Getenv("RUNSEAL_PKCS11_PIN")
	}
	if c.Module == "" || c.Token == "" {
		return Config{}, fmt.Errorf("pkcs11 URI %q needs token= and module-path=", short(uri))
	}
	return c, nil
}

func short(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// Ring is a key ring in a PKCS#11 token.
type Ring struct {
	mu   sync.Mutex
	ctx  *p11.Ctx
	sess p11.SessionHandle
}

// Open loads the module, finds the token by label and logs in.
func Open(c Config) (*Ring, error) {
	m := p11.New(c.Module)
	if m == nil {
		return nil, fmt.Errorf("pkcs11: cannot load module %s", c.Module)
	}
	if err := m.Initialize(); err != nil && !errors.Is(err, p11.Error(p11.CKR_CRYPTOKI_ALREADY_INITIALIZED)) {
		m.Destroy()
		return nil, fmt.Errorf("pkcs11: initialize %s: %w", c.Module, err)
	}
	slots, err := m.GetSlotList(true)
	if err != nil {
		return nil, fmt.Errorf("pkcs11: slots: %w", err)
	}
	for _, s := range slots {
		ti, err := m.GetTokenInfo(s)
		if err != nil || strings.TrimRight(ti.Label, " \x00") != c.Token {
			continue
		}
		sess, err := m.OpenSession(s, p11.CKF_SERIAL_SESSION|p11.CKF_RW_SESSION)
		if err != nil {
			return nil, fmt.Errorf("pkcs11: open session on token %q: %w", c.Token, err)
		}
		if err := m.Login(sess, p11.CKU_USER, c.PIN); err != nil && !errors.Is(err, p11.Error(p11.CKR_USER_ALREADY_LOGGED_IN)) {
			m.CloseSession(sess)
			return nil, fmt.Errorf("pkcs11: log in to token %q: %w", c.Token, err)
		}
		return &Ring{ctx: m, sess: sess}, nil
	}
	return nil, fmt.Errorf("pkcs11: no token labelled %q in %s", c.Token, c.Module)
}

// Close logs out and closes the session.
func (r *Ring) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ctx.Logout(r.sess)
	return r.ctx.CloseSession(r.sess)
}

func (r *Ring) find(template []*p11.Attribute) ([]p11.ObjectHandle, error) {
	if err := r.ctx.FindObjectsInit(r.sess, template); err != nil {
		return nil, err
	}
	var out []p11.ObjectHandle
	for {
		hs, _, err := r.ctx.FindObjects(r.sess, 64)
		if err != nil {
			r.ctx.FindObjectsFinal(r.sess)
			return nil, err
		}
		out = append(out, hs...)
		if len(hs) < 64 {
			break
		}
	}
	return out, r.ctx.FindObjectsFinal(r.sess)
}

func (r *Ring) scopeKey(scope string) (p11.ObjectHandle, bool, error) {
	hs, err := r.find([]*p11.Attribute{
		p11.NewAttribute(p11.CKA_CLASS, p11.CKO_SECRET_KEY),
		p11.NewAttribute(p11.CKA_LABEL, keyLabel+scope),
	})
	if err != nil || len(hs) == 0 {
		return 0, false, err
	}
	return hs[0], true, nil
}

func (r *Ring) tombstoned(scope string) (bool, error) {
	hs, err := r.find([]*p11.Attribute{
		p11.NewAttribute(p11.CKA_CLASS, p11.CKO_DATA),
		p11.NewAttribute(p11.CKA_LABEL, tombLabel+scope),
	})
	return len(hs) > 0, err
}

// state returns scope's key handle, or the ring error saying why not.
func (r *Ring) state(scope string, create bool) (p11.ObjectHandle, error) {
	if err := keyring.ValidateScope(scope); err != nil {
		return 0, err
	}
	gone, err := r.tombstoned(scope)
	if err != nil {
		return 0, fmt.Errorf("pkcs11: %w", err)
	}
	if gone {
		return 0, &keyring.ScopeError{Scope: scope, Err: keyring.ErrErased}
	}
	h, ok, err := r.scopeKey(scope)
	if err != nil {
		return 0, fmt.Errorf("pkcs11: %w", err)
	}
	if ok {
		return h, nil
	}
	if !create {
		return 0, &keyring.ScopeError{Scope: scope, Err: keyring.ErrUnknownScope}
	}
	h, err = r.ctx.GenerateKey(r.sess, []*p11.Mechanism{p11.NewMechanism(p11.CKM_AES_KEY_GEN, nil)}, []*p11.Attribute{
		p11.NewAttribute(p11.CKA_CLASS, p11.CKO_SECRET_KEY),
		p11.NewAttribute(p11.CKA_KEY_TYPE, p11.CKK_AES),
		p11.NewAttribute(p11.CKA_VALUE_LEN, 32),
		p11.NewAttribute(p11.CKA_TOKEN, true),
		p11.NewAttribute(p11.CKA_PRIVATE, true),
		p11.NewAttribute(p11.CKA_SENSITIVE, true),
		p11.NewAttribute(p11.CKA_EXTRACTABLE, false),
		p11.NewAttribute(p11.CKA_WRAP, true),
		p11.NewAttribute(p11.CKA_UNWRAP, true),
		p11.NewAttribute(p11.CKA_ENCRYPT, false),
		p11.NewAttribute(p11.CKA_DECRYPT, false),
		p11.NewAttribute(p11.CKA_LABEL, keyLabel+scope),
	})
	if err != nil {
		return 0, fmt.Errorf("pkcs11: generate the key of scope %s: %w", scope, err)
	}
	return h, nil
}

var wrapMech = []*p11.Mechanism{p11.NewMechanism(p11.CKM_AES_KEY_WRAP_PAD, nil)}

func sessionKeyTemplate() []*p11.Attribute {
	return []*p11.Attribute{
		p11.NewAttribute(p11.CKA_CLASS, p11.CKO_SECRET_KEY),
		p11.NewAttribute(p11.CKA_KEY_TYPE, p11.CKK_AES),
		p11.NewAttribute(p11.CKA_TOKEN, false),
		p11.NewAttribute(p11.CKA_SENSITIVE, false),
		p11.NewAttribute(p11.CKA_EXTRACTABLE, true),
	}
}

func (r *Ring) value(h p11.ObjectHandle) ([]byte, error) {
	attrs, err := r.ctx.GetAttributeValue(r.sess, h, []*p11.Attribute{p11.NewAttribute(p11.CKA_VALUE, nil)})
	if err != nil {
		return nil, err
	}
	if len(attrs) != 1 || len(attrs[0].Value) != keyring.DataKeySize {
		return nil, fmt.Errorf("pkcs11: data key of unexpected size")
	}
	return attrs[0].Value, nil
}

// Wrap has the token generate a data key and wrap it under scope's key.
func (r *Ring) Wrap(ctx context.Context, scope string) ([]byte, []byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sk, err := r.state(scope, true)
	if err != nil {
		return nil, nil, err
	}
	tmpl := append(sessionKeyTemplate(), p11.NewAttribute(p11.CKA_VALUE_LEN, keyring.DataKeySize))
	dk, err := r.ctx.GenerateKey(r.sess, []*p11.Mechanism{p11.NewMechanism(p11.CKM_AES_KEY_GEN, nil)}, tmpl)
	if err != nil {
		return nil, nil, fmt.Errorf("pkcs11: generate a data key: %w", err)
	}
	defer r.ctx.DestroyObject(r.sess, dk)
	wrapped, err := r.ctx.WrapKey(r.sess, wrapMech, sk, dk)
	if err != nil {
		return nil, nil, fmt.Errorf("pkcs11: wrap under scope %s: %w", scope, err)
	}
	key, err := r.value(dk)
	if err != nil {
		return nil, nil, err
	}
	return key, wrapped, nil
}

// Unwrap has the token unwrap a data key under scope's key.
func (r *Ring) Unwrap(ctx context.Context, scope string, wrapped []byte) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sk, err := r.state(scope, false)
	if err != nil {
		return nil, err
	}
	dk, err := r.ctx.UnwrapKey(r.sess, wrapMech, sk, wrapped, sessionKeyTemplate())
	if err != nil {
		var pe p11.Error
		if errors.As(err, &pe) {
			switch pe {
			case p11.CKR_WRAPPED_KEY_INVALID, p11.CKR_WRAPPED_KEY_LEN_RANGE, p11.CKR_ENCRYPTED_DATA_INVALID,
				p11.CKR_ENCRYPTED_DATA_LEN_RANGE, p11.CKR_GENERAL_ERROR, p11.CKR_FUNCTION_FAILED:
				return nil, &keyring.ScopeError{Scope: scope, Err: fmt.Errorf("%w (%v)", keyring.ErrUnwrap, err)}
			}
		}
		return nil, fmt.Errorf("pkcs11: unwrap under scope %s: %w", scope, err)
	}
	defer r.ctx.DestroyObject(r.sess, dk)
	return r.value(dk)
}

// Erase leaves a tombstone, then destroys the token's key for scope.
func (r *Ring) Erase(ctx context.Context, scope string) (bool, error) {
	if err := keyring.ValidateScope(scope); err != nil {
		return false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	gone, keys, err := r.held(scope)
	if err != nil {
		return false, err
	}
	if !gone {
		_, err := r.ctx.CreateObject(r.sess, []*p11.Attribute{
			p11.NewAttribute(p11.CKA_CLASS, p11.CKO_DATA),
			p11.NewAttribute(p11.CKA_TOKEN, true),
			p11.NewAttribute(p11.CKA_PRIVATE, false),
			p11.NewAttribute(p11.CKA_APPLICATION, "runseal"),
			p11.NewAttribute(p11.CKA_LABEL, tombLabel+scope),
			p11.NewAttribute(p11.CKA_VALUE, []byte(time.Now().UTC().Format(time.RFC3339Nano))),
		})
		if err != nil {
			return false, fmt.Errorf("pkcs11: tombstone for scope %s: %w", scope, err)
		}
	}
	for _, h := range keys {
		if err := r.ctx.DestroyObject(r.sess, h); err != nil {
			return false, fmt.Errorf("pkcs11: destroy the key of scope %s: %w", scope, err)
		}
	}
	return !gone, nil
}

// Erased reports whether the token holds scope's tombstone; it finds
// objects by label and reads no key.
func (r *Ring) Erased(ctx context.Context, scope string) (bool, error) {
	if err := keyring.ValidateScope(scope); err != nil {
		return false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	gone, _, err := r.held(scope)
	return gone, err
}

// held finds scope's tombstone and key objects by label, with r.mu held; a
// scope with neither is ErrUnknownScope.
func (r *Ring) held(scope string) (gone bool, keys []p11.ObjectHandle, err error) {
	if gone, err = r.tombstoned(scope); err != nil {
		return false, nil, fmt.Errorf("pkcs11: %w", err)
	}
	keys, err = r.find([]*p11.Attribute{
		p11.NewAttribute(p11.CKA_CLASS, p11.CKO_SECRET_KEY),
		p11.NewAttribute(p11.CKA_LABEL, keyLabel+scope),
	})
	if err != nil {
		return false, nil, fmt.Errorf("pkcs11: %w", err)
	}
	if !gone && len(keys) == 0 {
		return false, nil, &keyring.ScopeError{Scope: scope, Err: keyring.ErrUnknownScope}
	}
	return gone, keys, nil
}

// Scopes lists the scopes with a key or a tombstone in the token.
func (r *Ring) Scopes(ctx context.Context) ([]keyring.Scope, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	for _, class := range []uint{p11.CKO_SECRET_KEY, p11.CKO_DATA} {
		hs, err := r.find([]*p11.Attribute{p11.NewAttribute(p11.CKA_CLASS, class)})
		if err != nil {
			return nil, fmt.Errorf("pkcs11: %w", err)
		}
		for _, h := range hs {
			attrs, err := r.ctx.GetAttributeValue(r.sess, h, []*p11.Attribute{p11.NewAttribute(p11.CKA_LABEL, nil)})
			if err != nil || len(attrs) != 1 {
				continue
			}
			l := string(attrs[0].Value)
			if s, ok := strings.CutPrefix(l, tombLabel); ok {
				seen[s] = true
			} else if s, ok := strings.CutPrefix(l, keyLabel); ok {
				seen[s] = seen[s] || false
			}
		}
	}
	out := make([]keyring.Scope, 0, len(seen))
	for n, e := range seen {
		out = append(out, keyring.Scope{Name: n, Erased: e})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

var _ keyring.Ring = (*Ring)(nil)
