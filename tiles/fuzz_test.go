package tiles

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

func FuzzParsePath(f *testing.F) {
	for _, s := range []string{"tile/0/000", "tile/entries/x001/234.p/7", "tile/63/x018/x446/x744/x073/x709/x551/615.p/255", "tile/0/0000", "tile/00/000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		r, err := ParsePath(p)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		// One resource, one spelling.
		if r.Path() != p {
			t.Fatalf("ParsePath(%q) = %+v, which spells %q", p, r, r.Path())
		}
	})
}

func FuzzParseHashTile(f *testing.F) {
	f.Add(3, make([]byte, 96))
	f.Add(256, make([]byte, 8192))
	f.Add(1, make([]byte, 33))
	f.Fuzz(func(t *testing.T, w int, data []byte) {
		r := Ref{Level: 0, W: w}
		hs, err := ParseHashTile(r, data)
		if err != nil {
			return
		}
		if !bytes.Equal(MarshalHashTile(hs), data) || len(hs) != w {
			t.Fatal("a parsed tile does not round-trip to its bytes")
		}
	})
}

func FuzzParseEntryBundle(f *testing.F) {
	f.Add(3, MarshalEntryBundle(make([][32]byte, 3)))
	f.Add(1, []byte{0, 32})
	f.Add(2, []byte{0xff, 0xff, 1})
	f.Fuzz(func(t *testing.T, w int, data []byte) {
		r := Ref{Level: EntriesLevel, W: w}
		es, err := ParseEntryBundle(r, data)
		if err != nil {
			return
		}
		if !bytes.Equal(MarshalEntryBundle(es), data) || len(es) != w {
			t.Fatal("a parsed bundle does not round-trip to its bytes")
		}
	})
}

func FuzzNoteCheckpoint(f *testing.F) {
	f.Add([]byte("example.com/log\n3\nzCOm4F+VCZRZ5LYnA8IjI2lyp4mXsHKmVQCzDia7bvM=\n\n— example.com/log AAAA\n"))
	f.Add([]byte("\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		noteCheckpoint(b) // must not panic
	})
}

// FuzzTree serves one fuzzed resource in place of a good one: the client
// must either refuse it or, if it accepts, still build a proof that
// verifies against the signed root.
func FuzzTree(f *testing.F) {
	m := newMemLog(f)
	m.grow(f, 600)
	good := map[string][]byte{}
	l := NewLog(m)
	for _, r := range Refs(600, 0) {
		b, err := l.Resource(context.Background(), r, 600)
		if err != nil {
			f.Fatal(err)
		}
		good[r.Path()] = b
	}
	root := m.root(f, 600)
	f.Add("tile/0/000", good["tile/0/000"], uint16(5))
	f.Add("tile/0/002.p/88", good["tile/0/002.p/88"], uint16(599))
	f.Add("tile/1/000.p/2", []byte{1, 2, 3}, uint16(1))
	f.Add("tile/entries/001", good["tile/entries/001"], uint16(300))
	f.Fuzz(func(t *testing.T, path string, data []byte, index uint16) {
		i := uint64(index) % 600
		fetch := mapFetcher{good: good, swap: path, data: data}
		tr := NewTree(600, root, fetch, nil)
		p, err := tr.InclusionProof(context.Background(), i)
		if err != nil {
			return
		}
		leaf, err := tr.Leaf(context.Background(), i)
		if err != nil {
			return
		}
		if leaf != leafValue(i) {
			t.Fatalf("accepted a wrong leaf %d", i)
		}
		if !verifies(leaf, i, 600, p, root) {
			t.Fatalf("accepted tiles that give a proof of %d that does not verify", i)
		}
	})
}

type mapFetcher struct {
	good map[string][]byte
	swap string
	data []byte
}

func (m mapFetcher) Fetch(_ context.Context, p string) ([]byte, error) {
	if p == m.swap {
		return m.data, nil
	}
	b, ok := m.good[p]
	if !ok {
		return nil, errNotExistForTest
	}
	return b, nil
}
