package authsig

import (
	"net/netip"
	"slices"
	"strings"
)

// Signals is the auth object of the receipt (spec §2.6), as the Collector
// and the SMTP session learnt it. Every key is optional: a nil pointer, an
// empty string or a nil slice means the value is unknown (its lookup failed,
// or could not be made) and the key is left out of the JSON; a known false,
// 0 or "none" is kept. README.md has the table of when each key is present.
//
// Values behind the pointers are never shared between two Signals the
// package hands out, so a caller may keep or modify its copy.
type Signals struct {
	SPF                  string   `json:"spf,omitempty"`
	DKIM                 string   `json:"dkim,omitempty"`
	DMARC                string   `json:"dmarc,omitempty"`
	DMARCPolicy          string   `json:"dmarc_policy,omitempty"`
	SVCCertified         *bool    `json:"svc_certified,omitempty"`
	SVCTrustLevel        *int     `json:"svc_trust_level,omitempty"`
	SVCKeyID             string   `json:"svc_key_id,omitempty"`
	MTASTS               *bool    `json:"mta_sts,omitempty"`
	TLSRPT               *bool    `json:"tls_rpt,omitempty"`
	DANE                 *bool    `json:"dane,omitempty"`
	DNSSEC               *bool    `json:"dnssec,omitempty"`
	BIMI                 *bool    `json:"bimi,omitempty"`
	BIMIVMC              *bool    `json:"bimi_vmc,omitempty"`
	CAA                  *bool    `json:"caa,omitempty"`
	FCrDNS               *bool    `json:"fcrdns,omitempty"`
	PTR                  string   `json:"ptr,omitempty"`
	DMARCSubdomainPolicy string   `json:"dmarc_subdomain_policy,omitempty"`
	DMARCAlignmentSPF    string   `json:"dmarc_alignment_spf,omitempty"`
	DMARCAlignmentDKIM   string   `json:"dmarc_alignment_dkim,omitempty"`
	DMARCRUASet          *bool    `json:"dmarc_rua_set,omitempty"`
	TLSVersion           string   `json:"tls_version,omitempty"`
	TLSCipher            string   `json:"tls_cipher,omitempty"`
	AbuseMailbox         *bool    `json:"abuse_mailbox,omitempty"`
	PostmasterMailbox    *bool    `json:"postmaster_mailbox,omitempty"`
	HELOMatchesRDNS      *bool    `json:"helo_matches_rdns,omitempty"`
	DNSBLClean           *bool    `json:"dnsbl_clean,omitempty"`
	DNSBLListsOn         []string `json:"dnsbl_lists_on,omitzero"` // nil: unknown; empty: on no list
	DNSWLListed          *bool    `json:"dnswl_listed,omitempty"`
	DomainAgeDays        *int     `json:"domain_age_days,omitempty"`

	// mxIP is the MX address the IP-based keys were learnt for; ptrNames
	// its PTR names, when the PTR lookup answered (ptrKnown).
	mxIP     netip.Addr
	ptrNames []string
	ptrKnown bool
}

// Keys is the number of keys of the auth object (spec §2.6).
const Keys = 29

// Clone returns a deep copy of s (nil for nil).
func (s *Signals) Clone() *Signals {
	if s == nil {
		return nil
	}
	c := *s
	for _, p := range []**bool{&c.SVCCertified, &c.MTASTS, &c.TLSRPT, &c.DANE, &c.DNSSEC, &c.BIMI, &c.BIMIVMC,
		&c.CAA, &c.FCrDNS, &c.DMARCRUASet, &c.AbuseMailbox, &c.PostmasterMailbox, &c.HELOMatchesRDNS,
		&c.DNSBLClean, &c.DNSWLListed} {
		if *p != nil {
			*p = boolPtr(**p)
		}
	}
	for _, p := range []**int{&c.SVCTrustLevel, &c.DomainAgeDays} {
		if *p != nil {
			*p = intPtr(**p)
		}
	}
	if c.DNSBLListsOn != nil {
		c.DNSBLListsOn = slices.Clone(c.DNSBLListsOn)
		if c.DNSBLListsOn == nil {
			c.DNSBLListsOn = []string{}
		}
	}
	c.ptrNames = slices.Clone(c.ptrNames)
	return &c
}

// Flat is the flat copies of spec §2.5: the auth keys the checks object
// repeats at its top level.
type Flat struct {
	SPF          string `json:"spf,omitempty"`
	DKIM         string `json:"dkim,omitempty"`
	DMARC        string `json:"dmarc,omitempty"`
	MTASTS       *bool  `json:"mta_sts,omitempty"`
	SVCCertified *bool  `json:"svc_certified,omitempty"`
}

// Flat returns the flat copies of s for the checks object; the zero Flat
// (every key omitted) for nil.
func (s *Signals) Flat() Flat {
	if s == nil {
		return Flat{}
	}
	f := Flat{SPF: s.SPF, DKIM: s.DKIM, DMARC: s.DMARC}
	if s.MTASTS != nil {
		f.MTASTS = boolPtr(*s.MTASTS)
	}
	if s.SVCCertified != nil {
		f.SVCCertified = boolPtr(*s.SVCCertified)
	}
	return f
}

// Positive counts the positive authentication signals the engine's score
// reads (probe.Evidence.Auth): SPF strict or softfail, a DMARC policy of
// quarantine or reject, MTA-STS announced, a DKIM key found. 0 for nil.
func (s *Signals) Positive() int {
	if s == nil {
		return 0
	}
	n := 0
	if s.SPF == SPFStrict.String() || s.SPF == SPFSoftfail.String() {
		n++
	}
	if s.DMARC == DMARCFound.String() && (s.DMARCPolicy == DMARCPolicyQuarantine.String() || s.DMARCPolicy == DMARCPolicyReject.String()) {
		n++
	}
	if s.MTASTS != nil && *s.MTASTS {
		n++
	}
	if s.DKIM == DKIMFound.String() {
		n++
	}
	return n
}

// SessionFacts is what the prober's SMTP session with the MX learnt, for
// the session keys (tls_version, tls_cipher, helo_matches_rdns).
type SessionFacts struct {
	// MXIP is the address the session connected to.
	MXIP netip.Addr
	// EHLOHost and BannerHost are the names the server gave itself in the
	// EHLO reply and the 220 greeting.
	EHLOHost   string
	BannerHost string
	// TLSVersion and TLSCipher are Go's names of the STARTTLS handshake's
	// outcome ("TLS 1.3", "TLS_AES_128_GCM_SHA256"); empty without TLS.
	TLSVersion string
	TLSCipher  string
}

// MergeSession adds the keys learnt from an SMTP session with the MX:
//
//   - tls_version and tls_cipher, when the session used STARTTLS (without
//     TLS they stay unknown: a session without STARTTLS says nothing about
//     the TLS the MX would negotiate with a sender that insists);
//   - helo_matches_rdns: whether the name in the EHLO reply (the greeting's,
//     when the EHLO reply gave none) equals, ignoring case and a trailing
//     dot, a PTR name of the address the session connected to (RFC 5321
//     §4.1.1.1, §4.1.4). It is set only when the session connected to the
//     address the Collector looked up (the first address of the first MX)
//     and that PTR lookup answered; false when the address has no PTR.
//
// A zero SessionFacts (no session was made) changes nothing.
func (s *Signals) MergeSession(f SessionFacts) {
	if s == nil {
		return
	}
	if f.TLSVersion != "" {
		s.TLSVersion = f.TLSVersion
		s.TLSCipher = f.TLSCipher
	}
	name := f.EHLOHost
	if name == "" {
		name = f.BannerHost
	}
	if name == "" || !f.MXIP.IsValid() || !s.ptrKnown || f.MXIP.Unmap() != s.mxIP {
		return
	}
	name = strings.TrimSuffix(name, ".")
	match := false
	for _, p := range s.ptrNames {
		if strings.EqualFold(strings.TrimSuffix(p, "."), name) {
			match = true
			break
		}
	}
	s.HELOMatchesRDNS = boolPtr(match)
}

// Mailboxes is what RCPT probes learnt of a domain's role mailboxes:
// abuse@ (RFC 2142 §2, §4) and postmaster@ (RFC 5321 §4.5.1). nil is
// unknown.
type Mailboxes struct {
	Abuse      *bool
	Postmaster *bool
}

// MergeMailboxes sets abuse_mailbox and postmaster_mailbox from m where m
// knows them.
func (s *Signals) MergeMailboxes(m Mailboxes) {
	if s == nil {
		return
	}
	if m.Abuse != nil {
		s.AbuseMailbox = boolPtr(*m.Abuse)
	}
	if m.Postmaster != nil {
		s.PostmasterMailbox = boolPtr(*m.Postmaster)
	}
}

func boolPtr(b bool) *bool { return &b }
func intPtr(n int) *int    { return &n }
