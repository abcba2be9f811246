package platform

import (
	"encoding/json"
	"time"
)

// sesEvent is an Amazon SES event as SNS carries it in a notification's
// Message: a notification ("notificationType") or an event publishing
// record ("eventType"), both with the same bounce, complaint and
// delivery objects (Amazon SES Developer Guide, "Amazon SNS notification
// contents for Amazon SES" and "Event data that Amazon SES publishes to
// Amazon SNS").
type sesEvent struct {
	NotificationType string `json:"notificationType"`
	EventType        string `json:"eventType"`
	Mail             struct {
		MessageID string `json:"messageId"`
		Timestamp string `json:"timestamp"`
	} `json:"mail"`
	Bounce struct {
		BounceType        string `json:"bounceType"`
		FeedbackID        string `json:"feedbackId"`
		Timestamp         string `json:"timestamp"`
		BouncedRecipients []struct {
			EmailAddress   string `json:"emailAddress"`
			Status         string `json:"status"`
			DiagnosticCode string `json:"diagnosticCode"`
		} `json:"bouncedRecipients"`
	} `json:"bounce"`
	Complaint struct {
		FeedbackID           string `json:"feedbackId"`
		Timestamp            string `json:"timestamp"`
		ComplaintSubType     string `json:"complaintSubType"`
		ComplainedRecipients []struct {
			EmailAddress string `json:"emailAddress"`
		} `json:"complainedRecipients"`
	} `json:"complaint"`
	Delivery struct {
		Timestamp    string   `json:"timestamp"`
		Recipients   []string `json:"recipients"`
		SMTPResponse string   `json:"smtpResponse"`
	} `json:"delivery"`
}

// parseSES reads the SES event of the SNS notification snsID, sent at
// snsTime: one event per recipient of a Bounce, Complaint or Delivery.
// A Message that is not an SES event (SES's own notice that a topic was
// set up, another publisher's message) or an event of another kind
// (Send, Reject, Open, Click, DeliveryDelay...) is skipped.
//
// A recipient's event id is the SES id of what happened (a bounce's or
// a complaint's feedbackId; for a delivery, the message's messageId), a
// colon and 16 hex digits of the recipient's hash: the same however SES
// groups recipients into notifications, and whichever SNS message
// carries it (a notification and an event publishing record of one
// bounce are one event).
func parseSES(snsID, message string, snsTime time.Time) (Result, error) {
	var kind struct {
		NotificationType string `json:"notificationType"`
		EventType        string `json:"eventType"`
	}
	if json.Unmarshal([]byte(message), &kind) != nil {
		return Result{Skipped: 1}, nil
	}
	k := kind.NotificationType
	if k == "" {
		k = kind.EventType
	}
	if k != "Bounce" && k != "Complaint" && k != "Delivery" {
		return Result{Skipped: 1}, nil
	}
	var ev sesEvent
	if err := json.Unmarshal([]byte(message), &ev); err != nil {
		return Result{}, refuse(ErrPayload, NameSES, nil, "%s event does not parse", k)
	}
	when := func(ts string) time.Time {
		for _, s := range []string{ts, ev.Mail.Timestamp} {
			if t := parseTime(s); !t.IsZero() {
				return t
			}
		}
		return snsTime
	}
	base := func(id string) string {
		if id != "" {
			return id
		}
		return snsID
	}
	var events []Event
	switch k {
	case "Bounce":
		b := ev.Bounce
		typ := SoftBounce // Transient, Undetermined, and whatever SES adds
		if b.BounceType == "Permanent" {
			typ = HardBounce
		}
		for _, r := range b.BouncedRecipients {
			events = append(events, Event{
				ID:    base(b.FeedbackID) + ":" + recipientHash(r.EmailAddress),
				Email: r.EmailAddress, Type: typ, At: when(b.Timestamp),
				Enhanced: r.Status, Diagnostic: r.DiagnosticCode,
			})
		}
	case "Complaint":
		c := ev.Complaint
		if c.ComplaintSubType == "OnAccountSuppressionList" {
			// Not sent: an earlier complaint put the address on the
			// account's suppression list; that complaint was the event.
			return Result{Skipped: 1}, nil
		}
		for _, r := range c.ComplainedRecipients {
			events = append(events, Event{
				ID:    base(c.FeedbackID) + ":" + recipientHash(r.EmailAddress),
				Email: r.EmailAddress, Type: Complaint, At: when(c.Timestamp),
			})
		}
	case "Delivery":
		d := ev.Delivery
		for _, r := range d.Recipients {
			events = append(events, Event{
				ID:    base(ev.Mail.MessageID) + ":" + recipientHash(r),
				Email: r, Type: Delivered, At: when(d.Timestamp),
				Diagnostic: d.SMTPResponse,
			})
		}
	}
	if len(events) > MaxEvents {
		return Result{}, refuse(ErrPayload, NameSES, nil, "more than %d recipients", MaxEvents)
	}
	if len(events) == 0 {
		return Result{}, refuse(ErrPayload, NameSES, nil, "%s event without recipients", k)
	}
	for i := range events {
		if err := settle(&events[i], NameSES, nil); err != nil {
			return Result{}, refuse(ErrPayload, NameSES, err, "%s event, recipient %d", k, i)
		}
	}
	return Result{Events: events}, nil
}
