//go:build ignore

// gen rebuilds assets/verify.wasm.gz, assets/wasm_exec.js and
// assets/verify.wasm.stamp: run it with "go generate ./verifypage" after
// changing anything the verifier is built from (TestWasmCurrent says when).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/runseal/runseal/verifypage/internal/wasmbuild"
)

func main() {
	st, err := wasmbuild.Build(context.Background(), "assets")
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	fmt.Printf("verifypage: built verify.wasm (%d bytes) with %s from sources %s\n", st.Bytes, st.Toolchain, st.Sources)
}
