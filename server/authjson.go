package server

import (
	"encoding/json"

	"github.com/verifyd/verifyd/probe"
)

// addAuth fills the auth object (spec §2.6) and its flat copies in checks
// (spec §2.5) from the engine's authentication signals. Signals the engine
// could not learn are left out, never guessed; without signals (no SMTP
// probe was made, or signals are off) auth is {}.
func addAuth(rec *receiptJSON, r *probe.Result) {
	if r.Auth == nil {
		return
	}
	b, err := json.Marshal(r.Auth)
	if err != nil {
		return
	}
	rec.Checks.Auth = b
	f := r.AuthFlat()
	rec.Checks.SPF, rec.Checks.DKIM, rec.Checks.DMARC = f.SPF, f.DKIM, f.DMARC
	rec.Checks.MTASTS, rec.Checks.SVCCertified = f.MTASTS, f.SVCCertified
}
