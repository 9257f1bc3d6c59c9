package disclosure

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

var errFuzzWrite = errors.New("the first reading accepted the file")

// refusingTarget is an empty journal that fails every write: a fuzzed
// restore runs its whole first reading against it.
type refusingTarget struct{ store.Journal }

func (refusingTarget) Seals() bool { return false }
func (refusingTarget) Head(context.Context, store.RunID) (store.Head, error) {
	return store.Head{}, nil
}
func (refusingTarget) RunsByID(context.Context, *store.RunID, int) ([]store.RunID, error) {
	return nil, nil
}
func (refusingTarget) AdmittedAs(context.Context, string) (store.RunID, bool, error) {
	return store.RunID{}, false, nil
}
func (refusingTarget) Checkpoint(context.Context) (store.Checkpoint, error) {
	return store.Checkpoint{Origin: testOrigin, Root: store.Digest(log.EmptyRoot())}, nil
}
func (refusingTarget) Append(context.Context, store.Epoch, []store.Append) ([]store.Record, error) {
	return nil, errFuzzWrite
}
func (refusingTarget) Seal(context.Context, store.RunID, store.Epoch, string) (store.Digest, error) {
	return store.Digest{}, errFuzzWrite
}

// FuzzRestore feeds arbitrary files to Restore's first reading (the
// parser, the on-disk log slots and the admission-key sort): it must never
// panic, and must either refuse with *RestoreRefusedError before any write
// or accept the file and go on to write it.
func FuzzRestore(f *testing.F) {
	_, pkg, exp := loadVectors(f)
	f.Add(exp)
	f.Add(pkg)
	ls := lines(exp)
	if len(ls) > 3 {
		f.Add(join(append([][]byte{ls[0], ls[2], ls[1]}, ls[3:]...)))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		_, err := Restore(context.Background(), refusingTarget{}, bytes.NewReader(in))
		var rr *RestoreRefusedError
		if err != nil && !errors.As(err, &rr) && !errors.Is(err, errFuzzWrite) {
			t.Fatalf("neither a refusal nor a write: %v", err)
		}
	})
}
