// Package contract is verifyd's contract suite: black-box tests of the
// public HTTP API, written from the text of the service's specification
// and from nothing else.
//
// The tests build verifyd and verifyctl, start one simulated mail world
// (bench/world: DNS and SMTP servers on loopback) and one verifyd pointed
// at it, and then talk to verifyd over HTTP only, as a customer would.
// Accounts and keys are made with the verifyctl binary over the admin
// socket, as an operator would. The suite never imports the server's
// packages, never reads the OpenAPI document the code produces and never
// reads the docs: each expected value comes from a sentence of the
// specification, quoted in the test's comment, or from a decision the
// suite records (a comment beginning "Decision:") where the specification
// leaves a point open. TestIndependence checks the imports.
//
// Each test is named after the section of the specification it checks
// (TestSpec2_2..., TestSpec7...), so a handler change that breaks a
// promise fails a test that says which. README.md has the table of
// sections and tests (TestReadmeTable keeps it complete), the decisions,
// and what the suite cannot test.
//
// Run it with
//
//	go test -race ./contract/
package contract
