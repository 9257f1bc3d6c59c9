package postgres

import (
	"testing"

	"github.com/runseal/runseal/store/storetest"
)

func TestWitnessAlarms(t *testing.T) {
	storetest.CheckWitnessAlarms(t, openStore(t, Options{}))
}
