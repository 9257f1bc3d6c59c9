package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/runseal/runseal/keyring"
	"github.com/runseal/runseal/keyring/pkcs11"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sealed"
)

// sealedMarker is the admission key of the run that marks a journal as
// sealed: a fact in the chain and the log, looked up through the admission
// index, so a journal remembers it is sealed however it is opened.
const sealedMarker = "runseal/sealed-journal"

// sealingState is the --keyring state of one invocation.
type sealingState struct {
	spec string // --keyring: a directory, or a pkcs11: URI
	cmd  string // the command running, to know whether it needs the keys
}

// needsKeys are the commands that read or write callers' data: on a sealed
// journal they refuse to start without the key ring, and never write in the
// clear. The rest (verify, export, restore, disclose, proofs, seals,
// leases) work on the stored bytes with no key.
var needsKeys = map[string]bool{"serve": true, "append": true, "read": true, "erase": true}

// marksSealed are the commands whose first run with --keyring marks the
// journal sealed: the ones that write callers' data. (Not restore: it
// needs an empty target, and an export of a sealed journal carries its
// marker run.)
var marksSealed = map[string]bool{"serve": true, "append": true, "erase": true}

// addSealing registers --keyring and the erase command on root.
func (a *app) addSealing(root *cobra.Command) {
	root.PersistentFlags().StringVar(&a.sealing.spec, "keyring", "",
		"key ring of a sealed journal: a directory kept apart from the journal and its backups, or pkcs11:token=T?module-path=M.so (PIN from pin-source= or $RUNSEAL_PKCS11_PIN)")
	prev := root.PersistentPreRunE
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		a.sealing.cmd = cmd.Name()
		if prev != nil {
			return prev(cmd, args)
		}
		return nil
	}
	root.AddCommand(a.eraseCmd())
}

// openRing opens the key ring --keyring names.
func openRing(spec string) (keyring.Ring, func() error, error) {
	if strings.HasPrefix(spec, "pkcs11:") {
		c, err := pkcs11.ParseURI(spec)
		if err != nil {
			return nil, nil, usageErrorf("--keyring: %v", err)
		}
		r, err := pkcs11.Open(c)
		if err != nil {
			return nil, nil, fmt.Errorf("--keyring: %w", err)
		}
		return r, r.Close, nil
	}
	r, err := keyring.OpenFile(spec)
	if err != nil {
		return nil, nil, fmt.Errorf("--keyring: %w", err)
	}
	return r, r.Close, nil
}

// sealedStore is a journal behind the sealing decorator; closing it closes
// the key ring too.
type sealedStore struct {
	*sealed.Journal
	closeRing func() error
}

func (s sealedStore) Close() error {
	err := s.Journal.Close()
	if cerr := s.closeRing(); err == nil {
		err = cerr
	}
	return err
}

// withSealing puts an opened journal behind the key ring when --keyring is
// given, and refuses a sealed journal without one for a command that needs
// the keys. A journal first written with --keyring is marked sealed. On
// error s is left open, for the caller to close.
func (a *app) withSealing(ctx context.Context, s journalStore) (journalStore, error) {
	_, marked, err := s.AdmittedAs(ctx, sealedMarker)
	if err != nil {
		return nil, err
	}
	if a.sealing.spec == "" {
		if marked && needsKeys[a.sealing.cmd] {
			return nil, usageErrorf("this journal is sealed: %q reads or writes sealed data and needs its key ring; pass --keyring DIR or --keyring pkcs11:...", a.sealing.cmd)
		}
		return s, nil
	}
	ring, closeRing, err := openRing(a.sealing.spec)
	if err != nil {
		return nil, err
	}
	if !marked && marksSealed[a.sealing.cmd] {
		if err := markSealed(ctx, s); err != nil {
			closeRing()
			return nil, fmt.Errorf("mark the journal sealed: %w", err)
		}
	}
	j := sealedStore{Journal: sealed.New(s, ring, sealed.Options{}), closeRing: closeRing}
	if b, ok := j.WithBulk(); ok {
		return sealedBulkStore{sealedStore: j, bulk: b}, nil // export pages as the store does
	}
	return j, nil
}

// asSealed returns the sealed journal behind j, if j is one.
func asSealed(j any) (sealedStore, bool) {
	switch s := j.(type) {
	case sealedStore:
		return s, true
	case sealedBulkStore:
		return s.sealedStore, true
	}
	return sealedStore{}, false
}

// sealedBulkStore is a sealed journal whose store reads runs in bulk.
type sealedBulkStore struct {
	sealedStore
	bulk *sealed.Bulk
}

func (s sealedBulkStore) ScanRuns(ctx context.Context, page *store.RunsPage, after store.RunCursor, limit, maxBytes int) error {
	return s.bulk.ScanRuns(ctx, page, after, limit, maxBytes)
}

// ringCheckRuns is how many of each tenant's most recently written runs
// serve checks the key ring against before it starts (sealed.CheckRing).
const ringCheckRuns = 64

// sealStores is withSealing for each of serve's tenant views, in place.
// A key ring that lacks the scopes a tenant's records are sealed under is
// refused before serving, naming them: started, the server would answer
// 500 to every read that opens those records.
func (a *app) sealStores(ctx context.Context, stores []journalStore) error {
	for i, s := range stores {
		ws, err := a.withSealing(ctx, s)
		if err != nil {
			return fmt.Errorf("tenant %s: %w", s.Tenant(), err)
		}
		if ss, ok := asSealed(ws); ok {
			if err := ss.CheckRing(ctx, ringCheckRuns); err != nil {
				ss.closeRing()
				if errors.Is(err, sealed.ErrScopesMissing) {
					return usageErrorf("--keyring %s: %v", a.sealing.spec, err)
				}
				return err
			}
		}
		stores[i] = ws
	}
	return nil
}

// markSealed writes the marker run: admitted under sealedMarker, concluded
// and sealed into the log. A racing marker by another process is fine.
func markSealed(ctx context.Context, s store.Journal) error {
	run := store.NewRunID()
	l, err := s.Acquire(ctx, run, "journal-keyring", time.Minute)
	if err != nil {
		return err
	}
	_, err = s.Append(ctx, l.Epoch, []store.Append{
		{Run: run, Kind: store.KindRunAdmitted, Fields: []byte(`{"admission_key":"` + sealedMarker + `","source":"journal"}`)},
		{Run: run, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)},
	})
	var dup *store.DuplicateAdmissionError
	if errors.As(err, &dup) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = s.Seal(ctx, run, l.Epoch, "succeeded")
	return err
}

func (a *app) eraseCmd() *cobra.Command {
	var caseArg, runArg, reason, actor string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "erase (--case C | --run R) --reason WHY --keyring DIR",
		Short: "Crypto-erase a case (or a run's caseless records): destroy its key and record the act",
		Long: `Erase destroys the scope key of a case (or of a run's records that carry no
case) in the key ring, which makes every sealed field of those records
unreadable in every copy of the journal, backups included, while the chain,
run seals, the Merkle log and every proof still verify. The act (who, when,
which scope, why) is then recorded as a ScopeErased record, stamped with the
case, in a run of its own that is concluded and sealed into the log.

Erasing a scope the key ring never had is an error (wrong --keyring, or
nothing of that case was ever sealed). Erasing an erased scope succeeds,
says so, and records nothing. An erased case never gets a key again: later
appends to it are refused.

Erasure is only as strong as the key ring's separation: a backup that holds
the key ring directory holds the keys.`,
		Example: `  journal erase --case 01J9Z8Q4W5X6Y7Z8A9B0C1D2E3 --reason "GDPR art. 17 request 4711" --keyring /var/lib/runseal/keys
  journal erase --run 01J9Z8Q4W5X6Y7Z8A9B0C1D2E4 --reason "retention expired" --actor ops@example.com --keyring pkcs11:token=runseal?module-path=/usr/lib/softhsm/libsofthsm2.so --json`,
		Args: cobra.NoArgs,
		RunE: wrapRun(func(cmd *cobra.Command, _ []string) error {
			if a.sealing.spec == "" {
				return usageErrorf("erase needs the key ring: pass --keyring DIR or --keyring pkcs11:...")
			}
			if (caseArg == "") == (runArg == "") {
				return usageErrorf("give exactly one of --case and --run")
			}
			if reason == "" {
				return usageErrorf("--reason is required: the erasure record says why")
			}
			op := store.Operator{Actor: actor, Basis: store.Asserted}
			if op.Actor == "" {
				op.Actor = os.Getenv("USER")
				if op.Actor == "" {
					op.Actor = "unknown"
				}
			}
			return a.withStore(cmd.Context(), func(s journalStore) error {
				ss, ok := asSealed(s)
				if !ok {
					return errors.New("erase: the journal is not behind the key ring")
				}
				var scope string
				if caseArg != "" {
					c, err := store.ParseCaseID(caseArg)
					if err != nil || c.IsZero() {
						return usageErrorf("--case %q is not a case id (a 26-character ULID, optionally prefixed case_)", caseArg)
					}
					scope = sealed.CaseScope(ss.Tenant(), c)
				} else {
					r, err := parseRunArg(runArg)
					if err != nil {
						return err
					}
					scope = sealed.RunScope(ss.Tenant(), r)
				}
				res, err := ss.Erase(cmd.Context(), sealed.Erasure{Scope: scope, Actor: op, Reason: reason})
				if errors.Is(err, keyring.ErrUnknownScope) {
					return fmt.Errorf("scope %s is unknown to this key ring: nothing of it was ever sealed here, or --keyring names another ring", scope)
				}
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(a.stdout, res)
				}
				if res.Already {
					_, err = fmt.Fprintf(a.stdout, "scope %s was already erased; nothing changed\n", scope)
					return err
				}
				_, err = fmt.Fprintf(a.stdout, "erased scope %s; the act is recorded in run %s (log leaf %s)\n", scope, res.Run, res.Leaf)
				return err
			})
		}),
	}
	cmd.Flags().StringVar(&caseArg, "case", "", "the case to erase")
	cmd.Flags().StringVar(&runArg, "run", "", "the run whose caseless records to erase")
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded in the clear, in the chain)")
	cmd.Flags().StringVar(&actor, "actor", "", "who asks (recorded as asserted; default $USER)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

// openedFormatter formats records of a sealed journal for journal read:
// the stored bytes (raw, which the hash covers) beside the opened body, in
// which an erased field reads {"$erased":"<scope>"}, and the names of the
// erased fields. Text: "SEQ KIND HASH OPENED-BODY", then "  erased: a,b"
// when any field is erased.
func (s sealedStore) openedFormatter(ctx context.Context) func(b []byte, r store.Record, asJSON bool) ([]byte, error) {
	return func(b []byte, r store.Record, asJSON bool) ([]byte, error) {
		fs, err := s.Fields(ctx, r)
		if err != nil {
			return nil, err
		}
		var erased []string
		for _, f := range fs {
			if f.State == sealed.Erased {
				erased = append(erased, f.Name)
			}
		}
		opened, err := store.EncodeBody(store.Body{Seq: r.Seq, Run: r.Run, Case: r.Case, Step: r.Step, Phase: r.Phase,
			EffectKey: r.EffectKey, Epoch: r.Epoch, V: r.V, Kind: r.Kind, Fields: r.Fields})
		if err != nil {
			return nil, &store.CorruptError{Run: r.Run, Seq: r.Seq, Detail: "opened fields do not encode: " + err.Error()}
		}
		if !asJSON {
			b = fmt.Appendf(b, "%d\t%s\t%s\t%s\n", r.Seq, r.Kind, r.Hash, opened)
			if len(erased) > 0 {
				b = fmt.Appendf(b, "  erased: %s\n", strings.Join(erased, ","))
			}
			return b, nil
		}
		b = appendRecord(b, r, true)
		b = b[:len(b)-2] // reopen the object: drop "}\n"
		b = append(b, `,"opened":`...)
		b = append(b, opened...)
		b = append(b, `,"erased":[`...)
		for i, e := range erased {
			if i > 0 {
				b = append(b, ',')
			}
			q, _ := json.Marshal(e)
			b = append(b, q...)
		}
		return append(b, "]}\n"...), nil
	}
}
