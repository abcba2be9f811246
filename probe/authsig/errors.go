package authsig

import (
	"errors"
	"fmt"
)

// Package sentinels. Results carry them (or a *SyntaxError) in their Err
// field to say why a signal came out as none or permerror; callers test them
// with errors.Is.
var (
	// ErrMultipleRecords: a name that must hold exactly one record of a kind
	// holds several (SPF RFC 7208 §4.5, DMARC RFC 7489 §6.6.3 step 5,
	// MTA-STS RFC 8461 §3.1, TLS-RPT RFC 8460 §3, DKIM RFC 6376 §3.6.2.2,
	// BIMI, svc trust).
	ErrMultipleRecords = errors.New("authsig: more than one record")

	// ErrSPFTooManyLookups: evaluating the record would need more than
	// SPFLookupLimit DNS-querying terms (RFC 7208 §4.6.4).
	ErrSPFTooManyLookups = errors.New("authsig: spf: more than 10 DNS-querying terms (RFC 7208 §4.6.4)")

	// ErrSPFNoTarget: an include: or redirect= target has no SPF record or
	// is not a valid domain name (RFC 7208 §5.2, §6.1).
	ErrSPFNoTarget = errors.New("authsig: spf: include or redirect target has no SPF record")

	// ErrDKIMRevoked: the key record has an empty p= (RFC 6376 §3.6.1).
	ErrDKIMRevoked = errors.New("authsig: dkim: key revoked (empty p=)")

	// ErrTrustUnknownKey: a valid svc trust record names a key id the
	// operator's trust programme has not issued.
	ErrTrustUnknownKey = errors.New("authsig: svc: key id not issued by this trust programme")
)

// SyntaxError reports a record that breaks its grammar.
type SyntaxError struct {
	Record string // which grammar: "tag-list", "spf", "dkim", "dmarc", "mta-sts", "tls-rpt", "bimi", "svc"
	Near   string // the offending term or tag-spec, as written; may be empty
	Msg    string // what is wrong, lower-case
}

func (e *SyntaxError) Error() string {
	if e.Near == "" {
		return "authsig: " + e.Record + ": " + e.Msg
	}
	return fmt.Sprintf("authsig: %s: %s: %q", e.Record, e.Msg, e.Near)
}

func syntaxErr(record, near, msg string) *SyntaxError {
	const maxNear = 64 // keep log lines short when a record is huge
	if len(near) > maxNear {
		near = near[:maxNear] + "…"
	}
	return &SyntaxError{Record: record, Near: near, Msg: msg}
}
