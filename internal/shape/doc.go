// Package shape holds no code: its test checks that the module's
// packages depend on one another the way the folder map says (README.md,
// "Folder map"), so that the shape cannot erode unnoticed. The rules
// apply to the packages, not to their tests (a test may wire what its
// package must not import: server/web's tests start the /v1 server).
//
//   - Dependencies point downward, layer by layer: cmd → server →
//     server/* → server/httpapi, server/receipt → probe → probe/*,
//     egress → resolver, the storage backends → the leaves (internal,
//     dnsbl, the storage contract, the wire formats). A package may
//     import its own layer or lower ones, never a higher one.
//   - No package imports github.com/verifyd/verifyd/server but the
//     commands that wire it.
//   - server/httpapi, server/receipt, server/conns and the wire formats
//     are leaves of server/: they import nothing else of it (httpapi
//     only conns).
//   - server/batch and server/webhook, the work below HTTP, depend on
//     neither fasthttp nor server, directly or through another package.
//   - The storage backends import only the contract (and their own test
//     helpers theirs); only the commands and the benchmarks import a
//     backend: everything else reaches storage through the contract.
package shape
