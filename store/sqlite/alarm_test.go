package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/runseal/runseal/store/storetest"
)

func TestWitnessAlarms(t *testing.T) {
	storetest.CheckWitnessAlarms(t, open(t, filepath.Join(t.TempDir(), "j.db"), Options{}))
}
