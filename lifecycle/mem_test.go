package lifecycle_test

import (
	"testing"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/lifecycletest"
)

func TestMemStorageConformance(t *testing.T) {
	lifecycletest.Run(t, func() (lifecycletest.Backend, error) {
		return lifecycle.NewMemStorage(), nil
	})
}
