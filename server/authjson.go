package server

import "github.com/verifyd/verifyd/probe"

// addAuth fills the auth object and its flat copies from the engine's
// authentication signals, when the engine reported them.
func addAuth(rec *receiptJSON, r *probe.Result) {}
