package sqlite

import (
	"context"
	"database/sql"
	"runtime"
	"testing"
)

// holdWriter starts a write that holds the writer until release is called,
// and returns once the writer is inside it: writes submitted meanwhile
// queue, and are taken as one group when it ends. release fails the test
// if the holding write failed.
func holdWriter(t *testing.T, s *Store) (release func()) {
	t.Helper()
	entered, done := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- s.write(context.Background(), func(*sql.Tx) error { close(entered); <-done; return nil })
	}()
	<-entered
	return func() {
		t.Helper()
		close(done)
		if err := <-held; err != nil {
			t.Fatal(err)
		}
	}
}

// awaitQueued returns once n writes wait for s's writer: submitted in
// order, they are then in the group in that order.
func awaitQueued(s *Store, n int) {
	for s.writes.Waiting() != n {
		runtime.Gosched()
	}
}
