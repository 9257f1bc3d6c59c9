package log_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/runseal/runseal/log"
)

// A journal seals two runs, publishes the root at size 2, and later proves
// to an auditor that the first run is in the log and that size 1 was a
// prefix of size 2.
func Example() {
	ctx := context.Background()
	var store log.MemStore
	a, b := sha256.Sum256([]byte("a")), sha256.Sum256([]byte("b"))

	root1, _ := log.Append(ctx, &store, 0, a)
	root2, _ := log.Append(ctx, &store, 1, b)
	fmt.Printf("root at size 2: %x\n", root2)

	p, _ := log.InclusionProof(ctx, &store, 0, 2)
	fmt.Println("a included:", log.VerifyInclusion(a, 0, 2, p, root2) == nil)

	c, _ := log.ConsistencyProof(ctx, &store, 1, 2)
	fmt.Println("size 1 is a prefix of size 2:", log.VerifyConsistency(1, 2, root1, root2, c) == nil)

	err := log.VerifyInclusion(b, 0, 2, p, root2)
	fmt.Println("b at index 0 refused:", errors.Is(err, log.ErrProofInvalid))
	// Output:
	// root at size 2: ad5ca6cddc0b27c6a83e332bf28011769236e6c6a1f786ebf7b5267b37a5bd22
	// a included: true
	// size 1 is a prefix of size 2: true
	// b at index 0 refused: true
}
