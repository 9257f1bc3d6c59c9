package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/runseal/runseal/verifypage"
)

const webLong = `Write the package verification page as static files any web server can
host: index.html, verify.js, verify.css, wasm_exec.js and verify.wasm (this
auditor's verify, compiled to WebAssembly). Opened in a browser, the page
verifies a disclosure package in the browser, reading it from disk in slices
and uploading nothing, and shows the report auditor verify prints, with its
verdict and exit status. It is the page journal serve answers at /verify.

Files of those names in DIR are replaced; nothing else is touched. The
page's own Content-Security-Policy (a meta element) forbids inline and
foreign scripts; a meta element cannot forbid framing, so have the server
send the header printed below (the page also refuses to run in a frame).
Serve verify.wasm as application/wasm for the fastest start.`

func (a *app) webCmd() *cobra.Command {
	var out string
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "web --out DIR",
		Short:   "Write the in-browser package verification page as static files",
		Long:    webLong,
		Example: "  auditor web --out /var/www/verify\n  auditor web --out site --json",
		Args:    cobra.NoArgs,
		RunE: wrapRun(func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usageErrorf("--out DIR is required")
			}
			if err := verifypage.WriteFiles(out); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(a.stdout, struct {
					Dir   string   `json:"dir"`
					Files []string `json:"files"`
					CSP   string   `json:"content_security_policy"`
				}{out, verifypage.Files, verifypage.CSP})
			}
			for _, f := range verifypage.Files {
				fmt.Fprintln(a.stdout, filepath.Join(out, f))
			}
			fmt.Fprintf(a.stdout, "\nServe %s with the header:\n  Content-Security-Policy: %s\n", out, verifypage.CSP)
			return nil
		}),
	}
	cmd.Flags().StringVar(&out, "out", "", "the directory to write the page into (created if need be)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was written as JSON")
	return cmd
}
