// Package monitor follows a transparency log and checks that it only ever
// grows: every signed checkpoint it serves must be consistent with the last
// one the monitor verified, kept in a state directory.
//
// A Follower reads the log through a Source: the journal's HTTP API
// (api.Client, spec/http.md section 3) or a C2SP tlog-tiles layout
// (TilesSource, spec/tiles.md). Each Check fetches the newest witnessed
// checkpoint, verifies the log's signature and the witness policy, and
// compares it with the saved one.
//
// Invariants:
//
//   - The saved checkpoint is replaced only by one that verified with the
//     keys and policy given and is proven consistent with it; it is written
//     atomically (write, fsync, rename, fsync the directory), so a crash
//     leaves the old state or the new one.
//   - The saved checkpoint is verified again on every check, so a state file
//     edited behind the monitor's back, or keys changed since, stop it
//     instead of misleading it.
//   - A fork is reported only on what the log signed: two signed checkpoints
//     that cannot both be true (the same size with another root, or a
//     consistency proof that reproduces the newer signed root but gives
//     another root for the saved size). A server's bad proof alone is no
//     verdict (Outcome BadProof), never a fork.
//   - A fork leaves self-contained Evidence in the state directory (both
//     signed notes, the proof, the keys and policy used), so anyone can
//     check it without the log.
//   - One Follower holds a state directory at a time (an exclusive lock
//     where the platform has flock).
//   - The first check trusts the checkpoint it finds (Outcome Started):
//     there is nothing earlier to compare it with.
package monitor
