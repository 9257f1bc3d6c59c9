package canon

import (
	"bytes"
	"errors"
	"testing"
)

func TestCanonicalize(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"key order and whitespace", `{ "b": 1, "a" : [true, false, null] }`, `{"a":[true,false,null],"b":1}`},
		{"nested order", `{"z":{"y":1,"x":2},"a":{}}`, `{"a":{},"z":{"x":2,"y":1}}`},
		{"integers exact beyond 2^53", `{"n":18446744073709551615,"m":-9007199254740993}`, `{"m":-9007199254740993,"n":18446744073709551615}`},
		{"negative zero integer", `-0`, `0`},
		{"doubles ES6", `[1e30, 100.0, 0.000001, 1E-7, -0.0, 4.50]`, `[1e+30,100,0.000001,1e-7,0,4.5]`},
		{"minimal escapes", `"\u0041\/\u00e9\n\u001f\"\\"`, "\"A/\u00e9\\n\\u001f\\\"\\\\\""},
		{"surrogate pair escape", `"\ud83d\ude00"`, "\"\U0001F600\""},
		// RFC 8785 §3.2.3: keys sort by UTF-16 code units, so U+1F600 (D83D) sorts before U+FB33.
		{"utf16 key order", "{\"\uFB33\":1,\"\U0001F600\":2,\"\u00e9\":3,\"1\":4}", "{\"1\":4,\"\u00e9\":3,\"\U0001F600\":2,\"\uFB33\":1}"},
		{"empty containers", `[{},[],""]`, `[{},[],""]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tc.in))
			if err != nil {
				t.Fatalf("Canonicalize(%s): %v", tc.in, err)
			}
			if string(got) != tc.want {
				t.Fatalf("Canonicalize(%s) = %s, want %s", tc.in, got, tc.want)
			}
			if !IsCanonical(got) {
				t.Fatalf("output %s is not canonical", got)
			}
		})
	}
}

func TestRefusals(t *testing.T) {
	tests := []struct{ name, in string }{
		{"duplicate key", `{"a":1,"a":2}`},
		{"lone high surrogate", `"\ud800"`},
		{"lone low surrogate", `"\udc00"`},
		{"invalid utf8", "\"\xff\""},
		{"control char", "\"a\x01\""},
		{"trailing data", `{} {}`},
		{"leading zero", `01`},
		{"double overflow", `1e400`},
		{"bad literal", `tru`},
		{"unterminated", `{"a":1`},
		{"empty", ``},
		{"bare key", `{a:1}`},
		{"trailing comma", `[1,]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Canonicalize([]byte(tc.in))
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Canonicalize(%q) err = %v, want *SyntaxError", tc.in, err)
			}
		})
	}
}

func TestDepthLimit(t *testing.T) {
	deep := bytes.Repeat([]byte("["), MaxDepth+2)
	if _, err := Canonicalize(deep); err == nil {
		t.Fatal("deep nesting accepted")
	}
	ok := append(bytes.Repeat([]byte("["), 100), bytes.Repeat([]byte("]"), 100)...)
	if _, err := Canonicalize(ok); err != nil {
		t.Fatalf("depth 100 refused: %v", err)
	}
}

func TestValueAccessors(t *testing.T) {
	v, err := Parse([]byte(`{"seq":12,"f":1.5,"s":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := v.Get("seq"); !ok || !n.IsInteger() || n.Str != "12" {
		t.Fatalf("seq = %+v", n)
	}
	if f, _ := v.Get("f"); f.IsInteger() {
		t.Fatal("1.5 reported as integer")
	}
	if _, ok := v.Get("missing"); ok {
		t.Fatal("missing key found")
	}
	if _, err := NewObject([]Member{{Key: "a"}, {Key: "a"}}); err == nil {
		t.Fatal("NewObject accepted duplicate keys")
	}
}

func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `[1.5e3,"\u00e9",null]`, `{"b":{"a":[]}}`, `"\ud83d\ude00"`, `-0`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := Canonicalize(in)
		if err != nil {
			return
		}
		// Canonicalization is idempotent: canonical bytes are a fixed point.
		c2, err := Canonicalize(c)
		if err != nil {
			t.Fatalf("canonical output %q does not parse: %v", c, err)
		}
		if !bytes.Equal(c, c2) {
			t.Fatalf("not idempotent: %q -> %q", c, c2)
		}
	})
}

// TestMarshalAround: the two parts around a member's value, with the value's
// form between them, are the object's canonical bytes, whichever member.
func TestMarshalAround(t *testing.T) {
	v, err := Parse([]byte(`{"b":[1,{"seq":2}],"seq":7,"a":"x\u00e9","zz":{"k":null}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range v.Members {
		before, after, ok := v.MarshalAround(m.Key)
		if !ok {
			t.Fatalf("%q: not found", m.Key)
		}
		if got, want := string(before)+string(m.Value.Marshal())+string(after), string(v.Marshal()); got != want {
			t.Errorf("%q: %s, want %s", m.Key, got, want)
		}
	}
	if _, _, ok := v.MarshalAround("missing"); ok {
		t.Error("a missing member was found")
	}
	if _, _, ok := StringValue("seq").MarshalAround("seq"); ok {
		t.Error("a string split as an object")
	}
}
