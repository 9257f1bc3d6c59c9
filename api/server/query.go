package server

import (
	"net/url"
	"strings"
)

// queryValue is url.Values.Get on the parse of rawQuery, the first value of
// key, without building the map: the append route reads one or two
// parameters (tenant, epoch) of a query that is parsed for each of its
// layers (authorization, the handler, the activity meter), and building
// url.Values each time was allocation on every request for nothing.
//
// It keeps url.ParseQuery's rules exactly (FuzzQueryValue compares the
// two): pairs are split on '&', a pair holding ';' is skipped, a pair
// without '=' has the empty value, keys and values are unescaped with '+'
// as a space, and a pair whose key or value does not unescape is skipped.
func queryValue(rawQuery, key string) string {
	for rawQuery != "" {
		var pair string
		pair, rawQuery, _ = strings.Cut(rawQuery, "&")
		if pair == "" || strings.Contains(pair, ";") {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		if k != key {
			// Only an escaped key can unescape to key; a plain one that
			// differs cannot.
			if !strings.ContainsAny(k, "%+") {
				continue
			}
			uk, err := url.QueryUnescape(k)
			if err != nil || uk != key {
				continue
			}
		}
		uv, err := url.QueryUnescape(v)
		if err != nil {
			continue
		}
		return uv
	}
	return ""
}
