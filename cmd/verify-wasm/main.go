//go:build js && wasm

// Command verify-wasm is auditor verify compiled to WebAssembly for the
// /verify page (package verifypage embeds the build): the same
// disclosure.Verify, key resolution and report text (package audit) as the
// CLI, run in the browser on a File read in slices, so a package of any size
// is verified in bounded memory and nothing is uploaded.
//
// It defines two JavaScript functions on globalThis:
//
//	runsealVerify({file, name, logKeys, witnessKeys, quorum, policy,
//	               policyName, disclosureKeys, onProgress}) -> Promise<result>
//	runsealCancel()
//
// The key fields hold keys separated by white space (one a line); policy
// holds a tlog-policy file's text. onProgress(bytesRead, total) is called
// as the file is read. The result carries verdict, exitCode, exitMeaning,
// headline, summary, report (the text auditor verify prints), json (the
// report as auditor verify --json prints it, less the file name), sha256,
// bytes, and error (a usage or read error, as the CLI words it on stderr).
//
// Build: GOOS=js GOARCH=wasm go build -trimpath -ldflags='-s -w' (go generate
// ./verifypage does it and copies the toolchain's wasm_exec.js beside it).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall/js"

	"github.com/runseal/runseal/audit"
	"github.com/runseal/runseal/disclosure"
	"github.com/runseal/runseal/store/sealed"
)

// chunkSize is how much of the file is read at once: large enough that the
// promise per slice costs little, small enough that memory stays flat.
const chunkSize = 1 << 20

func main() {
	v := &verifier{}
	js.Global().Set("runsealVerify", js.FuncOf(v.start))
	js.Global().Set("runsealCancel", js.FuncOf(func(js.Value, []js.Value) any {
		if v.cancel != nil {
			v.cancel()
		}
		return nil
	}))
	select {} // serve calls from the page for as long as it lives
}

// verifier runs one verification at a time; JavaScript calls it on its one
// thread, so no lock is needed.
type verifier struct {
	cancel context.CancelFunc
}

// start answers runsealVerify: it returns a Promise at once and verifies in
// a goroutine, which yields to the page whenever it waits for a slice.
func (v *verifier) start(_ js.Value, args []js.Value) any {
	if len(args) != 1 || args[0].Type() != js.TypeObject {
		return js.Global().Get("Promise").Call("reject", js.Global().Get("Error").New("runsealVerify takes one object"))
	}
	p := args[0]
	if v.cancel != nil {
		v.cancel()
	}
	ctx, cancel := context.WithCancel(context.Background())
	v.cancel = cancel
	var handler js.Func
	handler = js.FuncOf(func(_ js.Value, pargs []js.Value) any {
		resolve := pargs[0]
		go func() {
			defer handler.Release()
			defer cancel()
			resolve.Invoke(js.ValueOf(verify(ctx, p)))
		}()
		return nil
	})
	return js.Global().Get("Promise").New(handler)
}

// verify is auditor verify's RunE for the page: resolve the keys, verify
// the stream with the sealing inspector, word the report.
func verify(ctx context.Context, p js.Value) map[string]any {
	name := str(p, "name")
	if name == "" {
		name = "package"
	}
	keys := audit.Keys{
		Logs:       strings.Fields(str(p, "logKeys")),
		Witnesses:  strings.Fields(str(p, "witnessKeys")),
		Disclosure: strings.Fields(str(p, "disclosureKeys")),
	}
	if q := p.Get("quorum"); q.Type() == js.TypeNumber {
		keys.Quorum = q.Int()
	}
	if pol := str(p, "policy"); strings.TrimSpace(pol) != "" {
		keys.Policy, keys.PolicyName = []byte(pol), str(p, "policyName")
	}
	tr, err := keys.Trust()
	if err != nil {
		return map[string]any{"exitCode": audit.ExitUsage, "exitMeaning": audit.ExitMeaning(audit.ExitUsage), "error": err.Error()}
	}
	file := p.Get("file")
	if file.Type() != js.TypeObject || file.Get("size").Type() != js.TypeNumber {
		return map[string]any{"exitCode": audit.ExitUsage, "exitMeaning": audit.ExitMeaning(audit.ExitUsage), "error": "no package file was given"}
	}
	r := &blobReader{blob: file, size: int64(file.Get("size").Float())}
	if cb := p.Get("onProgress"); cb.Type() == js.TypeFunction {
		r.progress = func(n int64) { cb.Invoke(float64(n), float64(r.size)) }
	}
	opts := tr.Options
	var insp sealed.Inspector
	opts.OnRecord, opts.RecordFilter = insp.Add, sealed.Relevant // as auditor verify
	rep, verr := disclosure.Verify(ctx, r, opts)
	sealing := audit.Sealing(&insp)
	var text strings.Builder
	audit.WriteReport(&text, name, rep, sealing)
	code := audit.ExitCode(rep.Verdict)
	out := map[string]any{
		"verdict":     string(rep.Verdict),
		"exitCode":    code,
		"exitMeaning": audit.ExitMeaning(code),
		"headline":    audit.Headline(rep.Verdict),
		"summary":     audit.Summary(rep.Verdict),
		"report":      text.String(),
		"sha256":      rep.SHA256,
		"bytes":       float64(rep.Counts.Bytes),
	}
	// As auditor verify --json prints it.
	var jsonText strings.Builder
	if err := (audit.Output{File: name, ExitCode: code, Report: rep, Sealing: sealing}).WriteJSON(&jsonText); err == nil {
		out["json"] = jsonText.String()
	}
	if verr != nil {
		if errors.Is(verr, context.Canceled) {
			verr = errors.New("cancelled")
		}
		out["error"] = fmt.Sprintf("%s: %v", name, verr)
	}
	return out
}

func str(v js.Value, field string) string {
	f := v.Get(field)
	if f.Type() != js.TypeString {
		return ""
	}
	return f.String()
}

// blobReader reads a Blob (a File) in slices of chunkSize through
// Blob.slice and arrayBuffer, one slice in memory at a time.
type blobReader struct {
	blob     js.Value
	size     int64
	off      int64 // bytes fetched from the blob
	buf      []byte
	pending  []byte
	progress func(int64)
}

func (r *blobReader) Read(p []byte) (int, error) {
	if len(r.pending) == 0 {
		if r.off >= r.size {
			return 0, io.EOF
		}
		end := min(r.off+chunkSize, r.size)
		ab, err := await(r.blob.Call("slice", float64(r.off), float64(end)).Call("arrayBuffer"))
		if err != nil {
			return 0, fmt.Errorf("reading the file at byte %d: %w", r.off, err)
		}
		u8 := js.Global().Get("Uint8Array").New(ab)
		n := u8.Length()
		if n == 0 {
			// The file changed under the page (shrank): a short read is a
			// cut file, never a silent end.
			return 0, io.ErrUnexpectedEOF
		}
		if cap(r.buf) < n {
			r.buf = make([]byte, n)
		}
		r.pending = r.buf[:js.CopyBytesToGo(r.buf[:n], u8)]
		r.off += int64(n)
		if r.progress != nil {
			r.progress(r.off)
		}
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

// await blocks the calling goroutine until promise settles; the page's
// event loop runs meanwhile.
func await(promise js.Value) (js.Value, error) {
	type result struct {
		v   js.Value
		err error
	}
	ch := make(chan result, 1)
	then := js.FuncOf(func(_ js.Value, args []js.Value) any {
		ch <- result{v: args[0]}
		return nil
	})
	defer then.Release()
	catch := js.FuncOf(func(_ js.Value, args []js.Value) any {
		msg := "rejected"
		if len(args) > 0 {
			msg = js.Global().Get("String").Invoke(args[0]).String()
		}
		ch <- result{err: errors.New(msg)}
		return nil
	})
	defer catch.Release()
	promise.Call("then", then, catch)
	res := <-ch
	return res.v, res.err
}
