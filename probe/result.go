package probe

import (
	"net/netip"
	"time"

	"github.com/verifyd/verifyd/probe/authsig"
)

// Result is the engine's answer for one address: the verdict, the score and
// the checks of spec §2.4-2.5, plus what the batch scheduler needs to come
// back later.
type Result struct {
	// Email is the address in the user's form (IDNA U-labels), or the input
	// as given when it failed syntax.
	Email  string
	Status Status
	Reason Reason
	Score  int
	Checks Checks
	// ProbedAt is when the probe started.
	ProbedAt time.Time
	// Latency is how long the probe took.
	Latency time.Duration
	// RetryAt, when set, says a later probe may decide what this one could
	// not (greylisting, cooling egress addresses): a batch job comes back
	// then, from Egress if it can.
	RetryAt time.Time
	// Egress is the source address of the last SMTP session (invalid when
	// none was made).
	Egress netip.Addr
	// Evidence is what the verdict was decided from.
	Evidence Evidence
	// Session holds what the SMTP session learnt of the MX, for the
	// authentication signals (zero when no session was made).
	Session SessionFacts
	// Auth is the auth object of spec §2.6: the domain's authentication
	// and deliverability signals, with the session's keys merged in. nil
	// when Options.Auth is nil or no SMTP probe was made (the verdict was
	// decided before SMTP). AuthFlat gives the flat copies of spec §2.5.
	Auth *authsig.Signals
}

// AuthFlat returns the auth keys that spec §2.5 repeats flat in the checks
// object (spf, dkim, dmarc, mta_sts, svc_certified); every key is omitted
// when Auth is nil.
func (r *Result) AuthFlat() authsig.Flat { return r.Auth.Flat() }

// Checks is spec §2.5's checks object, less the auth signals (Result.Auth
// and Result.AuthFlat).
type Checks struct {
	Reason         Reason
	Syntax         bool
	MX             bool
	Domain         string
	MXHost         string
	IsDisposable   bool
	IsRoleBased    bool
	IsFreeProvider bool
	IsCatchAll     bool
}

// SessionFacts is what an SMTP session tells of the MX host.
type SessionFacts struct {
	// MXIP is the address the session connected to.
	MXIP netip.Addr
	// BannerHost and EHLOHost are the host names in the 220 greeting and
	// the first line of the EHLO reply.
	BannerHost string
	EHLOHost   string
	// TLSVersion and TLSCipher are Go's names of the STARTTLS handshake's
	// outcome ("TLS 1.3", "TLS_AES_128_GCM_SHA256"); empty without TLS.
	TLSVersion string
	TLSCipher  string
	// Provider is the label of the mailbox provider or gateway the MX was
	// recognised as (probe/provider.go), ProviderOther when none matched;
	// empty when no SMTP session was attempted.
	Provider string
}
