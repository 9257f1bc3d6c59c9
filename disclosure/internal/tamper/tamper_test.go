package tamper

import (
	"errors"
	"testing"
)

func TestApply(t *testing.T) {
	const pkg = "a1\nb2\nc3\n"
	for _, tc := range []struct {
		name  string
		edits []Edit
		want  string
		err   bool
	}{
		{"none", nil, pkg, false},
		{"replace in a line", []Edit{{Line: 2, From: "2", To: "9"}}, "a1\nb9\nc3\n", false},
		{"replace a line feed joins lines", []Edit{{Line: 1, From: "\n", To: ""}}, "a1b2\nc3\n", false},
		{"delete", []Edit{{Line: 1, Delete: true}}, "b2\nc3\n", false},
		{"insert before", []Edit{{Line: 2, Insert: "x\n"}}, "a1\nx\nb2\nc3\n", false},
		{"insert after the last", []Edit{{Line: 4, Insert: "x\n"}}, pkg + "x\n", false},
		{"numbers refer to the original", []Edit{{Line: 1, Delete: true}, {Line: 3, From: "c", To: "d"}}, "b2\nd3\n", false},
		{"from not in its line", []Edit{{Line: 1, From: "b"}}, "", true},
		{"line 0", []Edit{{Line: 0, Delete: true}}, "", true},
		{"line past the end", []Edit{{Line: 4, From: "a"}}, "", true},
		{"insert far past the end", []Edit{{Line: 6, Insert: "x\n"}}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Apply([]byte(pkg), tc.edits)
			if tc.err {
				if !errors.Is(err, ErrEdit) {
					t.Fatalf("Apply = %q, %v; want ErrEdit", got, err)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("Apply = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
