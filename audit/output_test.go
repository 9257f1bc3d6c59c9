package audit

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/runseal/runseal/disclosure"
)

// TestOutputJSONShape pins the members scripts read from auditor verify
// --json (and from the browser verifier's download): the file and exit code
// beside the report's own members, sealing only when there is some, and
// HTML characters unescaped.
func TestOutputJSONShape(t *testing.T) {
	var buf bytes.Buffer
	o := Output{File: "<pkg>.jsonl", ExitCode: ExitNotSound, Report: &disclosure.Report{Verdict: disclosure.NotSound}}
	if err := o.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"file": "<pkg>.jsonl"`) {
		t.Errorf("file name escaped or missing:\n%s", buf.String())
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if m["exit_code"] != float64(ExitNotSound) || m["verdict"] != string(disclosure.NotSound) {
		t.Errorf("exit_code %v verdict %v, want %d %q", m["exit_code"], m["verdict"], ExitNotSound, disclosure.NotSound)
	}
	if _, ok := m["sealing"]; ok {
		t.Errorf("sealing present with nothing sealed: %v", m["sealing"])
	}
}
