package platform

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
)

// maxAuthorization is the longest Authorization header read.
const maxAuthorization = 4096

// Postmark receives Postmark's webhooks, which are authenticated by the
// basic-auth credentials the account puts in the webhook URL
// (https://user:password@host/v1/outcomes/postmark?account=ID; Postmark,
// "Webhooks overview"). It needs no settings; the zero value is ready.
type Postmark struct{}

// PostmarkPassHash is the hash Postmark.Receive expects of a password:
// SHA-256, in hex.
func PostmarkPassHash(password string) string {
	s := sha256.Sum256([]byte(password))
	return hex.EncodeToString(s[:])
}

// Receive takes the body of a webhook POST, its Authorization header,
// and the account's user and password hash (PostmarkPassHash). Both the
// user and the password are compared in constant time, as SHA-256
// digests so that their lengths do not show either.
func (*Postmark) Receive(body []byte, authorization, user, passHash string) (Result, error) {
	want, err := hex.DecodeString(passHash)
	if user == "" || err != nil || len(want) != sha256.Size {
		return Result{}, refuse(ErrConfig, NamePostmark, nil, "no user, or the password hash is not 64 hex digits")
	}
	gotUser, gotPass, ok := basicAuth(authorization)
	if !ok {
		return Result{}, refuse(ErrSignature, NamePostmark, nil, "no basic-auth credentials")
	}
	gu, wu := sha256.Sum256([]byte(gotUser)), sha256.Sum256([]byte(user))
	gp := sha256.Sum256([]byte(gotPass))
	if subtle.ConstantTimeCompare(gu[:], wu[:])&subtle.ConstantTimeCompare(gp[:], want) != 1 {
		return Result{}, refuse(ErrSignature, NamePostmark, nil, "wrong user or password")
	}
	return parsePostmark(body)
}

// basicAuth reads the user and password of an Authorization header of
// the Basic scheme (RFC 7617 section 2).
func basicAuth(h string) (user, pass string, ok bool) {
	const prefix = "basic "
	if len(h) > maxAuthorization || len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", "", false
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(h[len(prefix):]))
	if err != nil {
		return "", "", false
	}
	return strings.Cut(string(b), ":")
}

// postmarkRecord is the part of a webhook's record verifyd reads
// (Postmark, "Delivery webhook", "Bounce webhook", "Spam complaint
// webhook", "Subscription change webhook").
type postmarkRecord struct {
	RecordType        string `json:"RecordType"`
	ID                number `json:"ID"`
	Type              string `json:"Type"`
	TypeCode          number `json:"TypeCode"`
	Email             string `json:"Email"`
	Recipient         string `json:"Recipient"`
	BouncedAt         string `json:"BouncedAt"`
	DeliveredAt       string `json:"DeliveredAt"`
	ChangedAt         string `json:"ChangedAt"`
	Details           string `json:"Details"`
	SuppressSending   bool   `json:"SuppressSending"`
	SuppressionReason string `json:"SuppressionReason"`
	Origin            string `json:"Origin"`
}

// postmarkBounces maps the bounce types of Postmark's list (Bounce API,
// "Bounce types") to an event type; a type not listed is skipped:
// Subscribe, AutoResponder, AddressChange, OpenRelayTest,
// ChallengeVerification (replies that are no failure to deliver),
// ManuallyDeactivated, Unconfirmed, SMTPApiError, InboundError,
// TemplateRenderingFailed (nothing was sent), and types Postmark adds.
// What refuses a message for a reason other than the address
// (SpamNotification, VirusNotification, Blocked, DMARCPolicy) or that
// Postmark could not classify (Unknown) is a soft bounce, which says
// nothing of the address.
var postmarkBounces = map[string]string{
	"HardBounce":        HardBounce,
	"BadEmailAddress":   HardBounce,
	"Transient":         SoftBounce,
	"SoftBounce":        SoftBounce,
	"DnsError":          SoftBounce,
	"Unknown":           SoftBounce,
	"SpamNotification":  SoftBounce,
	"VirusNotification": SoftBounce,
	"Blocked":           SoftBounce,
	"DMARCPolicy":       SoftBounce,
	"SpamComplaint":     Complaint,
	"Unsubscribe":       Unsubscribed,
}

// postmarkTypeCodes names the bounce type of a TypeCode, for a record
// without Type.
var postmarkTypeCodes = map[int]string{
	1: "HardBounce", 2: "Transient", 16: "Unsubscribe", 32: "Subscribe",
	64: "AutoResponder", 128: "AddressChange", 256: "DnsError",
	512: "SpamNotification", 1024: "OpenRelayTest", 2048: "Unknown",
	4096: "SoftBounce", 8192: "VirusNotification", 16384: "ChallengeVerification",
	100000: "BadEmailAddress", 100001: "SpamComplaint", 100002: "ManuallyDeactivated",
	100003: "Unconfirmed", 100006: "Blocked", 100007: "SMTPApiError",
	100008: "InboundError", 100009: "DMARCPolicy", 100010: "TemplateRenderingFailed",
}

// parsePostmark reads one webhook record.
//
//	RecordType          condition                                Type
//	Delivery                                                     delivered
//	Bounce              Type (postmarkBounces)                   its type, or skipped
//	SpamComplaint                                                complaint
//	SubscriptionChange  SuppressSending, ManualSuppression by    unsubscribed
//	                    the Recipient
//	anything else (Open, Click, inbound, other subscription changes)  skipped
//
// A subscription change for a hard bounce or a spam complaint is
// skipped: its Bounce or SpamComplaint record is the event, and an
// unsubscribe would say the address took the mail. A reactivation
// (SuppressSending false) and a suppression by the customer or
// Postmark are not the recipient's doing and are skipped too.
func parsePostmark(body []byte) (Result, error) {
	var kind struct {
		RecordType string `json:"RecordType"`
	}
	if err := json.Unmarshal(body, &kind); err != nil {
		return Result{}, refuse(ErrPayload, NamePostmark, nil, "not a JSON object")
	}
	switch kind.RecordType {
	case "Delivery", "Bounce", "SpamComplaint", "SubscriptionChange":
	default:
		return Result{Skipped: 1}, nil
	}
	var r postmarkRecord
	if err := json.Unmarshal(body, &r); err != nil {
		return Result{}, refuse(ErrPayload, NamePostmark, nil, "%s record does not parse", kind.RecordType)
	}
	id := string(r.ID)
	if id == "0" {
		id = "" // no id: the hash of the record stands for one
	}
	var e Event
	switch r.RecordType {
	case "Delivery":
		// No id: the hash of the record stands for one.
		e = Event{Email: r.Recipient, Type: Delivered, At: parseTime(r.DeliveredAt), Diagnostic: r.Details}
	case "Bounce":
		t := r.Type
		if t == "" {
			t = postmarkTypeCodes[r.TypeCode.int()]
		}
		typ, ok := postmarkBounces[t]
		if !ok {
			return Result{Skipped: 1}, nil
		}
		e = Event{ID: id, Email: r.Email, Type: typ, At: parseTime(r.BouncedAt), Diagnostic: r.Details}
	case "SpamComplaint":
		e = Event{ID: id, Email: r.Email, Type: Complaint, At: parseTime(r.BouncedAt)}
	case "SubscriptionChange":
		if !r.SuppressSending || r.SuppressionReason != "ManualSuppression" || r.Origin != "Recipient" {
			return Result{Skipped: 1}, nil
		}
		e = Event{Email: r.Recipient, Type: Unsubscribed, At: parseTime(r.ChangedAt)}
	}
	if err := settle(&e, NamePostmark, body); err != nil {
		return Result{}, refuse(ErrPayload, NamePostmark, err, "%s record", r.RecordType)
	}
	return Result{Events: []Event{e}}, nil
}
