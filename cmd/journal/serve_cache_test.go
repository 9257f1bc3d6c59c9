package main

import (
	"net/http"
	"testing"
)

// TestServe_TilesOfAPrivateLogArePrivate is issue 27 item 6 through the
// real command: without --public the tiles need a reader token, and were
// nonetheless sent "public, ..., immutable", which lets a shared cache in
// front of the server hand them to anyone. They are private now, and the
// API's answers are nosniff.
func TestServe_TilesOfAPrivateLogArePrivate(t *testing.T) {
	db := newJournal(t)
	writer := createToken(t, db, "default", "writer")
	reader := createToken(t, db, "default", "reader")
	sv := startServe(t, db)
	sv.sealViaAPI(writer)
	get := func(path, tok string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", sv.base+path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	const tile = "/tiles/default/tile/entries/000.p/1"
	pollUntil(t, "the sealed run's tile is signed", func() bool { return get(tile, reader).StatusCode == 200 })
	if resp := get(tile, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a tile of a private log without a token: %s", resp.Status)
	}
	resp := get(tile, reader)
	if cc := resp.Header.Get("Cache-Control"); cc != "private, max-age=31536000, immutable" {
		t.Fatalf("a tile of a private log: Cache-Control %q, want private", cc)
	}
	if resp := get("/v1/runs", reader); resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("GET /v1/runs: no nosniff: %v", resp.Header)
	}
}
