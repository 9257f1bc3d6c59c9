package groupcommit

import (
	"context"
	"errors"
	"testing"
)

var errFlush = errors.New("flush failed")

// With Durable set, no member hears anything before the flush does: a
// failed flush reaches every member of the attempt, the one whose write
// committed and the one refused alike (its refusal was read from state the
// flush did not make durable), through InDoubt. A writer that answered
// before the flush would give the first nil and the second its refusal.
func TestSQL_DurableFailureReachesEveryMember(t *testing.T) {
	db := rowsDB(t)
	errInDoubt := errors.New("in doubt")
	flushes := 0
	c := &SQL{
		DB:      db,
		Refused: func(err error) bool { return errors.Is(err, errRefused) },
		InDoubt: func(err error) error { return errors.Join(errInDoubt, err) },
		Durable: func(answer func(error)) {
			flushes++
			answer(errFlush)
		},
	}
	q := New(Config[Work]{Attempt: c.Attempt, Pipelined: true})
	t.Cleanup(q.Close)
	for _, w := range []Work{insert("a", nil, nil), insert("b", nil, errRefused)} {
		if err := q.Submit(context.Background(), w); !errors.Is(err, errInDoubt) || !errors.Is(err, errFlush) {
			t.Errorf("answer after a failed flush: %v, want the in-doubt error wrapping the flush's", err)
		}
	}
	if flushes != 2 {
		t.Errorf("%d flushes for two attempts, want 2", flushes)
	}
}

// A pipelined queue answers through Durable whenever it calls the answer,
// after the attempt returned: members wait for it, and the committer goes
// on to the next group meanwhile.
func TestSQL_DurableAnswersAfterTheAttempt(t *testing.T) {
	_, db, _ := sqlQueue(t)
	held := make(chan func(error), 4)
	c := &SQL{DB: db, Durable: func(answer func(error)) { held <- answer }}
	pq := New(Config[Work]{Attempt: c.Attempt, Pipelined: true})
	done := make(chan error, 2)
	go func() { done <- pq.Submit(context.Background(), insert("x", nil, nil)) }()
	first := <-held // the attempt has committed and returned its answers
	go func() { done <- pq.Submit(context.Background(), insert("y", nil, nil)) }()
	second := <-held // the next group committed while the first waits
	select {
	case err := <-done:
		t.Fatalf("a member was answered (%v) before its flush", err)
	default:
	}
	second(nil)
	first(nil)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	pq.Close()
	if got := rows(t, db); got != "[x y]" {
		t.Fatalf("rows %s", got)
	}
}
