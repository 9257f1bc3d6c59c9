package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"unicode"

	"github.com/runseal/runseal/appendinput"
	"github.com/runseal/runseal/internal/canon"
)

// maxRequestBody caps the body of a lease, seal or cancel request: each is
// a handful of short members.
const maxRequestBody = 64 << 10

// decodeBody reads a request body into v, a pointer to a struct of string
// and integer members, as strictly as an append line is read: the body is
// parsed with the parser records are canonicalized with (duplicate keys,
// invalid UTF-8, trailing data and bad escapes are refused), then every
// member name must be one of v's, exactly (encoding/json alone would
// match names without regard to case). A body over maxRequestBody is 413.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return badRequest("", "request body: %v", err)
	}
	return decodeStrict(b, v)
}

func decodeStrict(b []byte, v any) error {
	obj, err := canon.Parse(b)
	if err != nil {
		return badRequest("", "request body: malformed JSON: %v", err)
	}
	if obj.Kind != canon.Object {
		return badRequest("", "request body: must be a JSON object")
	}
	names := memberNames(v)
	for _, m := range obj.Members {
		if _, ok := names[m.Key]; !ok {
			return badRequest("", "request body: unknown member %s", appendinput.Quote(m.Key))
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return badRequest(te.Field, "request body: member %s must be a %s", appendinput.Quote(te.Field), te.Type)
		}
		return badRequest("", "request body: %v", err)
	}
	return nil
}

// memberNames returns the JSON member names of the struct v points to.
func memberNames(v any) map[string]struct{} {
	t := reflect.TypeOf(v).Elem()
	out := make(map[string]struct{}, t.NumField())
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" {
			name = f.Name
		}
		if name != "-" {
			out[name] = struct{}{}
		}
	}
	return out
}

// checkText refuses a name a person will read in listings and logs when it
// holds control characters (a newline, an escape sequence, a NUL), which
// could forge or hide lines where it is shown.
func checkText(field, s string) error {
	if i := strings.IndexFunc(s, unicode.IsControl); i >= 0 {
		return badRequest(field, "%s: control character %U at byte %d", field, []rune(s[i:])[0], i)
	}
	if i := strings.IndexFunc(s, func(r rune) bool { return unicode.Is(unicode.Cf, r) }); i >= 0 {
		return badRequest(field, "%s: invisible format character %U at byte %d", field, []rune(s[i:])[0], i)
	}
	return nil
}
