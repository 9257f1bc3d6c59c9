package memstore_test

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/runseal/runseal/lifecycle/lifecycletest"
	"github.com/runseal/runseal/lifecycle/memstore"
)

func TestMemStorageConformance(t *testing.T) {
	lifecycletest.Run(t, func() (lifecycletest.Backend, error) {
		return memstore.New(), nil
	})
}

func TestMemStorageMatchesModel(t *testing.T) {
	lifecycletest.RunModel(t, func(*rapid.T) (lifecycletest.Backend, func() lifecycletest.Backend) { return memstore.New(), nil })
}
