package main

import (
	"io"

	"github.com/runseal/runseal/audit"
	"github.com/runseal/runseal/store/sealed"
)

// sealingOf is the inspection to report, or nil for a package with no
// sealed field and no recorded erasure (nothing to say).
func sealingOf(in *sealed.Inspector) *sealed.Inspection { return audit.Sealing(in) }

// printSealing tells the auditor which fields are sealed and which are
// erased (audit.WriteSealing).
func printSealing(w io.Writer, r *sealed.Inspection) { audit.WriteSealing(w, r) }
