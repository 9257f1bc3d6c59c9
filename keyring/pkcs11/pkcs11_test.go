package pkcs11_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	p11 "github.com/miekg/pkcs11"

	"github.com/runseal/runseal/keyring/pkcs11"
	"github.com/runseal/runseal/keyring/ringtest"
)

// The tests run against a SoftHSM2 token they initialise themselves in a
// temporary directory. .ci/softhsm.sh installs SoftHSM2; without it the
// tests fail saying so, unless RUNSEAL_SKIP_SOFTHSM=1.
var (
	tokenConfig pkcs11.Config
	setupErr    error
)

func findModule() (string, error) {
	if m := os.Getenv("RUNSEAL_SOFTHSM_MODULE"); m != "" {
		return m, nil
	}
	for _, p := range []string{"/usr/lib/softhsm/libsofthsm2.so", "/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so",
		"/usr/lib/aarch64-linux-gnu/softhsm/libsofthsm2.so", "/usr/local/lib/softhsm/libsofthsm2.so"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("libsofthsm2.so not found (install Debian softhsm2: bash .ci/softhsm.sh, or set RUNSEAL_SOFTHSM_MODULE)")
}

func setup(dir string) (pkcs11.Config, error) {
	mod, err := findModule()
	if err != nil {
		return pkcs11.Config{}, err
	}
	util, err := exec.LookPath("softhsm2-util")
	if err != nil {
		return pkcs11.Config{}, errors.New("softhsm2-util not found (install Debian softhsm2: bash .ci/softhsm.sh)")
	}
	tokens := filepath.Join(dir, "tokens")
	if err := os.MkdirAll(tokens, 0o700); err != nil {
		return pkcs11.Config{}, err
	}
	conf := filepath.Join(dir, "softhsm2.conf")
	if err := os.WriteFile(conf, []byte("directories.tokendir = "+tokens+"\nobjectstore.backend = file\nlog.level = ERROR\n"), 0o600); err != nil {
		return pkcs11.Config{}, err
	}
	os.Setenv("SOFTHSM2_CONF", conf)
	out, err := exec.Command(util, "--init-token", "--free", "--label", "runseal-test", "--so-pin", "5678", "--pin", "1234").CombinedOutput()
	if err != nil {
		return pkcs11.Config{}, fmt.Errorf("softhsm2-util --init-token: %v: %s", err, out)
	}
	return pkcs11.Config{Module: mod, Token: "runseal-test", PIN: "1234"}, nil
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "runseal-softhsm-")
	if err != nil {
		panic(err)
	}
	tokenConfig, setupErr = setup(dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func openRing(t *testing.T) *pkcs11.Ring {
	t.Helper()
	if setupErr != nil {
		if os.Getenv("RUNSEAL_SKIP_SOFTHSM") == "1" {
			t.Skipf("SoftHSM2 unavailable and RUNSEAL_SKIP_SOFTHSM=1: %v", setupErr)
		}
		t.Fatalf("no SoftHSM2 token for the PKCS#11 tests: %v (set RUNSEAL_SKIP_SOFTHSM=1 to skip on purpose)", setupErr)
	}
	r, err := pkcs11.Open(tokenConfig)
	if err != nil {
		t.Fatalf("open token: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestRingContract(t *testing.T) { ringtest.Run(t, openRing(t)) }

// TestScopeKeysNeverLeaveTheToken: a scope key must be sensitive and
// non-extractable, so no caller of the module can read it out.
func TestScopeKeysNeverLeaveTheToken(t *testing.T) {
	r := openRing(t)
	const scope = "other/case/01M8SNY25MTQ9VP1YG42CGNP5K"
	if _, _, err := r.Wrap(context.Background(), scope); err != nil {
		t.Fatal(err)
	}
	m := p11.New(tokenConfig.Module)
	sess, _ := openRawSession(t, m)
	m.FindObjectsInit(sess, []*p11.Attribute{p11.NewAttribute(p11.CKA_LABEL, "runseal:"+scope)})
	hs, _, _ := m.FindObjects(sess, 2)
	m.FindObjectsFinal(sess)
	if len(hs) != 1 {
		t.Fatalf("found %d token objects for the scope, want 1", len(hs))
	}
	attrs, err := m.GetAttributeValue(sess, hs[0], []*p11.Attribute{
		p11.NewAttribute(p11.CKA_EXTRACTABLE, nil), p11.NewAttribute(p11.CKA_SENSITIVE, nil), p11.NewAttribute(p11.CKA_TOKEN, nil)})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range attrs {
		want := byte(1)
		if a.Type == p11.CKA_EXTRACTABLE {
			want = 0
		}
		if len(a.Value) != 1 || a.Value[0] != want {
			t.Errorf("attribute %#x = %v, want %d", a.Type, a.Value, want)
		}
	}
	if _, err := m.GetAttributeValue(sess, hs[0], []*p11.Attribute{p11.NewAttribute(p11.CKA_VALUE, nil)}); err == nil {
		t.Errorf("the scope key's value could be read out of the token")
	}
}

func openRawSession(t *testing.T, m *p11.Ctx) (p11.SessionHandle, error) {
	t.Helper()
	m.Initialize()
	slots, _ := m.GetSlotList(true)
	for _, s := range slots {
		ti, _ := m.GetTokenInfo(s)
		if ti.Label == "runseal-test" {
			sess, err := m.OpenSession(s, p11.CKF_SERIAL_SESSION)
			if err != nil {
				t.Fatal(err)
			}
			m.Login(sess, p11.CKU_USER, "1234")
			t.Cleanup(func() { m.CloseSession(sess) })
			return sess, nil
		}
	}
	t.Fatal("token not found")
	return 0, nil
}

func TestParseURI(t *testing.T) {
	c, err := pkcs11.ParseURI("pkcs11:token=run%20seal?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-value=1234")
	if err != nil || c.Token != "run seal" || c.Module != "/usr/lib/softhsm/libsofthsm2.so" || c.PIN != "1234" {
		t.Fatalf("ParseURI = %+v, %v", c, err)
	}
	for _, bad := range []string{"token=x", "pkcs11:token=x", "pkcs11:?module-path=/m.so"} {
		if _, err := pkcs11.ParseURI(bad); err == nil {
			t.Errorf("ParseURI(%q) accepted", bad)
		}
	}
}
