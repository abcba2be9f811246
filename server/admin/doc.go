// Package admin is verifyd's operator API: HTTP/JSON on a unix socket, the
// API verifyctl talks to. It creates accounts, sets their plan and credits,
// mints and revokes API keys (spec §5), shows and rotates the per-account
// webhook secret (spec §6), and rotates the receipt signing key (spec §9).
// The wire types and a Go client are in adminapi; README.md lists the routes.
//
// Security: the socket's file mode is the authentication. There is no token
// and no TLS; whoever can connect(2) to the socket is the operator:
//
//  1. Listen creates the socket inside a fresh directory of mode 0700 next
//     to the wanted path, sets it to mode 0600, and only then renames it
//     into place, so there is no moment at which another user could
//     connect. The parent directory is created with mode 0700 when missing.
//     Only the socket's owner (the verifyd user) and root can connect.
//  2. A stale socket (a verifyd that died without removing it) is replaced;
//     a live one (another verifyd answering on it) or a file that is not a
//     socket is left alone and Listen fails.
//  3. Every change is logged at info level with the peer's uid and pid
//     (SO_PEERCRED on Linux). Secrets are never logged: not API keys (the
//     log names them by prefix), not webhook secrets, not request bodies;
//     request lines name the route pattern, not the path as sent.
//
// A request flows: fasthttp → the access log and metrics → fasthttp/router
// → a HandlerFunc, which decodes its body strictly (DecodeJSON: one JSON
// object, no unknown member), validates it reporting every problem in
// details.issues, calls storage or the receipt key set, and returns the
// value to answer with, or an error that WriteError maps to the envelope of
// spec §2.11 (BAD_REQUEST, NOT_FOUND, CONFLICT, INTERNAL).
//
// The webhook routes come with Options.Webhooks (webhooks.go); other
// features add routes through Options.Extra with JSON, DecodeJSON and
// WriteError, or as HandlerFuncs in this package.
package admin
