package main

import (
	"net/http"

	"github.com/runseal/runseal/verifypage"
)

// withVerifyPage answers /verify (the in-browser package verifier, package
// verifypage) without a token, and hands every other request to api. The
// page is static and verifies in the browser: it reads nothing of the
// journal, so it needs no credential.
func withVerifyPage(api http.Handler) http.Handler {
	mux := http.NewServeMux()
	page := verifypage.Handler("/verify")
	mux.Handle("/verify", page)
	mux.Handle("/verify/", page)
	mux.Handle("/", api)
	return mux
}
