package authsig

// MTASTSResult is the MTA-STS signal of a domain: whether it announces a
// policy in DNS (RFC 8461 §3.1).
type MTASTSResult struct {
	Enabled bool   // one valid v=STSv1 record with an id (the auth key mta_sts)
	ID      string // its id=, when Enabled
	Err     error  // why a record that exists does not count; nil otherwise
}

// IsMTASTSRecord reports whether txt begins with "v=STSv1" then optional
// whitespace and ";" or the end, compared exactly (RFC 8461 §3.1).
func IsMTASTSRecord(txt string) bool { return versionTag(txt, "v", "STSv1", false, false) }

// MTASTS judges the TXT records at _mta-sts.<domain> (RFC 8461 §3.1):
// records that do not begin with v=STSv1 are discarded; if not exactly one
// remains, or it is not valid, the domain has no MTA-STS policy. The grammar
// is strict, as the RFC gives it:
//
//	sts-text-record = sts-version 1*(*WSP ";" *WSP sts-field) [*WSP ";"]
//	sts-version     = %s"v=STSv1"
//	sts-field       = sts-id / sts-extension
//	sts-id          = %s"id=" 1*32(ALPHA / DIGIT)
//	sts-extension   = sts-ext-name "=" sts-ext-value
//	sts-ext-name    = (ALPHA / DIGIT) *31(ALPHA / DIGIT / "_" / "-" / ".")
//	sts-ext-value   = 1*(%x21-3A / %x3C / %x3E-7E)
//
// Names are case-sensitive, no whitespace may surround "=", and id= must
// appear exactly once. This reads only the DNS half of MTA-STS; the policy
// file at https://mta-sts.<domain>/.well-known/mta-sts.txt (§3.2) is not
// fetched.
func MTASTS(records []string) MTASTSResult {
	var found string
	n := 0
	for _, txt := range records {
		if IsMTASTSRecord(txt) {
			found = txt
			n++
		}
	}
	switch {
	case n == 0:
		return MTASTSResult{}
	case n > 1:
		return MTASTSResult{Err: ErrMultipleRecords}
	}
	tags, errs := parseTags(found, tagSyntax{record: "mta-sts", validName: isExtName, tightEquals: true})
	if len(errs) > 0 {
		return MTASTSResult{Err: errs[0]}
	}
	if tags[0] != (Tag{Name: "v", Value: "STSv1"}) {
		return MTASTSResult{Err: syntaxErr("mta-sts", found, "record does not begin with \"v=STSv1\"")}
	}
	id, ok := tags.Get("id")
	if !ok {
		return MTASTSResult{Err: syntaxErr("mta-sts", found, "no id=")}
	}
	if len(id) == 0 || len(id) > 32 || !isAlnumString(id) {
		return MTASTSResult{Err: syntaxErr("mta-sts", "id="+id, "id is not 1 to 32 letters and digits")}
	}
	for _, t := range tags[1:] {
		if t.Value == "" || containsByte(t.Value, '=') || containsWS(t.Value) {
			return MTASTSResult{Err: syntaxErr("mta-sts", t.Name+"="+t.Value, "bad extension value")}
		}
	}
	return MTASTSResult{Enabled: true, ID: id}
}

func isAlnumString(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) {
			return false
		}
	}
	return true
}

func containsByte(s string, c byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return true
		}
	}
	return false
}

func containsWS(s string) bool {
	for i := 0; i < len(s); i++ {
		if isWS(s[i]) {
			return true
		}
	}
	return false
}
