// Package tamper applies the tampered changes of spec/vectors/disclosure.json
// to the package vector: the edits a verifier's tests and its fuzz target
// both start from. It imports nothing of the journal, so a test binary that
// uses it links no store.
package tamper

import (
	"bytes"
	"errors"
	"fmt"
)

// ErrEdit is the class of an edit that does not fit the package it is
// applied to.
var ErrEdit = errors.New("edit does not apply")

// Edit replaces the first occurrence of From in line Line by To, or, with
// Delete, removes the line, or, with Insert, puts Insert (whole lines, each
// ending in a line feed) before line Line (one past the last line appends).
// Line numbers always refer to the original file, from 1; a line keeps its
// line feed, so From and To may include it.
type Edit struct {
	Line   int    `json:"line"`
	From   string `json:"from,omitempty"`
	To     string `json:"to,omitempty"`
	Delete bool   `json:"delete,omitempty"`
	Insert string `json:"insert,omitempty"`
}

// Lines splits b into its lines, each keeping its line feed (the last
// may lack one).
func Lines(b []byte) [][]byte {
	ls := bytes.SplitAfter(b, []byte("\n"))
	if len(ls) > 0 && len(ls[len(ls)-1]) == 0 {
		ls = ls[:len(ls)-1]
	}
	return ls
}

// Apply returns pkg with edits applied; pkg is not changed. An edit naming
// a line pkg does not have, or a From its line does not hold, is an error
// (ErrEdit).
func Apply(pkg []byte, edits []Edit) ([]byte, error) {
	ls := Lines(pkg)
	del := map[int]bool{}
	ins := map[int][]byte{}
	for _, e := range edits {
		i := e.Line - 1
		switch {
		case i < 0 || i > len(ls) || (i == len(ls) && e.Insert == ""):
			return nil, fmt.Errorf("%w: line %d of a package of %d lines", ErrEdit, e.Line, len(ls))
		case e.Insert != "":
			ins[i] = append(ins[i], e.Insert...)
		case e.Delete:
			del[i] = true
		default:
			if !bytes.Contains(ls[i], []byte(e.From)) {
				return nil, fmt.Errorf("%w: line %d has no %q", ErrEdit, e.Line, e.From)
			}
			ls[i] = bytes.Replace(ls[i], []byte(e.From), []byte(e.To), 1)
		}
	}
	var out []byte
	for i := 0; i <= len(ls); i++ {
		out = append(out, ins[i]...)
		if i < len(ls) && !del[i] {
			out = append(out, ls[i]...)
		}
	}
	return out, nil
}
