package authsig

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/verifyd/verifyd/dnsbl"
)

// The query names and the block lists' return codes are package dnsbl's
// (RFC 5782): dnsbl.Name and dnsbl.Classify. What is the auth signals' own
// is below: the allow lists' extra error codes and the summary of the block
// lists into the two auth keys.

// Allow-list return codes that are not listings.
var (
	// dnswlBlocked is dnswl.org's "query blocked" (over the free limit).
	dnswlBlocked = netip.AddrFrom4([4]byte{127, 0, 0, 255})
	// dnswlBlockedAlt is refused too: no dnswl.org category 255 exists.
	dnswlBlockedAlt = netip.AddrFrom4([4]byte{127, 0, 255, 255})
)

// ClassifyDNSWL reads the A records a DNS allow list returned, with the
// encoding of dnsbl.Classify plus the allow lists' own error codes: dnswl.org
// answers 127.0.0.255 when it blocks a querier (SpamAssassin's
// RCVD_IN_DNSWL_BLOCKED, rspamd's DNSWL_BLOCKED), and 127.0.255.255, which
// no category uses, is refused too. dnswl.org listings are 127.0.<category>.
// <trust 0-3>; any valid code counts as listed, including trust 0 ("none").
func ClassifyDNSWL(answers []netip.Addr) (listed bool, err error) {
	for _, a := range answers {
		if u := a.Unmap(); u == dnswlBlocked || u == dnswlBlockedAlt {
			return false, fmt.Errorf("%w: %v (allow list refused the query)", dnsbl.ErrAnswer, a)
		}
	}
	return dnsbl.Classify(answers)
}

// DNSBLResult is the caller's outcome for one DNS list.
type DNSBLResult struct {
	Zone   string
	Listed bool
	Err    error // from the lookup or from dnsbl.Classify
}

// SummarizeDNSBL turns the per-list outcomes for one address into the auth
// keys dnsbl_clean and dnsbl_lists_on. listedOn holds the zones that list
// the address, sorted. known is false when no list lists it but some list
// could not answer: then "clean" cannot be claimed, and the caller should
// omit dnsbl_clean (dnsbl_lists_on stays empty). With no results at all
// (no lists configured) known is false too.
func SummarizeDNSBL(results []DNSBLResult) (clean bool, listedOn []string, known bool) {
	failed := false
	for _, r := range results {
		switch {
		case r.Err != nil:
			failed = true
		case r.Listed:
			listedOn = append(listedOn, r.Zone)
		}
	}
	slices.Sort(listedOn)
	listedOn = slices.Compact(listedOn)
	if len(listedOn) > 0 {
		return false, listedOn, true
	}
	return !failed && len(results) > 0, nil, !failed && len(results) > 0
}
