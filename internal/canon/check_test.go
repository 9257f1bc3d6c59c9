package canon

import (
	"strings"
	"testing"
)

var checkCases = []string{
	``, ` `, `{}`, `[]`, `{} `, ` {}`, `{"a":1}`, `{"a" :1}`, `{"a":1,}`, `{"b":1,"a":2}`,
	`{"a":1,"a":2}`, `{"a":{"b":[1,2,{"c":null}]}}`, `"x"`, `"\/"`, `"/"`, `"\u0008"`, `"\b"`,
	`"\u001f"`, `"\u001F"`, `"\u0020"`, `"\u00e9"`, `"é"`, `"\ud83d\ude00"`, `"😀"`, "\"\x7f\"",
	"\"\x01\"", `"\u0001"`, "\"\xff\"", "\"\xed\xa0\x80\"", `1`, `-0`, `0`, `01`, `-1`, `1.0`,
	`1.5`, `1e30`, `1e+30`, `1E+30`, `0.000001`, `1e-7`, `1e-07`, `100`, `1e2`,
	`18446744073709551616123`, `-18446744073709551616123`, `true`, `false`, `null`, `nul`, `tru`,
	`{"\u0000":1,"\u0001":2}`, `{"\u0001":1,"\u0000":2}`, `{"\n":1,"\t":2}`, `{"\t":1,"\n":2}`,
	`{"a":1,"\u00e9":2}`, `{"é":1,"a":2}`, `{"a":1,"é":2}`, `{"😀":1,"ｅ":2}`, `{"ｅ":1,"😀":2}`,
	`{"\"":1,"\\":2}`, `{"\\":1,"\"":2}`, `{"ab":1,"a":2}`, `{"a":1,"ab":2}`, `{"é":1,"ê":2}`,
	`{"ê":1,"é":2}`, `{"aé":1,"aê":2}`, `{"a\\":1,"a\"":2}`, `[1,2`, `{"a":1`, `{"a"}`, `[,]`,
	`"abc`, `"\`, `"\u00"`, `1.`, `1e`, `-`, `1e400`, `[1]x`, `{"a":1}{}`,
	strings.Repeat("[", 129) + strings.Repeat("]", 129), strings.Repeat("[", 130) + strings.Repeat("]", 130),
	strings.Repeat(`{"a":`, 128) + "1" + strings.Repeat("}", 128), strings.Repeat(`{"a":`, 129) + "1" + strings.Repeat("}", 129),
}

func TestCheckAgreesWithIsCanonical(t *testing.T) {
	for _, c := range checkCases {
		want := IsCanonical([]byte(c))
		got := Check([]byte(c)) == nil
		if got != want {
			t.Errorf("Check(%q) canonical = %v, IsCanonical = %v (%v)", c, got, want, Check([]byte(c)))
		}
	}
}

func TestCheckObjectMembers(t *testing.T) {
	in := `{"a":1,"b":{"c":[1,"}"]},"d\n":"x\"y"}`
	var keys, vals []string
	err := CheckObject([]byte(in), func(k, v []byte) {
		keys = append(keys, string(k))
		vals = append(vals, string(v))
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(keys, "|") != `a|b|d\n` || strings.Join(vals, "|") != `1|{"c":[1,"}"]}|"x\"y"` {
		t.Errorf("members %q %q", keys, vals)
	}
	for _, bad := range []string{`[]`, `"x"`, ``, `{"b":1,"a":1}`} {
		if CheckObject([]byte(bad), func(k, v []byte) {}) == nil {
			t.Errorf("CheckObject(%q) accepted", bad)
		}
	}
}

func FuzzCheck(f *testing.F) {
	for _, c := range checkCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want := IsCanonical(b)
		err := Check(b)
		if (err == nil) != want {
			t.Fatalf("Check(%q) = %v, IsCanonical = %v", b, err, want)
		}
		n := 0
		oerr := CheckObject(b, func(k, v []byte) { n++ })
		if oerr == nil && (!want || b[0] != '{') {
			t.Fatalf("CheckObject(%q) accepted a non-canonical or non-object input", b)
		}
		if want && b[0] == '{' {
			if oerr != nil {
				t.Fatalf("CheckObject(%q) = %v for a canonical object", b, oerr)
			}
			v, _ := Parse(b)
			if n != len(v.Members) {
				t.Fatalf("CheckObject(%q) saw %d members, Parse %d", b, n, len(v.Members))
			}
		}
	})
}

func BenchmarkCheck(b *testing.B) {
	in := []byte(`{"epoch":1,"kind":"Note","n":12345,"nested":{"a":[1,2,3],"b":"x"},"run":"01JD0000000000000000000001","seq":5,"text":"` +
		strings.Repeat("abcdefgh ", 100) + `","v":1}`)
	b.SetBytes(int64(len(in)))
	for i := 0; i < b.N; i++ {
		if err := Check(in); err != nil {
			b.Fatal(err)
		}
	}
}

func TestPlainASCII8(t *testing.T) {
	for b := 0; b < 256; b++ {
		want := b >= 0x20 && b < 0x80 && b != '"' && b != '\\'
		for pos := range 8 {
			w := []byte("abcdefgh")
			w[pos] = byte(b)
			x := uint64(0)
			for i := 7; i >= 0; i-- {
				x = x<<8 | uint64(w[i])
			}
			if got := plainASCII8(x); got != want {
				t.Fatalf("byte %#x at %d: %v", b, pos, got)
			}
		}
	}
}
