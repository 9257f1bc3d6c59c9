package canon

import (
	"bytes"
	"errors"
	"testing"
)

// routing is a record body's added members, in canonical key order: the
// shape the store inserts into a kind's fields.
var routing = []RawMember{
	{"case", []byte(`"01JD00000000000000000000C1"`)},
	{"epoch", []byte(`7`)},
	{"kind", []byte(`"Note"`)},
	{"run", []byte(`"01JD0000000000000000000001"`)},
	{"seq", []byte(`12`)},
	{"v", []byte(`1`)},
}

// viaValue is what InsertMembers must equal: obj parsed, the members
// added, sorted and marshalled.
func viaValue(t *testing.T, obj []byte, add []RawMember) ([]byte, bool) {
	t.Helper()
	v, err := Parse(obj)
	if err != nil || v.Kind != Object || !IsCanonical(obj) {
		return nil, false
	}
	ms := append([]Member(nil), v.Members...)
	for _, m := range add {
		mv, err := Parse(m.Value)
		if err != nil {
			t.Fatalf("added value %s: %v", m.Value, err)
		}
		ms = append(ms, Member{Key: m.Key, Value: mv})
	}
	o, err := NewObject(ms)
	if err != nil {
		return nil, false // a duplicate key
	}
	return o.Marshal(), true
}

// checkInsert holds InsertMembers to viaValue for obj, and its offsets to
// where each added value stands.
func checkInsert(t *testing.T, obj []byte, add []RawMember) {
	t.Helper()
	want, ok := viaValue(t, obj, add)
	at := make([]int, len(add))
	prefix := []byte("xy") // a dst with bytes already in it
	got, err := InsertMembers(append([]byte(nil), prefix...), obj, add, at, nil)
	if !ok {
		if err == nil {
			t.Fatalf("InsertMembers(%q) = %q, want an error (not a canonical object, or a key added twice)", obj, got)
		}
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Fatalf("InsertMembers(%q): error %T, want *SyntaxError", obj, err)
		}
		if !bytes.Equal(got, prefix) {
			t.Fatalf("InsertMembers(%q) failed but left %q in dst, want %q", obj, got, prefix)
		}
		return
	}
	if err != nil {
		t.Fatalf("InsertMembers(%q): %v, want %q", obj, err, want)
	}
	if !bytes.HasPrefix(got, prefix) || !bytes.Equal(got[len(prefix):], want) {
		t.Fatalf("InsertMembers(%q)\n got %q\nwant %q", obj, got, append(prefix, want...))
	}
	for i, m := range add {
		if !bytes.HasPrefix(got[at[i]:], m.Value) || got[at[i]-2] != '"' || got[at[i]-1] != ':' {
			t.Fatalf("at[%d] = %d does not point at %s in %q", i, at[i], m.Value, got)
		}
	}
}

// TestInsertMembers_IsMarshalOfTheMergedObject: the spliced bytes are
// Marshal's of the merged object wherever the fields' keys fall among the
// added ones: before, between and after them, keys that share a prefix
// with one, escaped keys and keys beyond ASCII (which sort by UTF-16 code
// units, so U+1F600 sorts before U+E000).
func TestInsertMembers_IsMarshalOfTheMergedObject(t *testing.T) {
	for _, obj := range []string{
		`{}`,
		`{"a":1}`,
		`{"":0}`,
		`{"payload":"xxxx"}`,
		`{"c":1,"cas":2,"casea":3,"d":[1,{"seq":1}],"zz":null}`,
		`{"kin":true,"kinda":false,"r":"","ru":{},"runs":[],"se":1,"seqq":2,"u":3,"vv":4}`,
		`{"a\nb":1,"case\u0000":2,"se\"q":3}`,
		`{"v\\":1}`,
		`{"é":1,"😀":2,"":3}`,
		`{"A":1,"Z":2,"_":3,"~":4}`,
	} {
		checkInsert(t, []byte(obj), routing)
		checkInsert(t, []byte(obj), routing[2:4])
		checkInsert(t, []byte(obj), nil)
	}
}

// TestInsertMembers_RefusesWhatItCannotVouchFor: an object that is not
// canonical, not an object, or already holds an added key yields an
// error and leaves dst as it was; it is never spliced into bytes that
// would read back as another object.
func TestInsertMembers_RefusesWhatItCannotVouchFor(t *testing.T) {
	for _, obj := range []string{
		``, `[]`, `"x"`, `1`, `{`, `{"b":1,"a":2}`, `{ "a":1}`, `{"a":1.0}`, `{"a":1,"a":1}`,
		`{"a":"\u0041"}`, `{"a":1}x`, `{"seq":1}`, `{"kind":"X"}`, `{"v":{}}`,
	} {
		checkInsert(t, []byte(obj), routing)
	}
}

// FuzzInsertMembers holds InsertMembers to Parse, NewObject and Marshal
// for any object and the body's routing members.
func FuzzInsertMembers(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"seq":1}`, `{"s":[1,2],"é":"\n"}`, `{"b":1,"a":2}`, `nope`} {
		f.Add([]byte(s), uint8(0xff))
	}
	f.Fuzz(func(t *testing.T, obj []byte, mask uint8) {
		var add []RawMember
		for i, m := range routing {
			if mask&(1<<i) != 0 {
				add = append(add, m)
			}
		}
		checkInsert(t, obj, add)
	})
}

// TestInsertMembers_RefuseSeesEveryKey: a key refuse answers true for
// fails the splice wherever it stands, and refuse sees keys as written.
func TestInsertMembers_RefuseSeesEveryKey(t *testing.T) {
	for _, tc := range []struct {
		obj  string
		want bool // refused
	}{
		{`{"a":1,"step":2}`, true},
		{`{"step":2,"z":1}`, true},
		{`{"steps":2}`, false},
		{`{"a":{"step":1}}`, false}, // not a top-level key
		{`{"st\\u0065p":1}`, false}, // another key: a backslash, then "u0065p"
	} {
		var seen []string
		refuse := func(key []byte) bool {
			seen = append(seen, string(key))
			return string(key) == "step"
		}
		got, err := InsertMembers(nil, []byte(tc.obj), routing, nil, refuse)
		if (err != nil) != tc.want {
			t.Errorf("%s: err %v, got %q; want refused %v", tc.obj, err, got, tc.want)
		}
		if !tc.want && len(seen) == 0 && tc.obj != `{}` {
			t.Errorf("%s: refuse was never asked", tc.obj)
		}
	}
}
