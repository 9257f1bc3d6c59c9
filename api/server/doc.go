// Package server answers the journal's HTTP API (spec/http.md) over one or
// more tenants' stores: the Server, its bearer tokens, and the reads the
// operator console shares with its JSON twins. The client and the wire
// types live in package api, which this package imports and never the
// other way round.
//
// Invariants the Server keeps:
//   - every request but GET /healthz is authenticated by a bearer token
//     (Authenticate), except the public read surface when Config.Public;
//     a token reaches one tenant, with the role reader or writer;
//   - one switch (answer) maps an error to its status; store failures that
//     are not the caller's are logged and answered without their detail; a
//     failure the client caused (internal/blame) is 400 and logged at DEBUG;
//   - every request body is bounded and parsed strictly (duplicate keys,
//     case-folded names, trailing data and invalid UTF-8 are refused);
//   - one answer holds a bounded number of bytes of records
//     (Config.MaxRecordsBytes), and the store reads at most one record
//     past that bound; a sealed journal opens nothing to answer them;
//   - at most Config.MaxHeavyReads such answers are in progress at once;
//     a request over it waits briefly, then is answered 503;
//   - checkpoint answers carry Cache-Control: no-store, and every answer
//     X-Content-Type-Options: nosniff.
//
// The operator console (package console) is rendered from the same reads
// that answer its JSON twins here (StatusRoutes, TokenRoute: /v1/status,
// /v1/activity, /v1/runs/{run}/status, /v1/disclosures, /v1/tokens,
// /v1/studies), so a script sees what a person sees; a Meter, wrapped
// around the Server, counts the appends and seals it commits.
package server
