package tiles

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"strings"
)

// Open returns the fetcher for loc: an http(s) URL of a layout's prefix
// (fetched with c, http.DefaultClient when nil), or else a local directory
// as Sync writes it.
func Open(loc string, c *http.Client) (Fetcher, error) {
	if strings.HasPrefix(loc, "http://") || strings.HasPrefix(loc, "https://") {
		return NewHTTPFetcher(loc, c)
	}
	return DirFetcher{Dir: loc}, nil
}

// LatestNote fetches the newest checkpoint the layout publishes: its
// witnessed checkpoint (WitnessedPath), else its checkpoint
// (CheckpointPath) when it publishes no witnessed one, as a plain
// tlog-tiles log does. The note is not verified here.
func LatestNote(ctx context.Context, f Fetcher) ([]byte, error) {
	b, err := f.Fetch(ctx, WitnessedPath)
	if errors.Is(err, fs.ErrNotExist) {
		b, err = f.Fetch(ctx, CheckpointPath)
	}
	return b, err
}
