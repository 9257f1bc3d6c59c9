package store

import "testing"

// Issue 18 item 5: the timestamp profile of spec/records.md 5.1, where Go's
// time.Parse is looser (+24:00, +00:60, ten fraction digits).
func TestParseTimestamp_Profile(t *testing.T) {
	for s, ok := range map[string]bool{
		"2030-01-02T03:04:05Z":            true,
		"2030-01-02T03:04:05.123456789Z":  true,
		"2030-01-02T03:04:05+23:59":       true,
		"2030-01-02T03:04:05-00:30":       true,
		"0000-01-01T00:00:00Z":            true,
		"2030-01-02T03:04:05+24:00":       false,
		"2030-01-02T03:04:05+00:60":       false,
		"2030-01-02T03:04:05.1234567891Z": false,
		"2030-01-02t03:04:05Z":            false,
		"2030-01-02T03:04:05z":            false,
		"2030-01-02T23:59:60Z":            false,
		"2030-02-30T00:00:00Z":            false,
		"2030-01-02T03:04:05.Z":           false,
		"2030-01-02T03:04:05":             false,
		"2030-01-02 03:04:05Z":            false,
		"2030-01-02T24:00:00Z":            false,
		"+2030-01-02T03:04:05Z":           false,
	} {
		if _, err := ParseTimestamp(s); (err == nil) != ok {
			t.Errorf("ParseTimestamp(%q) = %v, want ok %v", s, err, ok)
		}
	}
}
