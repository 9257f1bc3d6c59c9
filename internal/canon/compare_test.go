package canon

import (
	"encoding/json"
	"slices"
	"testing"
	"unicode/utf16"
)

// utf16Order is the reference for compareCanonicalStrings: decode both
// contents as JSON strings and compare their UTF-16 code units.
func utf16Order(t *testing.T, a, b string) int {
	t.Helper()
	var sa, sb string
	if err := json.Unmarshal([]byte(`"`+a+`"`), &sa); err != nil {
		t.Fatalf("%q: %v", a, err)
	}
	if err := json.Unmarshal([]byte(`"`+b+`"`), &sb); err != nil {
		t.Fatalf("%q: %v", b, err)
	}
	return slices.Compare(utf16.Encode([]rune(sa)), utf16.Encode([]rune(sb)))
}

// TestCompareCanonicalStrings_KeyOrderTraps holds the key comparison, and
// its ASCII fast path, to UTF-16 order where byte order and code-point
// order differ from it, or where an escape or a multi-byte character meets
// a plain ASCII byte: a wrong answer would accept a package whose keys are
// out of canonical order, or refuse a canonical one.
func TestCompareCanonicalStrings_KeyOrderTraps(t *testing.T) {
	keys := []string{
		"", "a", "b", "ab", "abc", "run", "seq", "v", "kind", "Kind", "_", "~",
		`\"`, `\\`, `\n`, `\t`, `\u001f`, `\u0000`, "!", "#", "[", "]", "\x7f",
		"é", "aé", "a\\n", "\u00ff", "\u0100", "\uffff", "\U00010000", "\U0010ffff", "\ue000", "\ud7ff",
		"a\U00010000", "a\uffff", `a\"`, `a\\`, "a]", "a[",
	}
	for _, a := range keys {
		for _, b := range keys {
			want := utf16Order(t, a, b)
			if got := compareCanonicalStrings([]byte(a), []byte(b)); got != want {
				t.Errorf("compare(%q, %q) = %d, UTF-16 order says %d", a, b, got, want)
			}
		}
	}
}
