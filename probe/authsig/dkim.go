package authsig

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"slices"
	"strconv"
	"strings"
)

// DKIMStatus is what the DKIM key lookups of a domain found.
type DKIMStatus uint8

// DKIM statuses. The zero value is DKIMNone.
const (
	DKIMNone    DKIMStatus = iota // "none": no usable key at the selectors tried (missing or malformed)
	DKIMFound                     // "found": a usable key
	DKIMRevoked                   // "revoked": only revoked keys (empty p=)
)

var dkimStatusNames = [...]string{"none", "found", "revoked"}

// String returns the status as the auth object spells it.
func (s DKIMStatus) String() string {
	if int(s) < len(dkimStatusNames) {
		return dkimStatusNames[s]
	}
	return "DKIMStatus(" + strconv.Itoa(int(s)) + ")"
}

// defaultDKIMSelectors are the selectors tried when the operator configures
// none. A domain's selectors cannot be listed through DNS, so a "none" means
// "no key at these names", not "the domain does not sign".
var defaultDKIMSelectors = []string{
	"default",    // cPanel, Plesk, many hosting panels and OpenDKIM how-tos
	"google",     // Google Workspace
	"selector1",  // Microsoft 365 (first of a pair)
	"selector2",  // Microsoft 365 (second of a pair)
	"k1",         // Mailchimp / Mandrill
	"k2",         // Mailchimp (rotating pair)
	"s1",         // SendGrid
	"s2",         // SendGrid
	"dkim",       // rspamd's default selector
	"mail",       // common in OpenDKIM and Postfix guides
	"smtp",       // Mailgun
	"mx",         // Mailgun (older domains)
	"fm1",        // Fastmail
	"protonmail", // Proton Mail
}

// DefaultDKIMSelectors returns a fresh copy of the selectors tried when the
// operator configures none (see README.md for where each comes from).
func DefaultDKIMSelectors() []string { return slices.Clone(defaultDKIMSelectors) }

// minRSABits is the smallest RSA key a verifier accepts (RFC 8301 §3.2).
const minRSABits = 1024

// DKIMKey is a parsed, usable DKIM key record (RFC 6376 §3.6.1).
type DKIMKey struct {
	KeyType  string   // k=: "rsa" (the default) or "ed25519" (RFC 8463)
	Bits     int      // RSA modulus size; 256 for ed25519
	Hashes   []string // h=: acceptable hash algorithms as listed; nil when absent (all)
	Services []string // s=: service types; nil when absent ("*")
	Flags    []string // t=: flags as listed ("y" testing, "s" strict)
}

// Testing reports whether the key carries the t=y flag: the domain is testing
// DKIM and verifiers must not treat failures differently (§3.6.1).
func (k *DKIMKey) Testing() bool { return slices.Contains(k.Flags, "y") }

// ParseDKIMKey parses a DKIM key record: a strict RFC 6376 tag-list (see
// ParseTagList; tag names are case-sensitive, so "P=" is not "p=") with
//
//   - v= optional, but when present the first tag, with the value "DKIM1";
//   - p= required: the base64 key, whitespace ignored; empty means revoked
//     (ErrDKIMRevoked);
//   - k= "rsa" (default) or "ed25519"; other types are unusable;
//   - h= when present must list "sha256": RFC 8301 §3.1 forbids sha1;
//   - s= when present must list "*" or "email";
//   - t= flags, kept; unknown tags are ignored.
//
// An RSA key must be a DER SubjectPublicKeyInfo (or, as some publishers do, a
// bare PKCS #1 RSAPublicKey) of at least 1024 bits (RFC 8301 §3.2); an
// ed25519 key the raw 32 octets (RFC 8463 §4.2). A record that fails any of
// these is malformed: the error says why, and the domain's status for that
// selector is none.
func ParseDKIMKey(txt string) (*DKIMKey, error) {
	tags, errs := parseTags(txt, tagSyntax{record: "dkim", validName: isTagName})
	if len(errs) > 0 {
		return nil, errs[0]
	}
	for i, t := range tags {
		if t.Name != "v" {
			continue
		}
		if i != 0 {
			return nil, syntaxErr("dkim", "v="+t.Value, "v= is not the first tag")
		}
		if t.Value != "DKIM1" {
			return nil, syntaxErr("dkim", "v="+t.Value, "version is not DKIM1")
		}
	}
	p, ok := tags.Get("p")
	if !ok {
		return nil, syntaxErr("dkim", "", "no p= tag")
	}
	p = removeWS(p)
	if p == "" {
		return nil, ErrDKIMRevoked
	}
	k := &DKIMKey{KeyType: "rsa"}
	if v, ok := tags.Get("k"); ok {
		k.KeyType = v
	}
	if v, ok := tags.Get("h"); ok {
		k.Hashes = splitList(v, ':')
		if !slices.Contains(k.Hashes, "sha256") {
			return nil, syntaxErr("dkim", "h="+v, "no acceptable hash algorithm (sha1 is not, RFC 8301)")
		}
	}
	if v, ok := tags.Get("s"); ok {
		k.Services = splitList(v, ':')
		if !slices.Contains(k.Services, "*") && !slices.Contains(k.Services, "email") {
			return nil, syntaxErr("dkim", "s="+v, "key is not for email")
		}
	}
	if v, ok := tags.Get("t"); ok {
		k.Flags = splitList(v, ':')
	}
	der, err := decodeBase64(p)
	if err != nil {
		return nil, syntaxErr("dkim", "", "p= is not base64")
	}
	switch k.KeyType {
	case "rsa":
		bits, err := rsaBits(der)
		if err != nil {
			return nil, syntaxErr("dkim", "", err.Error())
		}
		if bits < minRSABits {
			return nil, syntaxErr("dkim", "", "rsa key of "+strconv.Itoa(bits)+" bits is below 1024 (RFC 8301)")
		}
		k.Bits = bits
	case "ed25519":
		if len(der) != 32 {
			return nil, syntaxErr("dkim", "", "ed25519 key is not 32 octets")
		}
		k.Bits = 256
	default:
		return nil, syntaxErr("dkim", "k="+k.KeyType, "unknown key type")
	}
	return k, nil
}

// decodeBase64 accepts base64 with or without padding: RFC 6376's
// base64string makes the "=" padding optional.
func decodeBase64(s string) ([]byte, error) {
	return base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "="))
}

// rsaBits returns the modulus size of a DER RSA public key.
func rsaBits(der []byte) (int, error) {
	if pub, err := x509.ParsePKIXPublicKey(der); err == nil {
		rk, ok := pub.(*rsa.PublicKey)
		if !ok {
			return 0, errors.New("p= is not an rsa key")
		}
		return rk.N.BitLen(), nil
	}
	if rk, err := x509.ParsePKCS1PublicKey(der); err == nil {
		return rk.N.BitLen(), nil
	}
	return 0, errors.New("p= is not a DER rsa public key")
}

// DKIMResult is the DKIM signal of one selector, or of a domain (see
// CombineDKIM).
type DKIMResult struct {
	Selector string // the selector whose record decided; "" for a combined none
	Status   DKIMStatus
	Key      *DKIMKey // Status found only
	Err      error    // why a record that exists counts as none; nil otherwise
}

// DKIM judges the TXT records at <selector>._domainkey.<domain> (RFC 6376
// §3.6.2). No record gives none. Several records give none with
// ErrMultipleRecords: §3.6.2.2 leaves the outcome undefined, and verifiers
// differ in which one they use. One record gives found, revoked, or none
// with the reason it is malformed (see ParseDKIMKey). Records are not
// pre-filtered on "v=DKIM1" since v= is optional: an unrelated TXT at the
// name (a wildcard, say) is malformed, hence none.
func DKIM(selector string, records []string) DKIMResult {
	res := DKIMResult{Selector: selector}
	switch len(records) {
	case 0:
		return res
	case 1:
	default:
		res.Err = ErrMultipleRecords
		return res
	}
	key, err := ParseDKIMKey(records[0])
	switch {
	case errors.Is(err, ErrDKIMRevoked):
		res.Status = DKIMRevoked
	case err != nil:
		res.Err = err
	default:
		res.Status, res.Key = DKIMFound, key
	}
	return res
}

// CombineDKIM gives a domain's DKIM status from the results of the selectors
// tried, in the order given: the first found; else the first revoked; else
// none, carrying the first malformed record's result (if any) so that its
// reason can be logged.
func CombineDKIM(results []DKIMResult) DKIMResult {
	for _, r := range results {
		if r.Status == DKIMFound {
			return r
		}
	}
	for _, r := range results {
		if r.Status == DKIMRevoked {
			return r
		}
	}
	for _, r := range results {
		if r.Err != nil {
			return r
		}
	}
	return DKIMResult{}
}
