package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/runseal/runseal/witness"
)

// defaultQPD is the daily quota add-log gives when --qpd is not set: one
// request a second on average, the most generous quota in the
// witness-network lists.
const defaultQPD = 86400

func (a *app) addLogCmd() *cobra.Command {
	var (
		c    witness.LogConfig
		keys []string
	)
	cmd := &cobra.Command{
		Use:   "add-log ORIGIN --key VKEY [--key VKEY]...",
		Short: "Start witnessing a log",
		Long: `Start witnessing the log whose checkpoints carry ORIGIN, at size 0: its first
checkpoint is cosigned from "old 0", whatever its size.

Each --key is a note verifier key (vkey) of the log, plain Ed25519 (type
0x01), such as the log's "<origin>+<key id>+<base64>" line; a checkpoint needs
a valid signature from one of them. A log is never removed, so an origin can
be added only once; to stop witnessing a log, remove its keys with del-key.
An origin equal to the witness's own name is refused.

--qpd is the number of add-checkpoint requests a day the log may make
(default 86400); --burst how many it may make at once (default the larger of
16 and one minute of its quota). Over that, the witness answers 429 with
Retry-After.`,
		Example: `  witness add-log log.example/acme --key 'log.example/acme+4f3e2a1b+AYk...'
  witness add-log 'go.sum database tree' --key 'sum.golang.org+033de0ae+Ac4...' --qpd 1440 --contact ops@example.com`,
		Args: cobra.ExactArgs(1),
		RunE: wrapRun(func(cmd *cobra.Command, args []string) error {
			c.Origin, c.Keys = args[0], keys
			if len(keys) == 0 {
				return usageErrorf("at least one --key is required: a log without keys can never be cosigned")
			}
			return a.withStore(cmd.Context(), func(st *witness.Store) error {
				if err := st.AddLog(cmd.Context(), c); err != nil {
					return err
				}
				_, err := fmt.Fprintf(a.stdout, "added log %q at size 0\n", c.Origin)
				return err
			})
		}),
	}
	f := cmd.Flags()
	f.StringArrayVar(&keys, "key", nil, "log verifier key (vkey), repeatable (required)")
	f.Int64Var(&c.QPD, "qpd", defaultQPD, "add-checkpoint requests per day")
	f.Int64Var(&c.Burst, "burst", 0, "requests allowed at once (default max(16, qpd/1440))")
	f.StringVar(&c.Contact, "contact", "", "how to reach the log's operator")
	return cmd
}

func (a *app) addKeyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "add-key ORIGIN VKEY",
		Short: "Add a verifier key to a log",
		Long: `Add a note verifier key (plain Ed25519, type 0x01) to a witnessed log, for a
key rotation: checkpoints signed by either key are accepted until the old one
is removed with del-key. A running witness accepts the key at once.`,
		Example: `  witness add-key log.example/acme 'log.example/acme+8a7b6c5d+AZx...'`,
		Args:    cobra.ExactArgs(2),
		RunE: wrapRun(func(cmd *cobra.Command, args []string) error {
			return a.withStore(cmd.Context(), func(st *witness.Store) error {
				if err := st.AddKey(cmd.Context(), args[0], args[1]); err != nil {
					return err
				}
				_, err := fmt.Fprintf(a.stdout, "added key to %q\n", args[0])
				return err
			})
		}),
	}
}

func (a *app) delKeyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "del-key ORIGIN VKEY",
		Short: "Remove a verifier key from a log",
		Long: `Remove a verifier key from a witnessed log. A running witness stops counting
its signatures at once: a request verified with it but not yet committed is
refused (403). Removing the last key disables the log; its state is kept, and
adding a key enables it again from where it was.`,
		Example: `  witness del-key log.example/acme 'log.example/acme+4f3e2a1b+AYk...'`,
		Args:    cobra.ExactArgs(2),
		RunE: wrapRun(func(cmd *cobra.Command, args []string) error {
			return a.withStore(cmd.Context(), func(st *witness.Store) error {
				if err := st.DelKey(cmd.Context(), args[0], args[1]); err != nil {
					return err
				}
				_, err := fmt.Fprintf(a.stdout, "removed key from %q\n", args[0])
				return err
			})
		}),
	}
}

func (a *app) setLimitsCmd() *cobra.Command {
	var qpd, burst int64
	cmd := &cobra.Command{
		Use:   "set-limits ORIGIN --qpd N [--burst N]",
		Short: "Change a log's rate limits",
		Long: `Set the daily quota (--qpd) and burst (--burst, default max(16, qpd/1440)) of
a witnessed log. A running witness applies them within a second.`,
		Example: `  witness set-limits log.example/acme --qpd 1440
  witness set-limits log.example/acme --qpd 86400 --burst 200`,
		Args: cobra.ExactArgs(1),
		RunE: wrapRun(func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("qpd") {
				return usageErrorf("--qpd is required")
			}
			return a.withStore(cmd.Context(), func(st *witness.Store) error {
				if err := st.SetLimits(cmd.Context(), args[0], qpd, burst); err != nil {
					return err
				}
				_, err := fmt.Fprintf(a.stdout, "set limits of %q\n", args[0])
				return err
			})
		}),
	}
	cmd.Flags().Int64Var(&qpd, "qpd", 0, "add-checkpoint requests per day (required)")
	cmd.Flags().Int64Var(&burst, "burst", 0, "requests allowed at once (default max(16, qpd/1440))")
	return cmd
}

// logJSON is a log as list-logs prints it.
type logJSON struct {
	Origin     string     `json:"origin"`
	OriginHash string     `json:"origin_hash"`
	Size       uint64     `json:"size"`
	RootHash   string     `json:"root_hash"`
	Keys       []string   `json:"keys"`
	QPD        int64      `json:"qpd"`
	Burst      int64      `json:"burst"`
	Contact    string     `json:"contact"`
	CosignedAt *time.Time `json:"cosigned_at"`
	AddedAt    time.Time  `json:"added_at"`
	Evidence   int        `json:"evidence"`
}

func (a *app) listLogsCmd() *cobra.Command {
	var origin string
	cmd := &cobra.Command{
		Use:   "list-logs",
		Short: "List the witnessed logs as JSON Lines",
		Long: `Print one JSON object per witnessed log, sorted by origin:

  {"origin", "origin_hash", "size", "root_hash", "keys", "qpd", "burst",
   "contact", "cosigned_at", "added_at", "evidence"}

size and root_hash (base64) are the latest checkpoint cosigned (0 and the
empty root if never); cosigned_at is null until then. origin_hash names the
log in the monitoring API. evidence counts the refused inconsistent
checkpoints kept for the log (see "witness evidence"); anything but 0 needs
a look.`,
		Example: `  witness list-logs
  witness list-logs --origin log.example/acme | jq .size`,
		Args: cobra.NoArgs,
		RunE: wrapRun(func(cmd *cobra.Command, _ []string) error {
			return a.withStore(cmd.Context(), func(st *witness.Store) error {
				var logs []witness.LogInfo
				if origin != "" {
					li, err := st.Log(cmd.Context(), origin)
					if err != nil {
						return err
					}
					logs = []witness.LogInfo{li}
				} else {
					var err error
					if logs, err = st.Logs(cmd.Context()); err != nil {
						return err
					}
				}
				for _, li := range logs {
					j := logJSON{
						Origin: li.Origin, OriginHash: witness.OriginHash(li.Origin), Size: li.Size,
						RootHash: base64.StdEncoding.EncodeToString(li.Root[:]), Keys: li.Keys,
						QPD: li.QPD, Burst: li.Burst, Contact: li.Contact, AddedAt: li.AddedAt, Evidence: li.Evidence,
					}
					if j.Keys == nil {
						j.Keys = []string{}
					}
					if !li.CosignedAt.IsZero() {
						t := li.CosignedAt
						j.CosignedAt = &t
					}
					if err := writeJSON(a.stdout, j); err != nil {
						return err
					}
				}
				return nil
			})
		}),
	}
	cmd.Flags().StringVar(&origin, "origin", "", "list only this log")
	return cmd
}

func (a *app) importLogsCmd() *cobra.Command {
	var force, asJSON bool
	cmd := &cobra.Command{
		Use:   "import-logs FILE",
		Short: "Add logs from a witness-network log list",
		Long: `Read a log list in the witness-network format (logs/v0; per log: vkey,
optional origin, qpd, contact) and add the logs the witness does not have, at
size 0. For logs it has, the quota and contact are updated.

The import is atomic. It never removes a log (one missing from the list is
kept), and it refuses the whole import if the list gives a known log another
key than the witness has, printing the changes: a list must not be able to
take over a log silently. --force replaces such keys; the logs' state is kept.
An origin equal to the witness's own name is refused.`,
		Example: `  curl -sO https://example.org/lists/staging/log-list-10qps-4klogs.1
  witness import-logs log-list-10qps-4klogs.1
  witness import-logs list.txt --force --json`,
		Args: cobra.ExactArgs(1),
		RunE: wrapRun(func(cmd *cobra.Command, args []string) error {
			f, err := os.Open(args[0])
			if err != nil {
				return err
			}
			data, err := io.ReadAll(io.LimitReader(f, witness.MaxLogListSize+1))
			f.Close()
			if err != nil {
				return err
			}
			list, err := witness.ParseLogList(data)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			return a.withStore(cmd.Context(), func(st *witness.Store) error {
				res, err := st.ImportLogs(cmd.Context(), list, force)
				if kce, ok := errors.AsType[*witness.KeyChangeError](err); ok {
					for _, c := range kce.Changes {
						fmt.Fprintf(a.stderr, "key change for %q: witness has %q, list has %q\n", c.Origin, c.Have, c.Listed)
					}
				}
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(a.stdout, importJSON(res))
				}
				_, err = fmt.Fprintf(a.stdout, "%d logs listed: %d added, %d updated, %d unchanged, %d rekeyed\n",
					len(list), len(res.Added), len(res.Updated), len(res.Unchanged), len(res.Rekeyed))
				return err
			})
		}),
	}
	cmd.Flags().BoolVar(&force, "force", false, "replace the keys of known logs whose listed key differs")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"added", "updated", "unchanged", "rekeyed"} as JSON`)
	return cmd
}

func importJSON(r *witness.ImportResult) any {
	type rekey struct {
		Origin string   `json:"origin"`
		Had    []string `json:"had"`
		Listed string   `json:"listed"`
	}
	out := struct {
		Added     []string `json:"added"`
		Updated   []string `json:"updated"`
		Unchanged []string `json:"unchanged"`
		Rekeyed   []rekey  `json:"rekeyed"`
	}{Added: r.Added, Updated: r.Updated, Unchanged: r.Unchanged, Rekeyed: []rekey{}}
	for _, k := range r.Rekeyed {
		out.Rekeyed = append(out.Rekeyed, rekey{k.Origin, k.Have, k.Listed})
	}
	for _, s := range []*[]string{&out.Added, &out.Updated, &out.Unchanged} {
		if *s == nil {
			*s = []string{}
		}
	}
	return out
}

func (a *app) evidenceCmd() *cobra.Command {
	var origin string
	cmd := &cobra.Command{
		Use:   "evidence",
		Short: "Print refused inconsistent checkpoints kept as evidence",
		Long: `Print, as JSON Lines, the validly signed checkpoints the witness refused
because they are inconsistent with what it had cosigned:

  kind "split_view": the log signed another root for a size the witness had
    cosigned. "note" and "known_note" are two checkpoints of one size with
    different roots, both signed by the log: proof that the log forked.
  kind "bad_proof": a larger checkpoint whose consistency proof failed;
    "proof" holds it. Alone it proves nothing (the proof may be wrong), but
    a fork looks like this.

Each line: {"origin", "kind", "size", "root_hash", "note", "known_size",
"known_root_hash", "known_note", "proof", "first_seen", "last_seen", "count"}.
Evidence is never deleted.`,
		Example: `  witness evidence
  witness evidence --origin log.example/acme | jq -r .note`,
		Args: cobra.NoArgs,
		RunE: wrapRun(func(cmd *cobra.Command, _ []string) error {
			return a.withStore(cmd.Context(), func(st *witness.Store) error {
				evs, err := st.Evidence(cmd.Context(), origin)
				if err != nil {
					return err
				}
				b64 := base64.StdEncoding.EncodeToString
				for _, ev := range evs {
					proof := make([]string, len(ev.Proof))
					for i, h := range ev.Proof {
						proof[i] = b64(h[:])
					}
					if err := writeJSON(a.stdout, map[string]any{
						"origin": ev.Origin, "kind": ev.Kind, "size": ev.Size, "root_hash": b64(ev.Root[:]), "note": string(ev.Note),
						"known_size": ev.KnownSize, "known_root_hash": b64(ev.KnownRoot[:]), "known_note": string(ev.KnownNote),
						"proof": proof, "first_seen": ev.FirstSeen, "last_seen": ev.LastSeen, "count": ev.Count,
					}); err != nil {
						return err
					}
				}
				return nil
			})
		}),
	}
	cmd.Flags().StringVar(&origin, "origin", "", "only this log's evidence")
	return cmd
}
