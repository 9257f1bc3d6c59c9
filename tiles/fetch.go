package tiles

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/runseal/runseal/log"
)

// MaxCheckpointSize bounds a fetched checkpoint note: a note of 100
// signatures is far below it.
const MaxCheckpointSize = 1 << 20

// A Fetcher reads the resources of one log's tlog-tiles layout by path
// under its prefix (as Ref.Path, CheckpointPath). A resource that does
// not exist is an error wrapping fs.ErrNotExist.
type Fetcher interface {
	Fetch(ctx context.Context, path string) ([]byte, error)
}

// maxResource is the most bytes a well-formed resource at path can have;
// a fetcher reads at most one byte more, so an oversized answer is
// refused as malformed without being held.
func maxResource(path string) int64 {
	if strings.HasPrefix(path, "tile/entries/") {
		return EntryBundleSize
	}
	if strings.HasPrefix(path, "tile/") {
		return FullTileSize
	}
	return MaxCheckpointSize
}

func readBounded(r io.Reader, path string) ([]byte, error) {
	limit := maxResource(path)
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("tiles: reading %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, tileErr(ErrMalformed, path, "larger than %d bytes", limit)
	}
	return b, nil
}

// HTTPFetcher fetches a layout served over HTTP(S) under Base (a URL
// ending in "/"). Header, if set, is added to every request (for a
// bearer token).
type HTTPFetcher struct {
	Base   *url.URL
	Client *http.Client
	Header http.Header
}

// NewHTTPFetcher returns a fetcher for the layout at base; a missing final
// slash is added, since paths are resolved under it.
func NewHTTPFetcher(base string, c *http.Client) (*HTTPFetcher, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("tiles: %q is not an http or https URL", base)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	if c == nil {
		c = http.DefaultClient
	}
	return &HTTPFetcher{Base: u, Client: c}, nil
}

// Fetch implements Fetcher.
func (h *HTTPFetcher) Fetch(ctx context.Context, path string) ([]byte, error) {
	u := h.Base.JoinPath(path)
	u.RawQuery = h.Base.RawQuery
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("tiles: %s: %w", path, err)
	}
	for k, vs := range h.Header {
		req.Header[k] = vs
	}
	resp, err := h.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("tiles: GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return readBounded(resp.Body, path)
	case http.StatusNotFound:
		return nil, fmt.Errorf("tiles: GET %s: %w", path, fs.ErrNotExist)
	default:
		return nil, fmt.Errorf("tiles: GET %s: HTTP %s", path, resp.Status)
	}
}

// DirFetcher reads a layout from a local directory, as Sync writes it.
type DirFetcher struct {
	Dir string
}

// Fetch implements Fetcher. Only the layout's own paths are read, so no
// path can leave the directory.
func (d DirFetcher) Fetch(_ context.Context, path string) ([]byte, error) {
	if path != CheckpointPath && path != WitnessedPath {
		if _, err := ParsePath(path); err != nil {
			return nil, err
		}
	}
	f, err := os.Open(filepath.Join(d.Dir, filepath.FromSlash(path)))
	if err != nil {
		return nil, fmt.Errorf("tiles: %w", err)
	}
	defer f.Close()
	return readBounded(f, path)
}

// Cache keeps fetched tiles and bundles (never checkpoints, which
// change) across trees, up to a number of entries; it is safe for
// concurrent use. A cached resource is still authenticated by every tree
// that uses it, and dropped if it fails.
type Cache struct {
	mu  sync.Mutex
	max int
	m   map[string][]byte
	// inner memoizes the internal levels of cached hash tiles, derived
	// from the cached bytes alone, so later trees hash a tile once.
	inner map[string][][]log.Hash
}

// NewCache returns a cache of up to max resources (at most 8 KiB each).
func NewCache(max int) *Cache {
	return &Cache{max: max, m: make(map[string][]byte), inner: make(map[string][][]log.Hash)}
}

func (c *Cache) get(path string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[path]
	return b, ok
}

func (c *Cache) put(path string, b []byte) {
	if c == nil || c.max <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		for k := range c.m { // evict an arbitrary entry: tiles are cheap to refetch
			delete(c.m, k)
			delete(c.inner, k)
			break
		}
	}
	c.m[path] = b
	delete(c.inner, path)
}

func (c *Cache) drop(path string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, path)
	delete(c.inner, path)
}

func (c *Cache) levels(path string) [][]log.Hash {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inner[path]
}

func (c *Cache) putLevels(path string, lv [][]log.Hash) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[path]; ok {
		c.inner[path] = lv
	}
}

// Len returns the number of cached resources.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
