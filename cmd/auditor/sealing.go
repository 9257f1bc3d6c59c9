package main

import (
	"fmt"
	"io"

	"github.com/runseal/runseal/store/sealed"
)

// sealingOf is the inspection to report, or nil for a package with no
// sealed field and no recorded erasure (nothing to say).
func sealingOf(in *sealed.Inspector) *sealed.Inspection {
	r := in.Inspection()
	if r.SealedFields == 0 && len(r.Erasures) == 0 {
		return nil
	}
	return &r
}

// printSealing tells the auditor which fields are sealed and which are
// erased: their bytes verified above like any others, but no key will open
// an erased field again.
func printSealing(w io.Writer, r *sealed.Inspection) {
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
