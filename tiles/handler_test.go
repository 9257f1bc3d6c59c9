package tiles

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

func get(t *testing.T, url string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func TestHandler_HeadersAndRange(t *testing.T) {
	m := newMemLog(t)
	srv := serveMem(t, m)
	if resp, _ := get(t, srv.URL+"/checkpoint"); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("checkpoint before any signing: %s, want 404", resp.Status)
	}
	m.grow(t, 300)
	m.witness()
	m.grow(t, 20) // 320: the witnessed checkpoint stays at 300

	for _, tc := range []struct {
		path, cache, ctype string
		status, size       int
	}{
		{"/checkpoint", CacheNoStore, "text/plain; charset=utf-8", 200, -1},
		{"/checkpoint-witnessed", CacheNoStore, "text/plain; charset=utf-8", 200, -1},
		{"/tile/0/000", CacheImmutablePrivate, "application/octet-stream", 200, FullTileSize},
		{"/tile/0/001.p/64", CacheImmutablePrivate, "application/octet-stream", 200, 64 * 32},
		{"/tile/0/001.p/44", CacheImmutablePrivate, "application/octet-stream", 200, 44 * 32}, // the witnessed size's partial
		{"/tile/1/000.p/1", CacheImmutablePrivate, "application/octet-stream", 200, 32},
		{"/tile/entries/000", CacheImmutablePrivate, "application/octet-stream", 200, EntryBundleSize},
		{"/tile/entries/001.p/64", CacheImmutablePrivate, "application/octet-stream", 200, 64 * 34},
		// Beyond the log, or wider than the newest checkpoint implies.
		{"/tile/0/001", CacheNoStore, "", 404, -1},
		{"/tile/0/001.p/65", CacheNoStore, "", 404, -1},
		{"/tile/0/002.p/1", CacheNoStore, "", 404, -1},
		{"/tile/1/000", CacheNoStore, "", 404, -1},
		{"/tile/2/000.p/1", CacheNoStore, "", 404, -1},
		{"/tile/entries/001", CacheNoStore, "", 404, -1},
		{"/tile/0/0001", CacheNoStore, "", 404, -1},
		{"/tile/64/000", CacheNoStore, "", 404, -1},
		{"/nothing", CacheNoStore, "", 404, -1},
	} {
		resp, body := get(t, srv.URL+tc.path)
		if resp.StatusCode != tc.status {
			t.Errorf("GET %s: %s, want %d (%s)", tc.path, resp.Status, tc.status, body)
			continue
		}
		if got := resp.Header.Get("Cache-Control"); got != tc.cache {
			t.Errorf("GET %s: Cache-Control %q, want %q", tc.path, got, tc.cache)
		}
		if tc.status != 200 {
			continue
		}
		if got := resp.Header.Get("Content-Type"); got != tc.ctype {
			t.Errorf("GET %s: Content-Type %q, want %q", tc.path, got, tc.ctype)
		}
		if tc.size >= 0 && len(body) != tc.size {
			t.Errorf("GET %s: %d bytes, want %d", tc.path, len(body), tc.size)
		}
		etag := resp.Header.Get("ETag")
		if etag == "" {
			t.Errorf("GET %s: no ETag", tc.path)
			continue
		}
		if again, b := get(t, srv.URL+tc.path, "If-None-Match", etag); again.StatusCode != http.StatusNotModified || len(b) != 0 {
			t.Errorf("GET %s If-None-Match its ETag: %s, want 304 with no body", tc.path, again.Status)
		}
	}
	// The witnessed path serves the witnessed note, not the newest.
	_, w := get(t, srv.URL+"/checkpoint-witnessed")
	cp, err := noteCheckpoint(w)
	if err != nil || cp.Size != 300 {
		t.Errorf("checkpoint-witnessed: size %d, %v; want 300", cp.Size, err)
	}
	// Only GET and HEAD.
	resp, err := http.Post(srv.URL+"/tile/0/000", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %s, want 405", resp.Status)
	}
}

// TestHandler_PrivateLogTilesAreNotForSharedCaches is issue 27 item 6: the
// tiles of a log that needs a token were sent "public, ..., immutable", so
// a shared cache in front of the server could keep them and serve them to
// anyone. They are private unless the handler is told the log is public.
func TestHandler_PrivateLogTilesAreNotForSharedCaches(t *testing.T) {
	m := newMemLog(t)
	m.grow(t, 300)
	for _, tc := range []struct {
		public bool
		want   string
	}{
		{false, "private, max-age=31536000, immutable"},
		{true, "public, max-age=31536000, immutable"},
	} {
		srv := httptest.NewServer(&Handler{Log: NewLog(m), Public: tc.public})
		for _, path := range []string{"/tile/0/000", "/tile/entries/001.p/44"} {
			resp, _ := get(t, srv.URL+path)
			if got := resp.Header.Get("Cache-Control"); resp.StatusCode != 200 || got != tc.want {
				t.Errorf("public %v: GET %s: %s, Cache-Control %q; want 200, %q", tc.public, path, resp.Status, got, tc.want)
			}
		}
		srv.Close()
	}
}
