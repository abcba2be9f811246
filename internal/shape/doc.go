// Package shape holds no code: its test checks that the module's
// packages depend on one another the way the folder map says (README.md,
// "Folder map"), so that the shape cannot erode unnoticed.
//
//   - Dependencies point downward, layer by layer: cmd → server → probe →
//     resolver, egress → storage and the leaves (internal, dnsbl, the
//     contract of storage). A package may import its own layer or lower
//     ones, never a higher one.
//   - No package imports github.com/verifyd/verifyd/server but the
//     commands that wire it.
//   - server/batch and server/webhook, the work below HTTP, import neither
//     fasthttp nor server, directly or through another package.
//   - The storage backends import only the contract (and their own test
//     helpers theirs): never the engine, the front half, or each other.
package shape
