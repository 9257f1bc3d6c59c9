// Package checkpoint implements the signed state of a runseal log: C2SP
// tlog-checkpoint bodies, C2SP signed notes over them, witness cosignatures
// (C2SP tlog-cosignature, cosignature/v1) and witness policies (C2SP
// tlog-policy, k of n).
//
// The normative description of every format is spec/checkpoint.md, with test
// vectors in spec/vectors/checkpoint.json; this package is its reference
// implementation.
//
// # Checkpoints
//
// A Checkpoint is an origin, a tree size and a root hash, plus optional
// extension lines:
//
//	example.com/log/acme
//	20852163
//	CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=
//
// Parse accepts exactly what Marshal produces, so a body has one spelling
// and Parse(b).Marshal() == b. Coherent refuses the one well-formed body no
// honest log can produce, size 0 with a root other than EmptyRoot.
//
// # Signed notes
//
// Sign signs a checkpoint with log and witness keys through
// golang.org/x/mod/sumdb/note. Open verifies a note and returns a Signed
// holding only the signatures that verified: signatures by unknown keys are
// ignored and dropped, and a signature by a known key that fails rejects the
// note. Store and forward Signed.Note, never the input, because note.Sign
// re-emits every signature it was given, verified or not.
//
// # Cosignatures
//
// A Cosigner (note.Signer) and a CosignatureVerifier (note.Verifier)
// implement cosignature/v1: a witness's Ed25519 signature over
// "cosignature/v1\ntime <t>\n" and the checkpoint body, carried with the
// time t. Their keys are note keys of type 0x04.
//
// # Policies
//
// A Policy lists witness keys and a quorum, either k of n (NewThresholdPolicy)
// or a tlog-policy file (ParsePolicy, LoadPolicy). Policy.Evaluate reports
// which witnesses cosigned and when; Policy.Verify is the yes-or-no check an
// auditor needs: a valid log signature, no invalid signature from a known
// key, a coherent checkpoint and a met quorum.
//
// Nothing in this package does I/O except the Load functions, which read a
// file, and nothing panics on input.
package checkpoint
