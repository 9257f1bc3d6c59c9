package server

import (
	"testing"

	"github.com/runseal/runseal/api"
)

// FuzzDecodeStrict: no body makes the strict decoder panic, and a body it
// accepts names only members of the request.
func FuzzDecodeStrict(f *testing.F) {
	f.Add([]byte(`{"owner":"w","epoch":1,"ttl_seconds":30}`))
	f.Add([]byte(`{"owner":"w","owner":"x"}`))
	f.Add([]byte(`{"Owner":"w"}`))
	f.Add([]byte("{\"owner\":\"\xff\"}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var req api.LeaseRequest
		if err := decodeStrict(b, &req); err != nil {
			return
		}
		var again api.LeaseRequest
		if err := decodeStrict(b, &again); err != nil || again != req {
			t.Fatalf("accepted once, not twice: %v", err)
		}
	})
}
