// Package wasmbuild builds cmd/verify-wasm to WebAssembly for the verify
// page and stamps what it was built from, so a test can tell a stale
// committed build without rebuilding it.
//
// The stamp hashes the js/wasm build's own source files (this module's
// packages it imports) and names the versions of the other modules; it
// leaves out the toolchain, so another Go version does not by itself make
// the committed build stale (the committed wasm_exec.js is the building
// toolchain's, and matches the binary whatever toolchain serves it).
package wasmbuild

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Package is the command built.
const Package = "github.com/runseal/runseal/cmd/verify-wasm"

// The files Build writes into its directory.
const (
	WasmGz   = "verify.wasm.gz"
	StampTxt = "verify.wasm.stamp"
	ExecJS   = "wasm_exec.js"
)

// Flags are the build's flags: no file paths of the building machine, no
// symbol table or DWARF (a third of the size).
var Flags = []string{"-trimpath", "-ldflags=-s -w"}

// Stamp is what a build was made from and what it made.
type Stamp struct {
	Toolchain string // go version, informative
	Sources   string // "sha256:<hex>" of the sources (Sources)
	Wasm      string // "sha256:<hex>" of the uncompressed binary
	Bytes     int64  // its size
}

// String is the stamp file's text.
func (s Stamp) String() string {
	return fmt.Sprintf("# Written by \"go generate ./verifypage\"; TestWasmCurrent checks it.\ntoolchain %s\nsources %s\nwasm %s %d bytes\n",
		s.Toolchain, s.Sources, s.Wasm, s.Bytes)
}

// ParseStamp reads a stamp file.
func ParseStamp(b []byte) (Stamp, error) {
	var s Stamp
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "toolchain":
			s.Toolchain = f[1]
		case len(f) == 2 && f[0] == "sources":
			s.Sources = f[1]
		case len(f) == 4 && f[0] == "wasm" && f[3] == "bytes":
			s.Wasm = f[1]
			if _, err := fmt.Sscan(f[2], &s.Bytes); err != nil {
				return s, fmt.Errorf("stamp: wasm size %q: %w", f[2], err)
			}
		}
	}
	if s.Sources == "" || s.Wasm == "" {
		return s, errors.New("stamp: no sources or wasm line")
	}
	return s, nil
}

// goCmd is the go command of the running toolchain when there is one.
func goCmd() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go"
}

// wasmEnv pins what else selects the code generated (GOWASM's optional
// instructions), so that one toolchain builds the same bytes everywhere.
func wasmEnv() []string {
	return append(os.Environ(), "GOOS=js", "GOARCH=wasm", "CGO_ENABLED=0", "GOWASM=")
}

func goOutput(ctx context.Context, env []string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, goCmd(), args...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// Sources hashes what the js/wasm build of Package is made of: the path
// and content of every Go and embedded file of this module's packages in
// it, and the path and version of every other module's package in it.
// The standard library is the toolchain's and is left out.
func Sources(ctx context.Context) (string, error) {
	out, err := goOutput(ctx, wasmEnv(), "list", "-deps", "-json=ImportPath,Dir,GoFiles,EmbedFiles,Standard,Module", Package)
	if err != nil {
		return "", err
	}
	type pkg struct {
		ImportPath string
		Dir        string
		GoFiles    []string
		EmbedFiles []string
		Standard   bool
		Module     *struct {
			Path    string
			Version string
			Main    bool
		}
	}
	var lines []string
	h := sha256.New()
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return "", err
		}
		switch {
		case p.Standard:
		case p.Module == nil:
			return "", fmt.Errorf("package %s has no module", p.ImportPath)
		case !p.Module.Main:
			lines = append(lines, fmt.Sprintf("module %s %s %s", p.ImportPath, p.Module.Path, p.Module.Version))
		default:
			names := append(slices.Clone(p.GoFiles), p.EmbedFiles...)
			slices.Sort(names)
			for _, n := range names {
				b, err := os.ReadFile(filepath.Join(p.Dir, n))
				if err != nil {
					return "", err
				}
				sum := sha256.Sum256(b)
				lines = append(lines, fmt.Sprintf("file %s/%s %x", p.ImportPath, n, sum))
			}
		}
	}
	slices.Sort(lines)
	for _, l := range lines {
		io.WriteString(h, l+"\n")
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// Build builds Package for js/wasm into dir: the binary gzipped
// (WasmGz), the toolchain's wasm_exec.js (ExecJS) and the stamp
// (StampTxt). It returns the stamp.
func Build(ctx context.Context, dir string) (Stamp, error) {
	var st Stamp
	ver, err := goOutput(ctx, os.Environ(), "env", "GOVERSION", "GOROOT")
	if err != nil {
		return st, err
	}
	env := strings.Fields(string(ver))
	if len(env) != 2 {
		return st, fmt.Errorf("go env GOVERSION GOROOT: %q", ver)
	}
	st.Toolchain = env[0]
	if st.Sources, err = Sources(ctx); err != nil {
		return st, err
	}
	tmp, err := os.MkdirTemp("", "verify-wasm-")
	if err != nil {
		return st, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "verify.wasm")
	if _, err := goOutput(ctx, wasmEnv(), append(append([]string{"build"}, Flags...), "-o", bin, Package)...); err != nil {
		return st, err
	}
	wasm, err := os.ReadFile(bin)
	if err != nil {
		return st, err
	}
	sum := sha256.Sum256(wasm)
	st.Wasm, st.Bytes = "sha256:"+hex.EncodeToString(sum[:]), int64(len(wasm))
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression) // no name, no time: the same bytes every build
	if err != nil {
		return st, err
	}
	if _, err := zw.Write(wasm); err != nil {
		return st, err
	}
	if err := zw.Close(); err != nil {
		return st, err
	}
	execJS, err := os.ReadFile(filepath.Join(env[1], "lib", "wasm", ExecJS))
	if err != nil {
		return st, err
	}
	for name, b := range map[string][]byte{WasmGz: gz.Bytes(), ExecJS: execJS, StampTxt: []byte(st.String())} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return st, err
		}
	}
	return st, nil
}

// Hash is "sha256:<hex>" of b, as a Stamp's Wasm.
func Hash(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
