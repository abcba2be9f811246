package storage

import (
	"encoding/json"
	"time"
	"unicode/utf8"
)

// Delivery outcomes: what happened when an account's mail was sent to an
// address verifyd had judged (docs/outcomes.md). The sending platform
// reports each message as delivered, bounced or complained about; verifyd
// stores the report with the verdict it matched, per account, to measure
// its accuracy on the account's own traffic and to learn from it.

// Outcome events.
const (
	OutcomeDelivered    = "delivered"
	OutcomeHardBounce   = "hard_bounce"
	OutcomeSoftBounce   = "soft_bounce"
	OutcomeComplaint    = "complaint"
	OutcomeUnsubscribed = "unsubscribed"
)

// OutcomeEvents lists the events, in the order reports list them.
var OutcomeEvents = []string{OutcomeDelivered, OutcomeHardBounce, OutcomeSoftBounce, OutcomeComplaint, OutcomeUnsubscribed}

// Limits of an outcome's fields.
const (
	MaxOutcomeEventID    = 200
	MaxOutcomeDiagnostic = 1000
)

// Outcome is one delivery outcome and the verdict it was matched to.
type Outcome struct {
	Account string
	// EventID names the event: a second outcome with the same id in the
	// account is the same event (PutOutcomes keeps the first).
	EventID string
	// Email is the address in canonical form; it is matched lower-cased
	// (CacheEmail).
	Email string
	Event string
	// At is when it happened (millisecond precision).
	At time.Time
	// Source is who reported it: "api" (POST /v1/outcomes) or a platform
	// ("ses", "sendgrid", "mailgun", "postmark").
	Source string
	// SMTPCode, Enhanced and Diagnostic are what the remote MTA said, when
	// known (0 and "" when not).
	SMTPCode   int
	Enhanced   string
	Diagnostic string
	// ReceivedAt is when verifyd stored it.
	ReceivedAt time.Time
	// Verdict is the account's latest verdict for the address before At,
	// within the matching window; zero (Verdict.ResultID "") when none
	// matched.
	Verdict Verdict
}

// Matched reports whether the outcome was matched to a verdict.
func (o Outcome) Matched() bool { return o.Verdict.ResultID != "" }

// Verdict is what verifyd answered for an address at one time: the parts
// of a result that accuracy is measured on.
type Verdict struct {
	ResultID string
	Status   string
	Score    int
	Reason   string
	CatchAll bool
	// MXHost is the host whose answer made the verdict (checks.mx_host).
	MXHost   string
	ProbedAt time.Time
}

// VerdictOf returns the verdict of a result: its status and score (the
// engine's raw score when the receipt says it was calibrated), and from
// its receipt the reason, catch-all flag and MX host.
func VerdictOf(r Result) Verdict {
	v := Verdict{ResultID: r.ID, Status: r.Status, Score: r.Score, ProbedAt: r.ProbedAt}
	var rec struct {
		Checks struct {
			Reason   string `json:"reason"`
			CatchAll bool   `json:"is_catch_all"`
			MXHost   string `json:"mx_host"`
		} `json:"checks"`
		Calibration *struct {
			RawScore int `json:"raw_score"`
		} `json:"calibration"`
	}
	if len(r.Receipt) > 0 && json.Unmarshal(r.Receipt, &rec) == nil {
		v.Reason, v.CatchAll, v.MXHost = rec.Checks.Reason, rec.Checks.CatchAll, rec.Checks.MXHost
		if rec.Calibration != nil {
			// Accuracy and the next calibration measure the engine's own
			// score, not one an earlier calibration made.
			v.Score = rec.Calibration.RawScore
		}
	}
	return v
}

// VerdictQuery asks for the account's latest verdict for Email probed at
// or before Before.
type VerdictQuery struct {
	Email  string
	Before time.Time
}

// OutcomeSettings is how an account's sending platforms report to verifyd
// (/v1/outcomes/{platform}); empty fields turn a platform off.
type OutcomeSettings struct {
	// SESTopics are the SNS topic ARNs whose notifications are taken.
	SESTopics []string `json:"ses_topics,omitempty"`
	// SendGridKey is SendGrid's signed-event verification key (base64 of
	// a P-256 public key): public, kept as given.
	SendGridKey string `json:"sendgrid_key,omitempty"`
	// MailgunKey is Mailgun's webhook signing key. HMAC verification needs
	// the key itself, so it is kept as given, like the webhook secrets.
	MailgunKey string `json:"mailgun_key,omitempty"`
	// PostmarkUser and PostmarkPassHash are the basic-auth credentials
	// Postmark sends: the user, and the SHA-256 of the password (hex),
	// which verifyd makes and shows once.
	PostmarkUser     string `json:"postmark_user,omitempty"`
	PostmarkPassHash string `json:"postmark_pass_hash,omitempty"`
}

// IsAddressEvidence reports whether an outcome is evidence about its
// address (AddressEvidence): a delivery, or a hard bounce.
func IsAddressEvidence(o Outcome) bool {
	return o.Event == OutcomeDelivered || o.Event == OutcomeHardBounce
}

// CheckOutcome checks an outcome before it is stored and puts its times
// at millisecond precision.
func CheckOutcome(o *Outcome) error {
	switch {
	case o.EventID == "" || len(o.EventID) > MaxOutcomeEventID || !utf8.ValidString(o.EventID):
		return invalidf("an outcome's event id must be 1 to %d bytes of UTF-8", MaxOutcomeEventID)
	case o.Email == "":
		return invalidf("an outcome needs an email")
	case o.At.IsZero():
		return invalidf("an outcome needs a time")
	case len(o.Diagnostic) > MaxOutcomeDiagnostic:
		return invalidf("an outcome's diagnostic is longer than %d bytes", MaxOutcomeDiagnostic)
	case o.SMTPCode < 0 || o.SMTPCode > 599:
		return invalidf("SMTP code %d", o.SMTPCode)
	}
	known := false
	for _, e := range OutcomeEvents {
		known = known || o.Event == e
	}
	if !known {
		return invalidf("outcome event %q", o.Event)
	}
	o.At = o.At.UTC().Truncate(time.Millisecond)
	o.Verdict.ProbedAt = o.Verdict.ProbedAt.UTC().Truncate(time.Millisecond)
	return nil
}
