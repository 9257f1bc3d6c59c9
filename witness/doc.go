// Package witness implements a C2SP tlog-witness: a server that cosigns a
// log's checkpoints only if each is consistent with the last one it cosigned
// for that log, its durable state, and a client for log publishers.
//
// The normative description of what this witness does where the C2SP
// specification leaves a choice (rate limits, the monitoring read, log list
// import, state, status order) is spec/witness.md.
//
// # Serving
//
// A Store is the state in one SQLite file: the witnessed logs with their
// keys and rate limits, the latest checkpoint cosigned for each, and the
// evidence of refused inconsistent checkpoints. A Witness checks and
// cosigns add-checkpoint requests against it, with one or more
// cosignature/v1 keys (checkpoint.Cosigner); Witness.Handler serves it over
// HTTP:
//
//	st, err := witness.OpenStore(ctx, "witness.db", witness.StoreOptions{})
//	w, err := witness.New(ctx, st, []*checkpoint.Cosigner{c}, witness.Options{})
//	h, err := w.Handler("")
//	http.ListenAndServe("localhost:7380", h)
//
// The answer to an add-checkpoint request is sent only after the new
// checkpoint is on disk: concurrent requests for different logs share one
// transaction and one fsync (group commit), and requests for one log are
// serialized and committed as a compare-and-swap on (origin, size, root),
// so the witness cannot cosign two roots of one size.
//
// # Submitting
//
// A Client drives a witness from the log side:
//
//	c, err := witness.NewClient("https://witness.example", nil)
//	lines, err := c.AddCheckpoint(ctx, old, proof, signedNote)
//	var conflict *witness.ConflictError
//	if errors.As(err, &conflict) {
//		// the witness is at conflict.Size: send a proof from there
//	}
//
// The journal side of witnessing, an outbox of checkpoints published to
// the witnesses of a policy, is package publish, built on this Client.
//
// Errors on both sides wrap one sentinel per protocol outcome
// (ErrMalformedRequest, ErrUnknownLog, ErrNotTrusted, ErrConflict,
// ErrInconsistent, ErrRateLimited, ErrUnavailable), and StatusCode maps
// them to HTTP statuses.
package witness
