package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestAuditorLinksNoServer keeps the auditor's binary to what checking
// needs: the API's server, the publisher, the witness server, Prometheus
// and a SQLite engine once came in through package api, their package
// initialisation ran in every auditor command (about a tenth of a 245 MB
// verification's CPU), and each is code an auditor need not trust.
func TestAuditorLinksNoServer(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool to list the auditor's packages")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, banned := range []string{
			"github.com/runseal/runseal/api/server",
			"github.com/runseal/runseal/publish",
			"github.com/runseal/runseal/witness",
			"github.com/prometheus/client_golang/prometheus",
			"modernc.org/sqlite",
		} {
			if pkg == banned || strings.HasPrefix(pkg, banned+"/") {
				t.Errorf("the auditor links %s", pkg)
			}
		}
	}
}
