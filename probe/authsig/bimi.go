package authsig

import (
	"net/url"
	"strings"
)

// BIMIResult is the BIMI signal of a domain (draft-brand-indicators-for-
// message-identification, "the BIMI draft", §4.2).
type BIMIResult struct {
	Enabled  bool   // a valid record that is not a declination (the auth key bimi)
	VMC      bool   // its a= names an evidence document (VMC/CMC) over https (the auth key bimi_vmc)
	Declined bool   // a valid declination record, "v=BIMI1; l=; a=;"
	Location string // l=, the logo URL; may be empty
	Evidence string // a=, the evidence document URL; may be empty
	Err      error  // why a record that exists does not count; nil otherwise
}

// IsBIMIRecord reports whether txt begins with "v=BIMI1" then optional
// whitespace and ";" or the end. The draft says the version "MUST match
// precisely" and receivers "MUST NOT attempt to fix ... capitalization
// errors", so the comparison is exact.
func IsBIMIRecord(txt string) bool { return versionTag(txt, "v", "BIMI1", false, false) }

// BIMI judges the TXT records at <selector>._bimi.<domain> (the BIMI draft
// §4.2): records that do not begin with v=BIMI1 are discarded; if not
// exactly one remains the result is empty (ErrMultipleRecords for several).
// The record is an RFC 6376 tag-list (ParseTagList rules, so tag names are
// case-sensitive and duplicates are errors) in which
//
//   - l= is required, and is either empty or a single https: URI whose host
//     is a hostname;
//   - a= is optional, and is either empty or such a URI;
//   - other tags (lps=, avp=, future ones) are ignored.
//
// A record that breaks these rules is an error, not a partial result ("If a
// required tag is missing, or its value not well-formed, it is an error").
// Both l= and a= empty is a declination to publish: Enabled is false and
// Declined true. Otherwise Enabled is true (with l= empty but a= set the
// logo comes from the evidence document), and VMC is true when a= is set,
// so VMC implies Enabled. Neither the SVG nor the certificate is fetched or
// checked here, and the DMARC policy BIMI requires (quarantine or reject) is
// for the caller to weigh.
func BIMI(records []string) BIMIResult {
	var found string
	n := 0
	for _, txt := range records {
		if IsBIMIRecord(txt) {
			found = txt
			n++
		}
	}
	switch {
	case n == 0:
		return BIMIResult{}
	case n > 1:
		return BIMIResult{Err: ErrMultipleRecords}
	}
	tags, errs := parseTags(found, tagSyntax{record: "bimi", validName: isTagName})
	if len(errs) > 0 {
		return BIMIResult{Err: errs[0]}
	}
	if tags[0] != (Tag{Name: "v", Value: "BIMI1"}) {
		return BIMIResult{Err: syntaxErr("bimi", found, "record does not begin with \"v=BIMI1\"")}
	}
	l, ok := tags.Get("l")
	if !ok {
		return BIMIResult{Err: syntaxErr("bimi", found, "no l=")}
	}
	a, _ := tags.Get("a")
	if l != "" && !validHTTPSURL(l) {
		return BIMIResult{Err: syntaxErr("bimi", "l="+l, "not a single https URI")}
	}
	if a != "" && !validHTTPSURL(a) {
		return BIMIResult{Err: syntaxErr("bimi", "a="+a, "not a single https URI")}
	}
	if l == "" && a == "" {
		return BIMIResult{Declined: true}
	}
	return BIMIResult{Enabled: true, VMC: a != "", Location: l, Evidence: a}
}

// validHTTPSURL reports whether u is one absolute https: URL whose host is a
// fully qualified hostname (not an IP address). Commas must be
// percent-encoded in BIMI URIs, so a comma means a list, which is refused.
func validHTTPSURL(u string) bool {
	if containsWS(u) || containsByte(u, ',') {
		return false
	}
	pu, err := url.Parse(u)
	if err != nil || pu.Scheme != "https" || pu.Opaque != "" || pu.User != nil {
		return false
	}
	return validHostname(strings.ToLower(pu.Hostname()))
}
