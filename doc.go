// Package runseal makes the history of durable workflow runs tamper-evident:
// an append-only hash-chained journal, a Merkle log of sealed runs, signed
// checkpoints cosigned by witnesses, and an offline auditor.
//
// The packages below this one hold the parts; this package holds nothing.
package runseal
