package storetest

// Tenancy: a handle names its tenant.

import (
	"github.com/runseal/runseal/store"
)

func checkTenant(t *T) {
	j, _ := t.Open()
	if j.Tenant() == "" {
		t.Errorf("Tenant() is empty; a store serves %q until told otherwise", store.DefaultTenant)
	}
}
