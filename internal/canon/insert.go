package canon

import "strconv"

// RawMember is a member to add to a canonical object by InsertMembers: a
// key that is plain (printable ASCII other than '"' and '\\', so it is
// written as it is) and a value that is already canonical JSON.
type RawMember struct {
	Key   string
	Value []byte
}

// InsertMembers appends to dst the canonical object obj with the members
// add inserted where canonical order puts them, and returns it. add must be
// in canonical key order, its keys plain and distinct, and its values
// canonical; at, if not nil, receives the offset in the returned slice of
// each added value (at[i] for add[i]). refuse, if not nil, is asked about
// the keys of obj as written between their quotes (a canonical key spells
// each character one way, so a plain name compares directly), in order
// until one is refused or added twice, and refuses obj by answering true.
//
// obj is checked as CheckObject does, so the result is canonical whenever
// add holds to its rules: it is what Marshal of the merged object writes,
// with no parse into a Value and no sort. A writer whose input is usually
// canonical already (the kind's fields of a record) builds its bytes in one
// pass this way, and takes the Value path only when obj is not canonical.
// An error is a *SyntaxError: obj is not a canonical object (its Offset
// locates the fault), holds a key of add, or holds a key refuse refuses
// (Offset 0 for these two: the key is named in the message).
func InsertMembers(dst, obj []byte, add []RawMember, at []int, refuse func(key []byte) bool) ([]byte, error) {
	base := len(dst)
	dst = append(dst, '{')
	next := 0 // the first member of add not yet written
	put := func(m RawMember) {
		if len(dst) > base+1 {
			dst = append(dst, ',')
		}
		dst = append(append(append(dst, '"'), m.Key...), '"', ':')
		if at != nil {
			at[next] = len(dst)
		}
		dst = append(dst, m.Value...)
		next++
	}
	var dup error
	err := CheckObject(obj, func(key, value []byte) {
		if refuse != nil && dup == nil && refuse(key) {
			dup = &SyntaxError{Msg: "key " + strconv.Quote(string(key)) + " is refused"}
		}
		for next < len(add) {
			cmp := compareCanonicalStrings([]byte(add[next].Key), key)
			if cmp > 0 {
				break
			}
			if cmp == 0 && dup == nil {
				dup = &SyntaxError{Msg: "key " + strconv.Quote(add[next].Key) + " is both in the object and added"}
			}
			put(add[next])
		}
		if len(dst) > base+1 {
			dst = append(dst, ',')
		}
		// key and value alias obj: a member is written as it stands.
		dst = append(append(append(dst, '"'), key...), '"', ':')
		dst = append(dst, value...)
	})
	if err != nil {
		return dst[:base], err
	}
	if dup != nil {
		return dst[:base], dup
	}
	for next < len(add) {
		put(add[next])
	}
	return append(dst, '}'), nil
}
