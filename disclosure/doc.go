// Package disclosure moves runseal history out of a journal and checks it
// on the other side: whole exports and restores, disclosure packages
// (selected runs and cases, with inclusion proofs against a witnessed
// checkpoint), the register of acts of disclosure, and the offline
// verification an auditor runs on a package.
//
// Both file kinds are JSON Lines in the format of spec/disclosure.md: a
// header, a block per run followed by that run's records with their exact
// stored bytes, and a trailer with the counts, so a cut file is told apart
// from a whole one. Every line is canonical JSON and has one spelling.
//
//   - Export writes every run and every sealed run's log position; Restore
//     replays an export through the ordinary Append and Seal and succeeds
//     only if the rebuilt log has the exported size and root.
//   - WritePackage writes a package against a signed checkpoint; Disclose
//     writes it to a private staging file, records the act in a Register,
//     then moves the file into place.
//   - Verify checks a package with nothing but the log's key and a witness
//     policy, and reports what it proved, what it found, and what a package
//     cannot prove.
//
// Export, WritePackage and Verify stream: their memory does not grow with
// the number of records or the size of the file. Verify spreads its work
// over the machine's cores (up to four workers, a fixed number of 256 KiB
// chunks in flight) and reaches the same verdict, findings and order as a
// single pass would: workers' results are taken only for the exact bytes
// they examined and, for a chain hash, only when it chained from the hash
// the verifier itself recomputed.
package disclosure
