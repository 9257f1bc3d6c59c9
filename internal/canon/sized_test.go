package canon

import (
	"bytes"
	"testing"
)

var sizedSeeds = []string{
	`null`, `true`, `false`, `0`, `-1.5e-7`, `""`, `"plain"`, `"esc\"ape\\ \n\t\u0001 é 😀"`,
	`[]`, `[1,"a",[null,{}]]`, `{}`, `{"b":1,"a":{"y":[true,false],"x":"q\""},"\u00e9":"\u0000"}`,
	`{"seq":12,"run":"01JC000000000000000000000A","fields":{"payload":"sealed:AQBJAQ` + "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" + `"}}`,
}

// TestMarshalSized_IsMarshal: the presized encoding is byte for byte
// Marshal's, escapes included, and a value without escapes fits its hint.
func TestMarshalSized_IsMarshal(t *testing.T) {
	for _, s := range sizedSeeds {
		v, err := Parse([]byte(s))
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if got, want := v.MarshalSized(), v.Marshal(); !bytes.Equal(got, want) {
			t.Errorf("%s: MarshalSized %s, Marshal %s", s, got, want)
		}
	}
	v, _ := Parse([]byte(sizedSeeds[len(sizedSeeds)-1]))
	if got := v.MarshalSized(); cap(got) != len(got) {
		t.Errorf("a value with no escapes: %d bytes in a buffer of %d, want its exact size", len(got), cap(got))
	}
}

// FuzzMarshalSized holds MarshalSized to Marshal on every value Parse
// accepts.
func FuzzMarshalSized(f *testing.F) {
	for _, s := range sizedSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		v, err := Parse(in)
		if err != nil {
			return
		}
		if got, want := v.MarshalSized(), v.Marshal(); !bytes.Equal(got, want) {
			t.Fatalf("MarshalSized %q, Marshal %q", got, want)
		}
	})
}
