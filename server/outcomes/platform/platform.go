package platform

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Event is one delivery outcome, whatever platform reported it.
type Event struct {
	ID         string    // the platform's event id; when it has none, a stable hash of the platform name and the raw event, so a retried delivery maps to the same ID
	Email      string    // the recipient, as the platform wrote it
	Type       string    // one of: delivered, hard_bounce, soft_bounce, complaint, unsubscribed
	At         time.Time // when it happened (UTC)
	SMTPCode   int       // the remote MTA's reply code when known (550), else 0
	Enhanced   string    // the enhanced status code when known ("5.1.1"), else ""
	Diagnostic string    // the remote MTA's diagnostic text when known, at most 1000 bytes
}

// The five event types (Event.Type); storage's outcome events have the
// same names.
const (
	Delivered    = "delivered"
	HardBounce   = "hard_bounce"
	SoftBounce   = "soft_bounce"
	Complaint    = "complaint"
	Unsubscribed = "unsubscribed"
)

// The platforms' names: the {platform} of /v1/outcomes/{platform}, the
// Platform of an Error, and the first part of a hashed event id.
const (
	NameSES      = "ses"
	NameSendGrid = "sendgrid"
	NameMailgun  = "mailgun"
	NamePostmark = "postmark"
)

// Limits of a request and of an event's fields.
const (
	// MaxEvents is the most events one request may carry, used or not.
	MaxEvents = 10_000
	// MaxID is the longest event id kept as the platform wrote it; a
	// longer one is replaced by its hash.
	MaxID = 200
	// MaxEmail is the longest recipient taken.
	MaxEmail = 320
	// MaxDiagnostic is the longest diagnostic kept; a longer one is cut.
	MaxDiagnostic = 1000
)

// Result is what one request reported.
type Result struct {
	// Events are the outcomes, in the order the platform listed them.
	Events []Event
	// Skipped counts the events of kinds verifyd does not use (opens,
	// clicks, deferrals...), which are not errors.
	Skipped int
	// Confirmed is true when the request was an SNS subscription
	// confirmation and the subscription was confirmed.
	Confirmed bool
}

// The kinds of a refused request, for counting. Every error Receive
// returns is an *Error whose Kind is one of them (errors.Is works).
var (
	// ErrSignature: the request is not authentic: unsigned, forged,
	// stale, replayed, or signed with a certificate that is not trusted.
	ErrSignature = errors.New("platform: not authentic")
	// ErrPayload: the request is authentic (or could not be checked yet)
	// but is not what the platform documents.
	ErrPayload = errors.New("platform: malformed payload")
	// ErrNotAllowed: the SNS topic is not one of the account's, or a URL
	// the message names is on a host verifyd does not fetch from.
	ErrNotAllowed = errors.New("platform: not allowed")
	// ErrConfig: the account's own settings for the platform are
	// unusable (a key that does not parse, a password hash that is not
	// one).
	ErrConfig = errors.New("platform: unusable account settings")
	// ErrUnavailable: a request verifyd had to make (an SNS signing
	// certificate, a subscription confirmation) failed; the platform
	// should try again later.
	ErrUnavailable = errors.New("platform: platform unreachable")
)

// Error is a refused request. Its text is fit for logs (it holds no
// secret and no recipient address) but not for the response.
type Error struct {
	Kind     error  // ErrSignature, ErrPayload, ErrNotAllowed, ErrConfig or ErrUnavailable
	Platform string // NameSES...
	Reason   string // what failed: "signature does not verify"
	Err      error  // the underlying error, if any
}

func (e *Error) Error() string {
	s := "platform: " + e.Platform + ": " + e.Reason
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap gives the kind, and the underlying error if any.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Kind, e.Err}
	}
	return []error{e.Kind}
}

// refuse makes an *Error.
func refuse(kind error, platform string, err error, format string, args ...any) *Error {
	return &Error{Kind: kind, Platform: platform, Reason: fmt.Sprintf(format, args...), Err: err}
}

// settle checks the fields a parser filled in from the platform's event
// and bounds them: the recipient and the time are required; the id,
// when missing or too long, becomes a hash of the platform and raw; the
// codes are kept only when well-formed and, when missing, read from the
// diagnostic (ParseSMTP), which is cut to MaxDiagnostic bytes.
func settle(e *Event, platform string, raw []byte) error {
	switch {
	case e.Email == "":
		return errors.New("no recipient")
	case len(e.Email) > MaxEmail:
		return fmt.Errorf("recipient longer than %d bytes", MaxEmail)
	case !utf8.ValidString(e.Email) || strings.ContainsRune(e.Email, utf8.RuneError):
		return errors.New("recipient is not UTF-8 text")
	case e.At.IsZero():
		return errors.New("no time")
	case e.At.Year() < 2000 || e.At.Year() > 9999:
		return fmt.Errorf("time %d out of range", e.At.Year())
	}
	e.At = e.At.UTC()
	switch {
	case e.ID == "":
		e.ID = hashID(platform, raw)
	case len(e.ID) > MaxID || !utf8.ValidString(e.ID) || strings.ContainsRune(e.ID, utf8.RuneError):
		e.ID = hashID(platform, []byte(e.ID))
	}
	if e.SMTPCode < 200 || e.SMTPCode > 599 {
		e.SMTPCode = 0
	}
	if e.Enhanced = strings.TrimSpace(e.Enhanced); !validEnhanced(e.Enhanced) {
		e.Enhanced = ""
	}
	if e.SMTPCode == 0 || e.Enhanced == "" {
		code, enh := ParseSMTP(e.Diagnostic)
		if e.SMTPCode == 0 {
			e.SMTPCode = code
		}
		if e.Enhanced == "" {
			e.Enhanced = enh
		}
	}
	e.Diagnostic = clip(strings.TrimSpace(e.Diagnostic), MaxDiagnostic)
	return nil
}

// hashID is the event id of an event the platform gave none: the
// platform's name and 32 hex digits of SHA-256 over the name and the
// raw event, the same for the same event every time it is sent.
func hashID(platform string, raw []byte) string {
	h := sha256.New()
	h.Write([]byte(platform))
	h.Write([]byte{0})
	h.Write(raw)
	return platform + ":" + hex.EncodeToString(h.Sum(nil)[:16])
}

// recipientHash names a recipient in an event id: 16 hex digits of
// SHA-256 of the address, lower-cased, so that ids hold no address.
func recipientHash(email string) string {
	s := sha256.Sum256([]byte(strings.ToLower(email)))
	return hex.EncodeToString(s[:8])
}

// clip cuts s to at most n bytes, at a character boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// number is a JSON number, or a string holding one: platforms write
// codes, ids and timestamps either way. Any other JSON value is kept as
// nothing.
type number string

func (n *number) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*n = number(strings.TrimSpace(s))
	case len(b) > 0 && (b[0] == '-' || b[0] >= '0' && b[0] <= '9'):
		*n = number(b)
	default:
		*n = ""
	}
	return nil
}

// int is n as an integer; 0 when it is not one.
func (n number) int() int {
	i, err := strconv.Atoi(string(n))
	if err != nil {
		return 0
	}
	return i
}

// time is n as Unix seconds, fractions allowed; zero when it is not a
// time from the year 2000 to 9999.
func (n number) time() time.Time {
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || !(f >= 946684800 && f < 253402300800) {
		return time.Time{}
	}
	sec := int64(f)
	nsec := int64((f - float64(sec)) * 1e9)
	// Round to microseconds: a float64 of today's Unix time holds no
	// more, and rounding keeps 1700000000.1 from reading as ...099999.
	return time.Unix(sec, nsec).Round(time.Microsecond).UTC()
}

// parseTime reads an ISO 8601 date-time as the platforms write it,
// RFC 3339 with any number of fractional digits; without a zone it is
// UTC. Zero when it does not parse.
func parseTime(s string) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t
	}
	if t, err := time.Parse("2006-01-02T15:04:05.999999999", s); err == nil {
		return t
	}
	return time.Time{}
}
