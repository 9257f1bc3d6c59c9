package audit

import (
	"strings"
	"testing"

	"github.com/runseal/runseal/disclosure"
)

func TestVerdictWording(t *testing.T) {
	tests := []struct {
		v        disclosure.Verdict
		code     int
		headline string
		summary  string
	}{
		{disclosure.Sound, ExitSound, "SOUND", "SOUND"},
		{disclosure.NotSound, ExitNotSound, "NOT SOUND: the package is tampered or inconsistent", "NOT SOUND"},
		{disclosure.Unverifiable, ExitUnverifiable, "UNVERIFIABLE: no verdict could be reached", "UNVERIFIABLE"},
		{disclosure.Verdict("bogus"), ExitUnverifiable, "UNVERIFIABLE: no verdict could be reached", "BOGUS"},
	}
	for _, tt := range tests {
		if got := ExitCode(tt.v); got != tt.code {
			t.Errorf("ExitCode(%q) = %d, want %d", tt.v, got, tt.code)
		}
		if got := Headline(tt.v); got != tt.headline {
			t.Errorf("Headline(%q) = %q, want %q", tt.v, got, tt.headline)
		}
		if got := Summary(tt.v); got != tt.summary {
			t.Errorf("Summary(%q) = %q, want %q", tt.v, got, tt.summary)
		}
	}
	for code := range 4 {
		if m := ExitMeaning(code); m == "" || strings.HasPrefix(m, "exit status") {
			t.Errorf("ExitMeaning(%d) = %q", code, m)
		}
	}
}

// TestWriteReportSections: the report leads with the verdict and lists the
// findings with where they are, then each section only when it has
// something to say.
func TestWriteReportSections(t *testing.T) {
	r := &disclosure.Report{
		Verdict: disclosure.NotSound,
		SHA256:  "abcd",
		Counts:  disclosure.Counts{Bytes: 10, Lines: 2},
		Checkpoint: &disclosure.CheckpointReport{Origin: origin, Size: 3, Root: "00", LogSigned: true,
			Witnesses: []disclosure.WitnessReport{{Name: "w1", Invalid: true}}},
		Findings:        []disclosure.Finding{{Check: disclosure.CheckRecordHash, Line: 7, Run: "R", Seq: 2, Detail: "bad"}},
		FindingsOmitted: 4,
		Proven:          []string{"p1"},
		NotChecked:      []string{"n1"},
	}
	var b strings.Builder
	WriteReport(&b, "pkg.jsonl", r, nil)
	got := b.String()
	for _, want := range []string{
		"pkg.jsonl: NOT SOUND: the package is tampered or inconsistent\n",
		"  file        10 bytes, 2 lines, sha256 abcd\n",
		"  checkpoint  example.com/log  size 3  root 00\n",
		"  witnesses      0 of 1 cosigned, quorum NOT met\n",
		"INVALID signature",
		"NOT complete",
		"\nFindings (5):\n  - [record_hash] line 7 run R seq 2: bad\n  ... and 4 more\n",
		"\nProven:\n  - p1\n",
		"\nNot checked (a package cannot prove these):\n  - n1\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "Not established") || strings.Contains(got, "sealing:") {
		t.Errorf("report has an empty section:\n%s", got)
	}
}
