package authsig

import (
	"net/url"
	"strings"
)

// TLSRPTResult is the SMTP TLS Reporting signal of a domain (RFC 8460 §3).
type TLSRPTResult struct {
	Enabled bool     // one valid v=TLSRPTv1 record with a usable rua= (the auth key tls_rpt)
	RUA     []string // its mailto: and https: URIs, when Enabled
	Err     error    // why a record that exists does not count; nil otherwise
}

// IsTLSRPTRecord reports whether txt begins with "v=TLSRPTv1" then optional
// whitespace and ";" or the end, compared exactly (RFC 8460 §3).
func IsTLSRPTRecord(txt string) bool { return versionTag(txt, "v", "TLSRPTv1", false, false) }

// TLSRPT judges the TXT records at _smtp._tls.<domain> (RFC 8460 §3):
// records that do not begin with v=TLSRPTv1 are discarded; if not exactly one
// remains, or it is not valid, the domain does not do TLS reporting. The
// grammar is strict:
//
//	tlsrpt-record    = tlsrpt-version 1*(field-delim tlsrpt-field) [field-delim]
//	field-delim      = *WSP ";" *WSP
//	tlsrpt-version   = %s"v=TLSRPTv1"
//	tlsrpt-rua       = %s"rua=" tlsrpt-uri *(*WSP "," *WSP tlsrpt-uri)
//	tlsrpt-extension = tlsrpt-ext-name "=" tlsrpt-ext-value
//	tlsrpt-ext-name  = (ALPHA / DIGIT) *31(ALPHA / DIGIT / "_" / "-" / ".")
//	tlsrpt-ext-value = 1*(%x21-3A / %x3C / %x3E-7E)
//
// rua= is required, once; every URI in it must be a syntactically valid
// absolute URI, and at least one must be usable: mailto: with one address,
// or https: with a hostname (§3: "the record ... MUST include a rua"; the
// two schemes it defines). URIs of other schemes are valid but ignored.
func TLSRPT(records []string) TLSRPTResult {
	var found string
	n := 0
	for _, txt := range records {
		if IsTLSRPTRecord(txt) {
			found = txt
			n++
		}
	}
	switch {
	case n == 0:
		return TLSRPTResult{}
	case n > 1:
		return TLSRPTResult{Err: ErrMultipleRecords}
	}
	tags, errs := parseTags(found, tagSyntax{record: "tls-rpt", validName: isExtName, tightEquals: true})
	if len(errs) > 0 {
		return TLSRPTResult{Err: errs[0]}
	}
	if tags[0] != (Tag{Name: "v", Value: "TLSRPTv1"}) {
		return TLSRPTResult{Err: syntaxErr("tls-rpt", found, "record does not begin with \"v=TLSRPTv1\"")}
	}
	rua, ok := tags.Get("rua")
	if !ok {
		return TLSRPTResult{Err: syntaxErr("tls-rpt", found, "no rua=")}
	}
	for _, t := range tags[1:] {
		if t.Name != "rua" && (t.Value == "" || containsByte(t.Value, '=') || containsWS(t.Value)) {
			return TLSRPTResult{Err: syntaxErr("tls-rpt", t.Name+"="+t.Value, "bad extension value")}
		}
	}
	if rua == "" {
		return TLSRPTResult{Err: syntaxErr("tls-rpt", "rua=", "bad URI")}
	}
	var usable []string
	for _, u := range splitList(rua, ',') {
		pu, err := url.Parse(u)
		if err != nil || pu.Scheme == "" || containsWS(u) || containsByte(u, '!') {
			return TLSRPTResult{Err: syntaxErr("tls-rpt", "rua="+rua, "bad URI")}
		}
		switch pu.Scheme {
		case "mailto":
			if validMailtoURI(u) {
				usable = append(usable, u)
			}
		case "https":
			if validHostname(strings.ToLower(pu.Hostname())) {
				usable = append(usable, u)
			}
		}
	}
	if len(usable) == 0 {
		return TLSRPTResult{Err: syntaxErr("tls-rpt", "rua="+rua, "no usable mailto: or https: URI")}
	}
	return TLSRPTResult{Enabled: true, RUA: usable}
}
