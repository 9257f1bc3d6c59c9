// Package api is the client side of the journal's HTTP API (spec/http.md):
// the Client that speaks it and the wire types and refusal classes every
// party shares. The server that answers it is package api/server.
//
// The package is kept apart from the server so that a reader of the API
// (the auditor's monitor, a script) links the client and the wire types
// only: not the server's metrics, the publisher, the witness client or a
// SQLite engine, whose package initialisation would otherwise run in every
// auditor command.
//
// Invariants the Client keeps:
//   - it follows a redirect only to the same scheme and host, so a server
//     cannot move its trust or its bearer token elsewhere (ErrRedirect);
//   - every answer is read up to a bound, and a non-2xx answer becomes an
//     *Error whose status class errors.Is matches;
//   - the URLs it logs or names in errors are redacted (Redact).
package api
