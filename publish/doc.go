// Package publish sends a log's signed checkpoints to the witnesses of a
// policy (C2SP tlog-witness) and keeps the cosignatures they return: the
// journal side of witnessing.
//
// A Publisher works from a durable outbox in the journal store (the Store
// interface, a subset of store.PublicationStore and the log's proofs), so
// a restart resumes where the last one stopped and nothing queued is lost.
// Invariants: a cosignature is kept only after it verified with the
// witness's key over the exact checkpoint sent; a checkpoint is marked
// witnessed only once the kept cosignatures pass the policy's own check
// (checkpoint.Policy.Verify), the auditor's; and a witness that disagrees
// with the log's history (ahead of the log, or behind what it already
// cosigned for us) raises an alarm rather than being treated as routine.
//
// The witness server and its client are package witness; this package
// uses only the client.
package publish
