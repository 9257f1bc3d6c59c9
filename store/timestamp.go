package store

import (
	"fmt"
	"time"
)

// ParseTimestamp reads a timestamp in the one profile of RFC 3339 that
// spec/records.md section 5.1 allows in record fields:
//
//	YYYY-MM-DDTHH:MM:SS[.F](Z|+HH:MM|-HH:MM)
//
// with an upper-case T and Z, 1 to 9 fraction digits, hours 00-23, minutes
// and seconds 00-59 (no leap second), an offset of at most 23:59, and a date
// that exists. time.Parse alone is looser (it takes +24:00, +00:60 and ten
// fraction digits), and every verifier must refuse the same timestamps the
// store refuses, so the profile is checked here, character by character.
func ParseTimestamp(s string) (time.Time, error) {
	bad := func(why string) (time.Time, error) {
		q := s
		if len(q) > 40 {
			q = q[:40] + "..."
		}
		return time.Time{}, fmt.Errorf("%q is not an RFC 3339 timestamp of the profile: %s", q, why)
	}
	digits := func(i, n int) (int, bool) {
		if i+n > len(s) {
			return 0, false
		}
		v := 0
		for _, c := range []byte(s[i : i+n]) {
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int(c-'0')
		}
		return v, true
	}
	if len(s) < 20 {
		return bad("too short")
	}
	if _, ok := digits(0, 4); !ok || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return bad("want YYYY-MM-DDTHH:MM:SS with an upper-case T")
	}
	h, ok1 := digits(11, 2)
	m, ok2 := digits(14, 2)
	sec, ok3 := digits(17, 2)
	if _, ok := digits(5, 2); !ok || !ok1 || !ok2 || !ok3 {
		return bad("want YYYY-MM-DDTHH:MM:SS")
	}
	if h > 23 || m > 59 || sec > 59 {
		return bad("hour, minute or second out of range (no leap second)")
	}
	i := 19
	if s[i] == '.' {
		j := i + 1
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == i+1 || j-i-1 > 9 {
			return bad("1 to 9 fraction digits")
		}
		i = j
	}
	switch rest := s[i:]; {
	case rest == "Z":
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		oh, ok1 := digits(i+1, 2)
		om, ok2 := digits(i+4, 2)
		if !ok1 || !ok2 || oh > 23 || om > 59 {
			return bad("offset out of range (at most 23:59)")
		}
	default:
		return bad("want Z (upper case) or an offset +HH:MM or -HH:MM")
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return bad("no such date")
	}
	return t, nil
}
