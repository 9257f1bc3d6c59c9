package disclosure

import (
	"context"
	"errors"
	"testing"

	"github.com/runseal/runseal/internal/journaltest"
	"github.com/runseal/runseal/store"
)

type checkpoints struct{ latest, witnessed *store.SignedCheckpoint }

func (c checkpoints) LatestCheckpoint(context.Context) (*store.SignedCheckpoint, error) {
	return c.latest, nil
}

type publications struct{ checkpoints }

func (p publications) LatestWitnessed(context.Context) (*store.SignedCheckpoint, error) {
	return p.witnessed, nil
}

// TestLatestNote_PrefersWitnessed: the witnessed checkpoint is chosen when
// the journal keeps publications, the signed one otherwise, and a journal
// with neither says so.
func TestLatestNote_PrefersWitnessed(t *testing.T) {
	ctx := context.Background()
	signed := &store.SignedCheckpoint{Size: 5, Note: []byte("signed")}
	witnessed := &store.SignedCheckpoint{Size: 4, Note: []byte("witnessed")}
	for name, tc := range map[string]struct {
		j    CheckpointReader
		want string
		err  error
	}{
		"witnessed":             {publications{checkpoints{signed, witnessed}}, "witnessed", nil},
		"no witnessed yet":      {publications{checkpoints{signed, nil}}, "signed", nil},
		"no publication store":  {checkpoints{signed, witnessed}, "signed", nil},
		"nothing":               {publications{checkpoints{nil, nil}}, "", ErrNoCheckpoint},
		"nothing, no publisher": {checkpoints{nil, nil}, "", ErrNoCheckpoint},
	} {
		t.Run(name, func(t *testing.T) {
			n, err := LatestNote(ctx, tc.j)
			if !errors.Is(err, tc.err) || string(n) != tc.want {
				t.Fatalf("got %q, %v; want %q, %v", n, err, tc.want, tc.err)
			}
		})
	}
}

// TestVerifyAgainst_PolicyRequired: a checkpoint is accepted only with the
// log's signature and the policy met, and never without a policy.
func TestVerifyAgainst_PolicyRequired(t *testing.T) {
	const origin = "example.com/against"
	l := journaltest.NewLog(t, origin)
	vkey := l.VKey
	n := l.Note(t, 0, nil)
	none := journaltest.Policy(t, nil)
	one := journaltest.Policy(t, nil, journaltest.NewWitness(t, "witness.example"))
	if sc, err := VerifyAgainst(n, vkey, none); err != nil || sc.Checkpoint().Origin != origin {
		t.Fatalf("quorum none: %v", err)
	}
	var pe *CheckpointPolicyError
	if _, err := VerifyAgainst(n, vkey, one); !errors.Is(err, ErrCheckpointPolicy) || !errors.As(err, &pe) {
		t.Fatalf("unwitnessed against a witness policy: %v", err)
	}
	if _, err := VerifyAgainst(n, journaltest.NewLog(t, origin).VKey, none); !errors.Is(err, ErrCheckpointPolicy) {
		t.Fatalf("another log key: %v", err)
	}
	if _, err := VerifyAgainst(n, vkey, nil); err == nil {
		t.Fatal("no policy accepted")
	}
}
