package server

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/publish"
	"github.com/runseal/runseal/store"
)

// CheckpointInfo is a signed checkpoint as GET /v1/status shows it.
type CheckpointInfo struct {
	Size       uint64    `json:"size"`
	Root       string    `json:"root"` // standard base64
	SignedAt   time.Time `json:"signed_at"`
	AgeSeconds int64     `json:"age_seconds"` // now - signed_at
	Note       string    `json:"note"`        // the signed note, cosignatures included when witnessed
	// CosignedBy names the policy's witnesses whose cosignature the note
	// carries (witnessed checkpoints only), with the time each signed.
	CosignedBy []Cosigner `json:"cosigned_by,omitempty"`
}

// Cosigner is one witness's valid cosignature on a checkpoint.
type Cosigner struct {
	Witness string    `json:"witness"` // its name in the policy
	At      time.Time `json:"at"`      // the cosignature's own timestamp
}

// WitnessStatus is one witness of the policy as the publisher left it.
type WitnessStatus struct {
	Name string `json:"name"` // its name in the policy
	ID   string `json:"id"`   // "<key name>+<key ID>", as the store keys it
	URL  string `json:"url,omitempty"`
	// Cosigned is false until the witness cosigned any checkpoint of ours;
	// then LastCosigned is the largest size it cosigned and CosignedAt its
	// cosignature's timestamp.
	Cosigned     bool       `json:"cosigned"`
	LastCosigned uint64     `json:"last_cosigned"`
	CosignedAt   *time.Time `json:"cosigned_at,omitempty"`
	// LagEntries is how many leaves the newest signed checkpoint has that
	// the witness has not cosigned; LagSeconds how much older the
	// checkpoint it last cosigned is than the newest signed one (for a
	// witness that never cosigned: the newest one's age).
	LagEntries uint64 `json:"lag_entries"`
	LagSeconds int64  `json:"lag_seconds"`
	// Pending is the publication waiting for this witness, with its
	// attempts and last error; nil when it is up to date.
	Pending *store.Publication `json:"pending,omitempty"`
	// Ahead: the last attempt found the witness at a size beyond the whole
	// log. It saw another log under our origin: an alarm.
	Ahead bool `json:"ahead"`
	// Alarms kept for this witness (a witness that went backwards).
	Alarms []store.WitnessAlarm `json:"alarms,omitempty"`
}

// LogStatus answers GET /v1/status: the tenant's log, its newest signed
// and newest witnessed checkpoints, and each witness's state. It is the
// console's Log page.
type LogStatus struct {
	Tenant string    `json:"tenant"`
	Origin string    `json:"origin"`
	Now    time.Time `json:"now"`
	// Size and Root are the log as it stands, signed or not yet.
	Size      uint64          `json:"size"`
	Root      string          `json:"root"`
	Signed    *CheckpointInfo `json:"signed"`    // null: nothing signed yet
	Witnessed *CheckpointInfo `json:"witnessed"` // null: nothing witnessed yet
	// Policy is the witness policy in tlog-policy form, "" when none is
	// configured; Quorum its quorum line.
	Policy    string          `json:"policy,omitempty"`
	Quorum    string          `json:"quorum,omitempty"`
	Witnesses []WitnessStatus `json:"witnesses"`
	// Alarms are every witness alarm kept for the tenant, oldest first,
	// including those of witnesses no longer in the policy.
	Alarms []store.WitnessAlarm `json:"alarms"`
}

// alarmStore finds the store.AlarmStore behind s, looking through
// decorators that expose the store they wrap (Inner), since a decorator
// need not forward it.
func alarmStore(s any) store.AlarmStore {
	for range 8 {
		if as, ok := s.(store.AlarmStore); ok {
			return as
		}
		in, ok := s.(interface{ Inner() store.Journal })
		if !ok {
			return nil
		}
		s = in.Inner()
	}
	return nil
}

func checkpointInfo(sc *store.SignedCheckpoint, now time.Time) *CheckpointInfo {
	if sc == nil {
		return nil
	}
	return &CheckpointInfo{Size: sc.Size, Root: api.EncodeHash(sc.Root), SignedAt: sc.SignedAt.UTC(),
		AgeSeconds: int64(now.Sub(sc.SignedAt) / time.Second), Note: string(sc.Note)}
}

// ReadLogStatus reads t's LogStatus as of now.
func ReadLogStatus(ctx context.Context, t *Tenant, now time.Time) (LogStatus, error) {
	st := LogStatus{Tenant: t.Store.Tenant(), Origin: t.Store.Origin(), Now: now.UTC(), Witnesses: []WitnessStatus{}, Alarms: []store.WitnessAlarm{}}
	cur, err := t.Store.Checkpoint(ctx)
	if err != nil {
		return st, err
	}
	st.Size, st.Root = cur.Size, api.EncodeHash(cur.Root)
	signed, err := t.Store.LatestCheckpoint(ctx)
	if err != nil {
		return st, err
	}
	st.Signed = checkpointInfo(signed, now)
	wit, err := t.Store.LatestWitnessed(ctx)
	if err != nil {
		return st, err
	}
	st.Witnessed = checkpointInfo(wit, now)
	if as := alarmStore(t.Store); as != nil {
		alarms, err := as.WitnessAlarms(ctx)
		if err != nil {
			return st, err
		}
		st.Alarms = append(st.Alarms, alarms...)
	}
	p := t.Policy
	if p == nil {
		return st, nil
	}
	if txt, err := p.MarshalText(); err == nil {
		st.Policy = string(txt)
		lines := strings.Split(strings.TrimSpace(st.Policy), "\n")
		st.Quorum = lines[len(lines)-1]
	}
	if wit != nil {
		if ev, err := p.Evaluate(wit.Note); err == nil {
			for _, w := range ev.Witnesses {
				if w.Cosigned {
					st.Witnessed.CosignedBy = append(st.Witnessed.CosignedBy, Cosigner{Witness: w.Name, At: w.Time})
				}
			}
		}
	}
	for _, w := range p.Witnesses() {
		ws, err := witnessStatus(ctx, t, p, w, signed, now)
		if err != nil {
			return st, err
		}
		for _, a := range st.Alarms {
			if a.Witness == ws.ID {
				ws.Alarms = append(ws.Alarms, a)
			}
		}
		st.Witnesses = append(st.Witnesses, ws)
	}
	return st, nil
}

// publications is what a witness's state is read from: the publisher's
// outbox (store.PublicationStore).
type publications interface {
	LastCosigned(ctx context.Context, witness string) (uint64, bool, error)
	NextPublication(ctx context.Context, witness string) (*store.Publication, error)
}

func witnessStatus(ctx context.Context, t *Tenant, p *checkpoint.Policy, w checkpoint.Witness, newest *store.SignedCheckpoint, now time.Time) (WitnessStatus, error) {
	ws := WitnessStatus{Name: w.Name, ID: publish.WitnessID(w.Verifier), URL: w.URL}
	ps, err := storeAs[publications](t, "witness publications")
	if err != nil {
		return ws, err
	}
	last, ok, err := ps.LastCosigned(ctx, ws.ID)
	if err != nil {
		return ws, err
	}
	ws.Cosigned, ws.LastCosigned = ok, last
	if newest != nil {
		if newest.Size > last {
			ws.LagEntries = newest.Size - last
		}
		ws.LagSeconds = int64(now.Sub(newest.SignedAt) / time.Second)
	}
	if ok {
		sc, err := t.Store.SignedCheckpointAt(ctx, last)
		if err != nil {
			return ws, err
		}
		cos, err := t.Store.Cosignatures(ctx, last)
		if err != nil {
			return ws, err
		}
		if sc != nil {
			ws.LagSeconds = 0
			if newest != nil && newest.SignedAt.After(sc.SignedAt) {
				ws.LagSeconds = int64(newest.SignedAt.Sub(sc.SignedAt) / time.Second)
			}
			msg := append(append([]byte(nil), sc.Note...), cos[ws.ID]...)
			if ev, err := p.Evaluate(msg); err == nil {
				for _, r := range ev.Witnesses {
					if r.Name == w.Name && r.Cosigned {
						at := r.Time
						ws.CosignedAt = &at
					}
				}
			}
		}
	}
	pub, err := ps.NextPublication(ctx, ws.ID)
	if err != nil {
		return ws, err
	}
	ws.Pending = pub
	// The publisher keeps a failed attempt's error as text; a witness ahead
	// of the log is the one failure that is an alarm without a kept alarm
	// row, and its text starts with the sentinel's.
	ws.Ahead = pub != nil && strings.HasPrefix(pub.LastError, publish.ErrWitnessAhead.Error())
	return ws, nil
}

func getStatus(w http.ResponseWriter, r *http.Request, t *Tenant) error {
	st, err := ReadLogStatus(r.Context(), t, time.Now())
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, st)
	return nil
}
