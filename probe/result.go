package probe

import (
	"net/netip"
	"time"

	"github.com/verifyd/verifyd/probe/authsig"
	"github.com/verifyd/verifyd/probe/typo"
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
	// Learned, when set, says delivery outcomes changed the verdict
	// (Learn).
	Learned *Learned
	// Calibration, when set, says Score is the account's calibrated
	// probability of delivery (server/outcomes) and keeps the raw score.
	Calibration *Calibration
	// DidYouMean, when set, is the address the person probably meant:
	// the domain typed receives no mail and is a typing slip of one that
	// does (Options.Typos). It does not change the verdict.
	DidYouMean *DidYouMean
}

// DidYouMean is a suggested address: Email, its Domain, and the slips
// that make the typed address from it (typo.Kind in the domain's first
// label, "" for none; TLD when the top-level part slipped; Local when
// stray dots broke the local part of a large provider's address).
type DidYouMean struct {
	Email  string
	Domain string
	Slip   typo.Kind
	TLD    bool
	Local  bool
}

// Calibration is how a result's score was calibrated.
type Calibration struct {
	// Model is the fitted model's version; Outcomes how many outcomes it
	// counted.
	Model    string
	Outcomes int
	// RawScore is the engine's score before calibration.
	RawScore int
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

// Learned is what delivery outcomes taught about an address or its domain
// that changed the verdict the probe reached (server/outcomes): an
// address whose mail bounced as "no such mailbox" after the probe saw it
// accepted, or a domain whose server accepts at RCPT and bounces later.
type Learned struct {
	// Kind is LearnedAddress or LearnedDomain.
	Kind string
	// At and Enhanced name the address's bounce (LearnedAddress).
	At       time.Time
	Enhanced string
	// Bounced and Delivered count the domain's outcomes (LearnedDomain).
	Bounced, Delivered int
	// Was is the verdict the probe reached.
	Was Status
}

// Kinds of Learned.
const (
	LearnedAddress = "address_bounced"
	LearnedDomain  = "domain_bounces"
)

// Learn changes r's verdict by l: an address that bounced is invalid
// (mailbox_not_found, score at most 5); a domain that bounces what it
// accepted makes a valid address risky (catch_all: the server accepts
// what it cannot deliver, score at most 55). r.Learned records it.
func (r *Result) Learn(l *Learned) {
	l.Was = r.Status
	var catchAll bool
	r.Status, r.Reason, r.Score, catchAll = l.Verdict(r.Score)
	r.Checks.IsCatchAll = r.Checks.IsCatchAll || catchAll
	r.Checks.Reason = r.Reason
	r.Learned = l
}

// Verdict is the verdict l gives an address the probe scored score, and
// whether it says the domain accepts every recipient.
func (l *Learned) Verdict(score int) (Status, Reason, int, bool) {
	if l.Kind == LearnedAddress {
		return StatusInvalid, ReasonMailboxNotFound, min(score, 5), false
	}
	return StatusRisky, ReasonCatchAll, min(score, 55), true
}
