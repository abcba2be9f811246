package server

import (
	"encoding/json"
	"time"

	"github.com/verifyd/verifyd/probe"
)

// receiptJSON is the signed receipt of spec §2.4. Every field is required;
// kid is set and sig added by the signer (package receipt), which signs the
// RFC 8785 form of everything else. Optional keys of checks without a
// value are omitted, not null (DESIGN.md).
type receiptJSON struct {
	Email            string     `json:"email"`
	Status           string     `json:"status"`
	Score            int        `json:"score"`
	Checks           checksJSON `json:"checks"`
	ProbedAt         string     `json:"probed_at"`
	LatencyMs        int64      `json:"latency_ms"`
	Kid              string     `json:"kid,omitempty"`
	CreditsRemaining int64      `json:"credits_remaining"`
	Cached           bool       `json:"cached"`
}

// checksJSON is spec §2.5's checks object.
type checksJSON struct {
	Reason         string `json:"reason,omitempty"`
	Syntax         bool   `json:"syntax"`
	MX             bool   `json:"mx"`
	Domain         string `json:"domain,omitempty"`
	MXHost         string `json:"mx_host,omitempty"`
	IsDisposable   bool   `json:"is_disposable"`
	IsRoleBased    bool   `json:"is_role_based"`
	IsFreeProvider bool   `json:"is_free_provider"`
	IsCatchAll     bool   `json:"is_catch_all"`
	// Flat copies of auth keys (spec §2.5).
	SPF          string `json:"spf,omitempty"`
	DKIM         string `json:"dkim,omitempty"`
	DMARC        string `json:"dmarc,omitempty"`
	MTASTS       *bool  `json:"mta_sts,omitempty"`
	SVCCertified *bool  `json:"svc_certified,omitempty"`
	// Auth is spec §2.6's object; {} when nothing was learnt.
	Auth json.RawMessage `json:"auth"`
}

// timeFormat is ISO 8601 UTC with milliseconds (spec §2.4).
const timeFormat = "2006-01-02T15:04:05.000Z"

func formatTime(t time.Time) string { return t.UTC().Format(timeFormat) }

// newReceipt builds the receipt of an engine result (without credits, kid
// and sig, which the charge adds).
func newReceipt(r *probe.Result) *receiptJSON {
	rec := &receiptJSON{
		Email:     r.Email,
		Status:    string(r.Status),
		Score:     r.Score,
		ProbedAt:  formatTime(r.ProbedAt),
		LatencyMs: r.Latency.Milliseconds(),
		Checks: checksJSON{
			Reason:         string(r.Reason),
			Syntax:         r.Checks.Syntax,
			MX:             r.Checks.MX,
			Domain:         r.Checks.Domain,
			MXHost:         r.Checks.MXHost,
			IsDisposable:   r.Checks.IsDisposable,
			IsRoleBased:    r.Checks.IsRoleBased,
			IsFreeProvider: r.Checks.IsFreeProvider,
			IsCatchAll:     r.Checks.IsCatchAll,
			Auth:           json.RawMessage("{}"),
		},
	}
	addAuth(rec, r)
	return rec
}

// UnsignedReceipt is the receipt of an engine result as stored for later
// reuse (a batch result that a validation with cache: true may serve): the
// same shape as a signed receipt, without kid, sig and credits, which the
// serving request adds when it signs. fallbackEmail names the address when
// the result has none.
func UnsignedReceipt(r *probe.Result, fallbackEmail string) ([]byte, error) {
	rec := newReceipt(r)
	if rec.Email == "" {
		rec.Email = fallbackEmail
	}
	return json.Marshal(rec)
}
