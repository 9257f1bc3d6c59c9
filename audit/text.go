package audit

import (
	"fmt"
	"io"
	"strings"

	"github.com/runseal/runseal/disclosure"
	"github.com/runseal/runseal/store/sealed"
)

// Exit statuses of auditor verify, the same for every auditor command:
// scripts branch on them, and the verify page names them.
const (
	ExitSound        = 0 // everything checked holds
	ExitNotSound     = 1 // something checked is false or inconsistent: evidence of tampering or corruption
	ExitUsage        = 2 // the command line (the keys, the policy) was wrong; nothing was verified
	ExitUnverifiable = 3 // no verdict: a cut file, an unknown format, keys or a policy that cannot establish the checkpoint, a read error
)

// ExitCode is the exit status auditor verify ends with for verdict v.
func ExitCode(v disclosure.Verdict) int {
	switch v {
	case disclosure.Sound:
		return ExitSound
	case disclosure.NotSound:
		return ExitNotSound
	}
	return ExitUnverifiable
}

// ExitMeaning says in a few words what an exit status of auditor verify
// means.
func ExitMeaning(code int) string {
	switch code {
	case ExitSound:
		return "sound: everything checked holds"
	case ExitNotSound:
		return "not sound: something is false or inconsistent (tampering or corruption)"
	case ExitUsage:
		return "usage error: nothing was verified"
	case ExitUnverifiable:
		return "incomplete or unverifiable: a cut file, an unknown format or version, keys or a policy that cannot establish the checkpoint, a read error"
	}
	return fmt.Sprintf("exit status %d", code)
}

// Headline is the verdict as the report's first line words it.
func Headline(v disclosure.Verdict) string {
	switch v {
	case disclosure.Sound:
		return "SOUND"
	case disclosure.NotSound:
		return "NOT SOUND: the package is tampered or inconsistent"
	}
	return "UNVERIFIABLE: no verdict could be reached"
}

// Summary is the one-line verdict auditor verify ends with on stderr
// (after "auditor: <file>: ") when it is not sound: "NOT SOUND",
// "UNVERIFIABLE".
func Summary(v disclosure.Verdict) string {
	return strings.ToUpper(strings.ReplaceAll(string(v), "_", " "))
}

// WriteReport writes the report auditor verify prints for file: the
// verdict first, then what was read, the findings, what was proven, what
// was not checked, and, when s is not nil, the sealed and erased fields
// (Sealing).
func WriteReport(w io.Writer, file string, r *disclosure.Report, s *sealed.Inspection) {
	fmt.Fprintf(w, "%s: %s\n", file, Headline(r.Verdict))
	fmt.Fprintf(w, "  file        %d bytes, %d lines, sha256 %s\n", r.Counts.Bytes, r.Counts.Lines, r.SHA256)
	if cr := r.Checkpoint; cr != nil {
		WriteNote(w, &disclosure.NoteCheck{Report: *cr})
		c := r.Counts
		fmt.Fprintf(w, "  read        %d runs (%d sealed, %d unsealed), %d records, %d case blocks; %s\n",
			c.Runs, c.Sealed, c.Unsealed, c.Records, c.Cases, yesNo(r.Complete, "complete through the trailer", "NOT complete"))
		fmt.Fprintf(w, "  selection   %d runs, %d cases\n", len(r.SelectedRuns), len(r.SelectedCases))
	}
	if st := r.Statement; st != nil {
		if st.Verified {
			fmt.Fprintf(w, "  statement   signed for %q by disclosure key %s, and it covers this package\n", st.Recipient, strings.Join(st.Keys, ", "))
		} else {
			fmt.Fprintf(w, "  statement   NOT verified (recipient as stated: %q)\n", st.Recipient)
		}
	}
	if len(r.Findings) > 0 {
		fmt.Fprintf(w, "\nFindings (%d):\n", len(r.Findings)+r.FindingsOmitted)
		for _, f := range r.Findings {
			where := fmt.Sprintf("line %d", f.Line)
			if f.Run != "" {
				where += " run " + f.Run
			}
			if f.Seq != 0 {
				where += fmt.Sprintf(" seq %d", f.Seq)
			}
			fmt.Fprintf(w, "  - [%s] %s: %s\n", f.Check, where, f.Detail)
		}
		if r.FindingsOmitted > 0 {
			fmt.Fprintf(w, "  ... and %d more\n", r.FindingsOmitted)
		}
	}
	list := func(title string, items []string) {
		if len(items) == 0 {
			return
		}
		fmt.Fprintf(w, "\n%s:\n", title)
		for _, it := range items {
			fmt.Fprintf(w, "  - %s\n", it)
		}
	}
	list("Not established", r.Unverifiable)
	list("Proven", r.Proven)
	list("Not checked (a package cannot prove these)", r.NotChecked)
	WriteSealing(w, s)
}

// WriteNote writes one paragraph on what a check of a signed checkpoint
// established: origin, size and root, the log signature, and each
// witness's cosignature against the quorum.
func WriteNote(w io.Writer, nc *disclosure.NoteCheck) {
	cr := nc.Report
	fmt.Fprintf(w, "  checkpoint  %s  size %d  root %s\n", cr.Origin, cr.Size, cr.Root)
	fmt.Fprintf(w, "  log signature  %s\n", yesNo(cr.LogSigned, "verified", "NOT verified"))
	if len(cr.Witnesses) == 0 && !cr.QuorumMet {
		return
	}
	n := 0
	for _, wr := range cr.Witnesses {
		if wr.Cosigned {
			n++
		}
	}
	fmt.Fprintf(w, "  witnesses      %d of %d cosigned, quorum %s\n", n, len(cr.Witnesses), yesNo(cr.QuorumMet, "met", "NOT met"))
	for _, wr := range cr.Witnesses {
		switch {
		case wr.Invalid:
			fmt.Fprintf(w, "    %-24s INVALID signature\n", wr.Name)
		case wr.Cosigned:
			fmt.Fprintf(w, "    %-24s cosigned at %s (its clock)\n", wr.Name, wr.Time.UTC().Format("2006-01-02T15:04:05Z"))
		default:
			fmt.Fprintf(w, "    %-24s no cosignature\n", wr.Name)
		}
	}
}

// Sealing is the inspection to report, or nil for a package with no sealed
// field and no recorded erasure (nothing to say).
func Sealing(in *sealed.Inspector) *sealed.Inspection {
	r := in.Inspection()
	if r.SealedFields == 0 && len(r.Erasures) == 0 {
		return nil
	}
	return &r
}

// WriteSealing tells the auditor which fields are sealed and which are
// erased: their bytes verified like any others, but no key will open an
// erased field again. It writes nothing for a nil inspection.
func WriteSealing(w io.Writer, r *sealed.Inspection) {
	if r == nil {
		return
	}
	fmt.Fprintf(w, "sealing: %d sealed fields (their bytes verify; reading them needs the journal's key ring), %d of them erased\n", r.SealedFields, r.ErasedFields)
	for _, e := range r.Erasures {
		fmt.Fprintf(w, "  erasure of %s at %s by %s (%s), recorded in run %s: %d fields erased; reason: %q\n",
			e.Scope, e.At, e.Actor.Actor, e.Actor.Basis, e.Run, e.Fields, e.Reason)
	}
	for _, x := range r.Erased {
		fmt.Fprintf(w, "  erased: run %s seq %d fields %v\n", x.Run, x.Seq, x.Fields)
	}
	if r.ErasedOmitted > 0 {
		fmt.Fprintf(w, "  ... and %d more records with erased fields\n", r.ErasedOmitted)
	}
	if r.ErasuresOmitted > 0 {
		fmt.Fprintf(w, "  ... and %d more recorded erasures (counted above)\n", r.ErasuresOmitted)
	}
	if r.UnattributedFields > 0 {
		fmt.Fprintf(w, "  %d sealed fields lie under scopes beyond the first %d and are not attributed to any erasure: the erased counts above are lower bounds\n", r.UnattributedFields, sealed.MaxScopes)
	}
}

func yesNo(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}
