package platform

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"
)

// The headers of a signed SendGrid Event Webhook request.
const (
	SendGridSignatureHeader = "X-Twilio-Email-Event-Webhook-Signature"
	SendGridTimestampHeader = "X-Twilio-Email-Event-Webhook-Timestamp"
)

// DefaultMaxSkew is how far from now a signed timestamp may be, by
// default (SendGrid's header, Mailgun's signature).
const DefaultMaxSkew = 5 * time.Minute

// SendGrid receives SendGrid's Event Webhook with signed requests on
// (SendGrid, "Getting Started with the Event Webhook Security
// Features"). The zero value works with the defaults.
type SendGrid struct {
	// MaxSkew is how far from now the signed timestamp may be, either
	// way; 0 means DefaultMaxSkew.
	MaxSkew time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// ParseSendGridKey reads the verification key SendGrid shows for signed
// events: base64 of a DER SubjectPublicKeyInfo of a P-256 ECDSA key.
// Settings may call it to check a key when it is saved.
func ParseSendGridKey(key string) (*ecdsa.PublicKey, error) {
	der, err := base64.StdEncoding.DecodeString(strings.TrimSpace(key))
	if err != nil {
		return nil, errors.New("not base64")
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, errors.New("not a public key (DER SubjectPublicKeyInfo)")
	}
	pub, ok := k.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		return nil, errors.New("not a P-256 ECDSA key")
	}
	return pub, nil
}

// Receive takes the body of an Event Webhook POST, a lookup of its
// headers and the account's verification key. The signature header is
// base64 of an ASN.1 DER ECDSA signature, with SHA-256, of the
// timestamp header followed by the raw body; a timestamp more than
// MaxSkew from now is refused (SendGrid signs no nonce: within the
// window a replayed request yields the same event ids again, which
// storage keeps once).
func (s *SendGrid) Receive(body []byte, header func(name string) string, publicKey string) (Result, error) {
	pub, err := ParseSendGridKey(publicKey)
	if err != nil {
		return Result{}, refuse(ErrConfig, NameSendGrid, err, "verification key")
	}
	sig64, ts := header(SendGridSignatureHeader), header(SendGridTimestampHeader)
	if sig64 == "" || ts == "" {
		return Result{}, refuse(ErrSignature, NameSendGrid, nil, "unsigned: no %s or %s header", SendGridSignatureHeader, SendGridTimestampHeader)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return Result{}, refuse(ErrSignature, NameSendGrid, nil, "timestamp %.20q is not Unix seconds", ts)
	}
	if !fresh(time.Unix(sec, 0), s.now(), s.maxSkew()) {
		return Result{}, refuse(ErrSignature, NameSendGrid, nil, "timestamp %d more than %v from now", sec, s.maxSkew())
	}
	sig, err := base64.StdEncoding.DecodeString(sig64)
	if err != nil {
		return Result{}, refuse(ErrSignature, NameSendGrid, nil, "signature is not base64")
	}
	h := sha256.New()
	h.Write([]byte(ts))
	h.Write(body)
	if !ecdsa.VerifyASN1(pub, h.Sum(nil), sig) {
		return Result{}, refuse(ErrSignature, NameSendGrid, nil, "signature does not verify")
	}
	return parseSendGrid(body)
}

// sendGridEvent is the part of an Event Webhook event verifyd reads
// (SendGrid, "Event Webhook Reference").
type sendGridEvent struct {
	Email     string `json:"email"`
	Timestamp number `json:"timestamp"`
	Event     string `json:"event"`
	EventID   string `json:"sg_event_id"`
	Type      string `json:"type"`     // of a bounce: "bounce" or "blocked"
	Status    string `json:"status"`   // the enhanced status code
	Reason    string `json:"reason"`   // a bounce's diagnostic; why a message was dropped
	Response  string `json:"response"` // the server's reply to a delivery
}

// parseSendGrid reads an Event Webhook body: a JSON array of events.
//
//	event              type or reason            Type
//	delivered                                    delivered
//	bounce             type "bounce"             hard_bounce
//	bounce             type "blocked", or other  soft_bounce
//	dropped            reason "Bounced Address"  hard_bounce
//	spamreport                                   complaint
//	unsubscribe                                  unsubscribed
//	group_unsubscribe                            unsubscribed
//	anything else (processed, deferred, other drops, open, click,
//	group_resubscribe...)                        skipped
func parseSendGrid(body []byte) (Result, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return Result{}, refuse(ErrPayload, NameSendGrid, nil, "not a JSON array")
	}
	var res Result
	for i := 0; dec.More(); i++ {
		if i == MaxEvents {
			return Result{}, refuse(ErrPayload, NameSendGrid, nil, "more than %d events", MaxEvents)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return Result{}, refuse(ErrPayload, NameSendGrid, nil, "event %d is not JSON", i)
		}
		var kind struct {
			Event  string `json:"event"`
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(raw, &kind) // what is not an event is skipped
		if !sendGridUsed(kind.Event, kind.Reason) {
			res.Skipped++
			continue
		}
		var se sendGridEvent
		if err := json.Unmarshal(raw, &se); err != nil {
			return Result{}, refuse(ErrPayload, NameSendGrid, nil, "%s event %d does not parse", kind.Event, i)
		}
		e := Event{ID: se.EventID, Email: se.Email, At: se.Timestamp.time()}
		switch se.Event {
		case "delivered":
			e.Type, e.Diagnostic = Delivered, se.Response
		case "bounce":
			e.Type, e.Enhanced, e.Diagnostic = SoftBounce, se.Status, se.Reason
			if se.Type == "bounce" {
				e.Type = HardBounce
			}
		case "dropped":
			// SendGrid did not send: an earlier hard bounce put the
			// address on its bounce list.
			e.Type, e.Diagnostic = HardBounce, se.Reason
		case "spamreport":
			e.Type = Complaint
		default: // unsubscribe, group_unsubscribe
			e.Type = Unsubscribed
		}
		if err := settle(&e, NameSendGrid, raw); err != nil {
			return Result{}, refuse(ErrPayload, NameSendGrid, err, "%s event %d", kind.Event, i)
		}
		res.Events = append(res.Events, e)
	}
	if _, err := dec.Token(); err != nil {
		return Result{}, refuse(ErrPayload, NameSendGrid, nil, "not a JSON array")
	}
	if _, err := dec.Token(); err != io.EOF {
		return Result{}, refuse(ErrPayload, NameSendGrid, nil, "data after the JSON array")
	}
	return res, nil
}

// sendGridUsed reports whether an event of this kind is an outcome.
func sendGridUsed(event, reason string) bool {
	switch event {
	case "delivered", "bounce", "spamreport", "unsubscribe", "group_unsubscribe":
		return true
	case "dropped":
		return strings.EqualFold(strings.TrimSpace(reason), "Bounced Address")
	}
	return false
}

// fresh reports whether t is within skew of now, either way.
func fresh(t, now time.Time, skew time.Duration) bool {
	d := now.Sub(t)
	return d <= skew && d >= -skew
}

func (s *SendGrid) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *SendGrid) maxSkew() time.Duration {
	if s.MaxSkew > 0 {
		return s.MaxSkew
	}
	return DefaultMaxSkew
}
