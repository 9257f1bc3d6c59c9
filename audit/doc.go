// Package audit is what an auditor of a disclosure package gives and reads:
// the trusted keys and witness policy, resolved from their text form
// (Keys.Trust), and the text report, verdict headline and exit status of a
// verification (WriteReport, Headline, ExitCode).
//
// The auditor CLI ("auditor verify") and the in-browser verifier (the
// /verify page, cmd/verify-wasm) both use it, so that one package, checked
// with the same keys, gets the same report, word for word, and the same
// verdict in both. Neither may word a verdict or resolve a key on its own.
//
// Key errors are *KeyError, matching ErrKeys, and name the auditor verify
// flag the key was given with (the page labels its fields with the same
// names); a key error means no verification was attempted.
package audit
