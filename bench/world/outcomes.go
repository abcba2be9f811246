package world

// The outcome stream: deliveries rendered as a sending platform reports
// them, for a benchmark that feeds them back to a verifier.
//
//   - SendGridEvents: a SendGrid Event Webhook POST body, a JSON array of
//     events (docs.sendgrid.com, "Event Webhook Reference": delivered,
//     bounce with type "bounce" (hard) or "blocked" (soft), spamreport).
//   - OutcomeLines: verifyd's own POST /v1/outcomes body, JSON lines with
//     the fields of server/outcomes.Columns (docs/outcomes.md).
//
// Every delivery is one event with a stable id (Delivery.EventID), so the
// same deliveries render to the same bytes, and a report sent twice is
// recognised as one.

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// sum hashes what identifies a delivery: its address, time and event.
func (d Delivery) sum() [sha256.Size]byte {
	return sha256.Sum256([]byte(strings.ToLower(d.Email) + "\x00" + d.At.UTC().Format(time.RFC3339Nano) + "\x00" + d.Event))
}

// EventID is the delivery's event id: 22 characters of URL-safe base64
// (as SendGrid's sg_event_id) of a hash of the address, the time and the
// event: the same for the same delivery every time, another for a
// delivery to another address, at another time, or of another event.
func (d Delivery) EventID() string {
	s := d.sum()
	return base64.RawURLEncoding.EncodeToString(s[:16])
}

// messageIDs are SendGrid's ids of the message a delivery was about: the
// smtp-id header it gave the message and its sg_message_id.
func (d Delivery) messageIDs() (smtpID, sgMessageID string) {
	s := d.sum()
	x := hex.EncodeToString(s[16:])
	node := binary.BigEndian.Uint16(s[30:]) % 1000
	smtpID = fmt.Sprintf("<%s.%s.%s@ismtpd-%d>", x[:11], x[11:14], x[14:20], node)
	sgMessageID = fmt.Sprintf("%s.%s.%s.filterdrecv-%d-%s.0", x[:11], x[11:14], x[14:20], node, x[20:28])
	return smtpID, sgMessageID
}

// sendGridEvent is one event of SendGrid's Event Webhook.
type sendGridEvent struct {
	Email       string `json:"email"`
	Timestamp   int64  `json:"timestamp"`
	SMTPID      string `json:"smtp-id,omitempty"`
	Event       string `json:"event"`
	SGEventID   string `json:"sg_event_id"`
	SGMessageID string `json:"sg_message_id"`
	Response    string `json:"response,omitempty"` // delivered: the server's reply
	Reason      string `json:"reason,omitempty"`   // bounce: the server's reply
	Status      string `json:"status,omitempty"`   // bounce: the enhanced status code
	Type        string `json:"type,omitempty"`     // bounce: "bounce" (hard) or "blocked" (soft)
}

// SendGridEvents renders ds as the body of a SendGrid Event Webhook POST:
// a JSON array with one event per delivery, in order. A delivery is a
// "delivered" event with the server's reply as response; a hard bounce a
// "bounce" of type "bounce", a soft bounce a "bounce" of type "blocked",
// each with the enhanced code as status and the diagnostic as reason; a
// complaint a "spamreport" (its delivery is not rendered apart). The
// timestamp is Delivery.At in Unix seconds.
func SendGridEvents(ds []Delivery) []byte {
	evs := make([]sendGridEvent, len(ds))
	for i, d := range ds {
		smtpID, msgID := d.messageIDs()
		e := sendGridEvent{
			Email: d.Email, Timestamp: d.At.Unix(), SMTPID: smtpID,
			SGEventID: d.EventID(), SGMessageID: msgID,
		}
		switch d.Event {
		case EventDelivered:
			e.Event, e.Response = "delivered", d.Diagnostic
		case EventHardBounce, EventSoftBounce:
			e.Event, e.Reason, e.Status, e.Type = "bounce", d.Diagnostic, d.Enhanced, "bounce"
			if d.Event == EventSoftBounce {
				e.Type = "blocked"
			}
		case EventComplaint:
			e.Event, e.SMTPID = "spamreport", ""
		default:
			e.Event = d.Event
		}
		evs[i] = e
	}
	b, _ := json.Marshal(evs) // strings and integers: it cannot fail
	return b
}

// outcomeLine is one line of POST /v1/outcomes.
type outcomeLine struct {
	EventID      string `json:"event_id"`
	Email        string `json:"email"`
	Event        string `json:"event"`
	Time         string `json:"time"`
	SMTPCode     int    `json:"smtp_code,omitempty"`
	EnhancedCode string `json:"enhanced_code,omitempty"`
	Diagnostic   string `json:"diagnostic,omitempty"`
}

// OutcomeLines renders ds as the body of verifyd's POST /v1/outcomes in
// JSON lines (Content-Type application/x-ndjson): one line per delivery,
// in order, with event_id (Delivery.EventID), email, event, time (RFC
// 3339, UTC, to the second) and, when known, smtp_code, enhanced_code and
// diagnostic.
func OutcomeLines(ds []Delivery) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, d := range ds {
		// Strings and integers into a buffer: it cannot fail.
		_ = enc.Encode(outcomeLine{
			EventID: d.EventID(), Email: d.Email, Event: d.Event,
			Time:     d.At.UTC().Format(time.RFC3339),
			SMTPCode: d.SMTPCode, EnhancedCode: d.Enhanced, Diagnostic: d.Diagnostic,
		})
	}
	return b.Bytes()
}
