package audit

import (
	"encoding/json"
	"io"

	"github.com/runseal/runseal/disclosure"
	"github.com/runseal/runseal/store/sealed"
)

// Output is the JSON report of one package's verification: what
// `auditor verify --json` prints and what the browser verifier offers for
// download. It is one type so that the two cannot drift apart.
type Output struct {
	File     string `json:"file"`
	ExitCode int    `json:"exit_code"`
	*disclosure.Report
	Sealing *sealed.Inspection `json:"sealing,omitempty"` // nil: nothing sealed, nothing erased
}

// WriteJSON writes o as `auditor verify --json` does: indented, with HTML
// characters left as they are, one object and a newline.
func (o Output) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(o)
}
