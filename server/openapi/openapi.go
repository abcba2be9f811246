// Package openapi holds openapi.json, the OpenAPI 3.1 description of
// verifyd's HTTP API: the /v1 routes of docs/api.md, the account surface (/auth/*,
// /dashboard/api/*) and the dashboard's pages. verifyd serves it at
// GET /openapi.json. It is written by hand and kept true by
// cmd/verifyd's TestOpenAPI: every route the router serves is in it,
// every route in it is served, and real answers validate against its
// schemas.
package openapi

import _ "embed"

// JSON is the document.
//
//go:embed openapi.json
var JSON []byte
