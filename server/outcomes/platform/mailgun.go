package platform

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"sync"
	"time"
)

// DefaultReplayCacheSize is how many Mailgun tokens are remembered at
// most, by default.
const DefaultReplayCacheSize = 100_000

// maxToken is the longest Mailgun token taken (Mailgun's are 50
// characters).
const maxToken = 256

// Mailgun receives Mailgun's JSON webhooks (Mailgun, "Securing
// Webhooks" and "Webhook Payloads"). The zero value works with the
// defaults; do not copy a Mailgun after its first Receive.
type Mailgun struct {
	// MaxAge is how far from now the signed timestamp may be, either
	// way; 0 means DefaultMaxSkew.
	MaxAge time.Duration
	// ReplayCacheSize is how many tokens are remembered at most; 0 means
	// DefaultReplayCacheSize. Past it the oldest are forgotten first.
	ReplayCacheSize int
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	replay replayCache
}

// mailgunBody is a Mailgun webhook's body: the signature and the event.
type mailgunBody struct {
	Signature struct {
		Timestamp       number `json:"timestamp"`
		Token           string `json:"token"`
		Signature       string `json:"signature"`
		ParentSignature string `json:"parent-signature"`
	} `json:"signature"`
	EventData json.RawMessage `json:"event-data"`
}

// Receive takes the body of a webhook POST and the account's webhook
// signing key. The signature is the hex HMAC-SHA256, keyed with the
// signing key, of the signature's timestamp followed by its token; a
// subaccount's event may carry the primary account's signature as
// parent-signature, which is accepted too. A timestamp more than MaxAge
// from now is refused, and so is a token this process has seen with
// the same key within MaxAge (the replay cache is in memory: a restart,
// or another box of a fleet, does not know the tokens seen before,
// though storage still keeps each event id once).
//
// Mailgun's signature does not cover event-data: it proves that Mailgun
// sent this timestamp and token, and the token is taken once.
func (m *Mailgun) Receive(body []byte, signingKey string) (Result, error) {
	if signingKey == "" {
		return Result{}, refuse(ErrConfig, NameMailgun, nil, "no webhook signing key")
	}
	var b mailgunBody
	if err := json.Unmarshal(body, &b); err != nil {
		return Result{}, refuse(ErrPayload, NameMailgun, nil, "not a JSON object with signature and event-data")
	}
	sig := b.Signature
	switch {
	case sig.Timestamp == "" || sig.Token == "" || sig.Signature == "":
		return Result{}, refuse(ErrSignature, NameMailgun, nil, "unsigned: no signature timestamp, token or signature")
	case len(sig.Token) > maxToken:
		return Result{}, refuse(ErrSignature, NameMailgun, nil, "token longer than %d bytes", maxToken)
	}
	sec, err := strconv.ParseInt(string(sig.Timestamp), 10, 64)
	if err != nil {
		return Result{}, refuse(ErrSignature, NameMailgun, nil, "timestamp %.20q is not Unix seconds", sig.Timestamp)
	}
	now, maxAge := m.now(), m.maxAge()
	if !fresh(time.Unix(sec, 0), now, maxAge) {
		return Result{}, refuse(ErrSignature, NameMailgun, nil, "timestamp %d more than %v from now", sec, maxAge)
	}
	mac := hmac.New(sha256.New, []byte(signingKey))
	mac.Write([]byte(string(sig.Timestamp) + sig.Token))
	want := mac.Sum(nil)
	ok := hexEqual(want, sig.Signature)
	if sig.ParentSignature != "" {
		ok = hexEqual(want, sig.ParentSignature) || ok
	}
	if !ok {
		return Result{}, refuse(ErrSignature, NameMailgun, nil, "signature does not verify")
	}
	key := sha256.Sum256([]byte(signingKey))
	if !m.replay.add(string(key[:16])+sig.Token, time.Unix(sec, 0).Add(maxAge), now, m.cacheSize()) {
		mailgunReplays.Inc()
		return Result{}, refuse(ErrSignature, NameMailgun, nil, "token seen before: a replay")
	}
	return parseMailgunEvent(b.EventData)
}

// hexEqual compares mac with the hex signature sig in constant time.
func hexEqual(mac []byte, sig string) bool {
	b, err := hex.DecodeString(sig)
	return err == nil && hmac.Equal(mac, b)
}

// mailgunEvent is the part of event-data verifyd reads.
type mailgunEvent struct {
	Event          string `json:"event"`
	ID             string `json:"id"`
	Timestamp      number `json:"timestamp"`
	Severity       string `json:"severity"`
	Recipient      string `json:"recipient"`
	DeliveryStatus struct {
		Code         number `json:"code"`
		EnhancedCode string `json:"enhanced-code"`
		Message      string `json:"message"`
		Description  string `json:"description"`
	} `json:"delivery-status"`
}

// parseMailgunEvent reads a webhook's event-data.
//
//	event         severity              Type
//	delivered                           delivered
//	failed        permanent             hard_bounce
//	failed        temporary, or other   soft_bounce
//	complained                          complaint
//	unsubscribed                        unsubscribed
//	anything else (accepted, rejected, opened, clicked, stored...)  skipped
//
// The diagnostic is delivery-status.message (the server's reply), else
// its description (Mailgun's words). A delivery-status.code that is not
// an SMTP reply code (Mailgun's own 605, "not delivering to previously
// bounced address") is no SMTPCode.
func parseMailgunEvent(raw json.RawMessage) (Result, error) {
	if len(raw) == 0 {
		return Result{}, refuse(ErrPayload, NameMailgun, nil, "no event-data")
	}
	var kind struct {
		Event string `json:"event"`
	}
	if err := json.Unmarshal(raw, &kind); err != nil {
		return Result{}, refuse(ErrPayload, NameMailgun, nil, "event-data is not a JSON object")
	}
	var typ string
	switch kind.Event {
	case "delivered":
		typ = Delivered
	case "failed":
		typ = SoftBounce
	case "complained":
		typ = Complaint
	case "unsubscribed":
		typ = Unsubscribed
	default:
		return Result{Skipped: 1}, nil
	}
	var me mailgunEvent
	if err := json.Unmarshal(raw, &me); err != nil {
		return Result{}, refuse(ErrPayload, NameMailgun, nil, "%s event does not parse", kind.Event)
	}
	if typ == SoftBounce && me.Severity == "permanent" {
		typ = HardBounce
	}
	ds := me.DeliveryStatus
	e := Event{
		ID: me.ID, Email: me.Recipient, Type: typ, At: me.Timestamp.time(),
		SMTPCode: ds.Code.int(), Enhanced: ds.EnhancedCode, Diagnostic: ds.Message,
	}
	if e.Diagnostic == "" {
		e.Diagnostic = ds.Description
	}
	if err := settle(&e, NameMailgun, raw); err != nil {
		return Result{}, refuse(ErrPayload, NameMailgun, err, "%s event", kind.Event)
	}
	return Result{Events: []Event{e}}, nil
}

// replayCache remembers tokens until they may be forgotten: when their
// timestamp is too old to be taken anyway.
type replayCache struct {
	mu    sync.Mutex
	seen  map[string]time.Time // token → when it may be forgotten
	queue []seenToken          // in the order they came
}

type seenToken struct {
	key    string
	forget time.Time
}

// add remembers key until forget and reports whether it is new. Before
// that it forgets, oldest first, the tokens whose time has passed and,
// while max are remembered, those whose time has not.
func (c *replayCache) add(key string, forget, now time.Time, max int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.seen[key]; ok && now.Before(t) {
		return false
	}
	if c.seen == nil {
		c.seen = map[string]time.Time{}
	}
	for len(c.queue) > 0 {
		old := c.queue[0]
		if now.Before(old.forget) && len(c.seen) < max {
			break
		}
		if c.seen[old.key].Equal(old.forget) {
			delete(c.seen, old.key)
		}
		c.queue = c.queue[1:]
	}
	c.seen[key] = forget
	c.queue = append(c.queue, seenToken{key, forget})
	return true
}

func (m *Mailgun) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

func (m *Mailgun) maxAge() time.Duration {
	if m.MaxAge > 0 {
		return m.MaxAge
	}
	return DefaultMaxSkew
}

func (m *Mailgun) cacheSize() int {
	if m.ReplayCacheSize > 0 {
		return m.ReplayCacheSize
	}
	return DefaultReplayCacheSize
}
