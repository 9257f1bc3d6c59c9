package console

import (
	"strings"
	"testing"
	"time"
)

// TestAgeLabel_FutureIsClockSkewNotAgo: a checkpoint stamped a moment
// ahead of the server's clock reads "just now", further ahead it names the
// clock skew, and never "in the future ago"; past ages read "... ago".
func TestAgeLabel_FutureIsClockSkewNotAgo(t *testing.T) {
	for _, c := range []struct {
		sec  int64
		want string
	}{
		{-3 * 86400, "in the future (clock skew of 3d 00h)"},
		{-192, "in the future (clock skew of 3m 12s)"},
		{-61, "in the future (clock skew of 1m 01s)"},
		{-60, "just now"},
		{-1, "just now"},
		{0, "just now"},
		{1, "1s ago"},
		{42, "42s ago"},
		{192, "3m 12s ago"},
		{5*3600 + 2*60, "5h 02m ago"},
		{2*86400 + 4*3600, "2d 04h ago"},
	} {
		if got := agoText(c.sec); got != c.want {
			t.Errorf("agoText(%d) = %q, want %q", c.sec, got, c.want)
		}
	}
	// A lag across skewed clocks is no lag.
	for _, c := range []struct {
		sec  int64
		want string
	}{{-30, "0s"}, {0, "0s"}, {59, "59s"}, {60, "1m 00s"}} {
		if got := ageText(c.sec); got != c.want {
			t.Errorf("ageText(%d) = %q, want %q", c.sec, got, c.want)
		}
	}
}

// TestLogPage_CheckpointAheadOfClockNamesSkew: on a server whose clock is
// an hour behind the checkpoints' signer, the Log page names the skew
// instead of reading "(in the future ago)".
func TestLogPage_CheckpointAheadOfClockNamesSkew(t *testing.T) {
	f := newFixture(t)
	behind := f.with(func(c *Config) { c.Now = func() time.Time { return time.Now().Add(-time.Hour) } })
	_, body := behind.get("/console/log", f.reader)
	if !strings.Contains(body, "(in the future (clock skew of 59m") && !strings.Contains(body, "(in the future (clock skew of 1h 00m)") {
		t.Errorf("the Log page does not name the clock skew:\n%s", body)
	}
	if strings.Contains(body, "future ago") {
		t.Errorf("the Log page reads \"in the future ago\"")
	}
	if _, body = f.get("/console/log", f.reader); !strings.Contains(body, "ago)") && !strings.Contains(body, "(just now)") {
		t.Errorf("on a server with the signer's clock, the Log page gives no age:\n%s", body)
	}
}
