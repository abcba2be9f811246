package authsig

import (
	"fmt"
	"strings"
)

// TrustMaxLevel is the highest svc trust level.
const TrustMaxLevel = 5

// TrustRecord is a parsed svc trust record (see README.md, "svc trust
// programme").
type TrustRecord struct {
	KeyID string // k=: 1 to 64 of [A-Za-z0-9._-], compared case-sensitively
	Level int    // l=: 1 to 5, as claimed by the domain
}

// TrustKeys are the key ids the operator's trust programme has issued, each
// with the highest level it may claim (1 to 5). The programme, not the
// domain, is the authority: a record whose key is not here certifies
// nothing. A nil or empty map certifies no domain.
type TrustKeys map[string]int

// TrustResult is the svc trust signal of a domain.
type TrustResult struct {
	Certified bool         // the auth key svc_certified
	Level     int          // svc_trust_level: 1 to 5 when Certified, else 0
	KeyID     string       // svc_key_id: set only when Certified
	Claim     *TrustRecord // the valid record found, certified or not; for logs
	Err       error        // why a record that exists does not certify; nil otherwise
}

// IsTrustRecord reports whether txt begins with "v=SVC1" then ";" or the
// end, exactly. Such records are the programme's; others at the name are
// ignored.
func IsTrustRecord(txt string) bool {
	rest, ok := strings.CutPrefix(txt, "v=SVC1")
	return ok && (rest == "" || rest[0] == ';' || rest[0] == ' ' || rest[0] == '\t')
}

// ParseTrust parses one svc trust record, strictly:
//
//	svc-record  = svc-version svc-sep svc-tag svc-sep svc-tag [svc-sep]
//	svc-version = %s"v=SVC1"
//	svc-sep     = *WSP ";" *WSP
//	svc-tag     = svc-key / svc-level        ; each exactly once, either order
//	svc-key     = %s"k=" 1*64( ALPHA / DIGIT / "." / "_" / "-" )
//	svc-level   = %s"l=" %x31-35             ; one digit, 1 to 5
//
// No other tag, no whitespace around "=", nothing before v=.
func ParseTrust(txt string) (*TrustRecord, error) {
	if !IsTrustRecord(txt) {
		return nil, syntaxErr("svc", txt, "record does not begin with \"v=SVC1\"")
	}
	tags, errs := parseTags(txt, tagSyntax{record: "svc", validName: isTagName, tightEquals: true})
	if len(errs) > 0 {
		return nil, errs[0]
	}
	if len(tags) != 3 || tags[0] != (Tag{Name: "v", Value: "SVC1"}) {
		return nil, syntaxErr("svc", txt, "want exactly v=SVC1, k= and l=")
	}
	r := &TrustRecord{}
	var sawK, sawL bool
	for _, t := range tags[1:] {
		switch t.Name {
		case "k":
			if !validTrustKeyID(t.Value) {
				return nil, syntaxErr("svc", "k="+t.Value, "key id is not 1 to 64 of [A-Za-z0-9._-]")
			}
			r.KeyID, sawK = t.Value, true
		case "l":
			if len(t.Value) != 1 || t.Value[0] < '1' || t.Value[0] > '0'+TrustMaxLevel {
				return nil, syntaxErr("svc", "l="+t.Value, "level is not one digit 1 to 5")
			}
			r.Level, sawL = int(t.Value[0]-'0'), true
		default:
			return nil, syntaxErr("svc", t.Name+"="+t.Value, "unknown tag")
		}
	}
	if !sawK || !sawL {
		return nil, syntaxErr("svc", txt, "want exactly v=SVC1, k= and l=")
	}
	return r, nil
}

func validTrustKeyID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// Trust judges the TXT records at _svc-trust.<domain>: records that do not
// begin with v=SVC1 are ignored; exactly one must remain (several give
// ErrMultipleRecords) and parse (ParseTrust). The domain is certified when
// the record's key id is one of keys; its level is the lower of the level it
// claims and the level the key was issued for.
func Trust(records []string, keys TrustKeys) TrustResult {
	var found string
	n := 0
	for _, txt := range records {
		if IsTrustRecord(txt) {
			found = txt
			n++
		}
	}
	switch {
	case n == 0:
		return TrustResult{}
	case n > 1:
		return TrustResult{Err: ErrMultipleRecords}
	}
	rec, err := ParseTrust(found)
	if err != nil {
		return TrustResult{Err: err}
	}
	granted, ok := keys[rec.KeyID]
	if !ok || granted < 1 {
		return TrustResult{Claim: rec, Err: fmt.Errorf("%w: %q", ErrTrustUnknownKey, rec.KeyID)}
	}
	return TrustResult{Certified: true, Level: min(rec.Level, granted, TrustMaxLevel), KeyID: rec.KeyID, Claim: rec}
}
