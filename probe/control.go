package probe

import (
	"strings"
	"sync"
	"time"

	"github.com/verifyd/verifyd/probe/smtpclient"
)

// The positive control reads a refusal whose code and words leave it
// ambiguous (ambiguousRefusal): is it about the mailbox or about the
// prober? The session asks, in the same transaction, for
//
//   - postmaster@domain, which RFC 5321 §4.5.1 says every domain that
//     takes mail must accept (many virtual domains have none: a refusal of
//     it says nothing);
//   - a recipient of the domain this MX host accepted from the prober
//     recently (a known-good recipient, knownGood), when there is one; and
//   - a random local part, which cannot exist.
//
// The readings, for a target refused with reply R:
//
//   - postmaster or the known-good recipient accepted, and the random local
//     part refused with R's codes: R is the host's "no such mailbox"
//     (SMTPNoMailbox; the domain refuses unknown recipients). For a code
//     that names no cause, "alike" takes the same words too;
//   - the known-good recipient refused with R's codes: R is about the
//     prober (the only reading that cools the egress address);
//   - postmaster or the known-good recipient accepted, and the random
//     local part refused otherwise: R is not the host's "no such
//     mailbox"; it says nothing of the mailbox (unknown / smtp_rejected),
//     and the session asks once more from another egress address, in case
//     it was about the one that asked;
//   - anything else, postmaster refused alike included: the control tells
//     nothing and the codes' reading stands.

// knownGoodTTL is how long an accepted recipient serves as a host's
// known-good recipient: short, since a mailbox can go away, and a known-good
// recipient refused alike is read as a block of the prober.
const knownGoodTTL = time.Hour

// knownGoodMax bounds the (host, domain) pairs remembered; beyond it the
// cache starts over.
const knownGoodMax = 4096

// knownGood remembers, per MX host and domain, one recipient the host
// accepted from the prober recently. Per domain: a host's domains may have
// policies of their own, and the control asks whether this domain takes
// mail from the prober.
type knownGood struct {
	mu sync.Mutex
	m  map[knownGoodKey]knownGoodEntry
}

type knownGoodEntry struct {
	addr string
	at   time.Time
}

type knownGoodKey struct{ host, domain string }

// get returns the known-good recipient of domain at host at now ("" when
// none).
func (k *knownGood) get(host, domain string, now time.Time) string {
	k.mu.Lock()
	e, ok := k.m[knownGoodKey{host, domain}]
	k.mu.Unlock()
	if !ok || now.Sub(e.at) >= knownGoodTTL {
		return ""
	}
	return e.addr
}

// put records that host accepted addr, of domain, at now.
func (k *knownGood) put(host, domain, addr string, now time.Time) {
	key := knownGoodKey{host, domain}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil || len(k.m) >= knownGoodMax {
		if _, ok := k.m[key]; !ok {
			k.m = make(map[knownGoodKey]knownGoodEntry, 64)
		}
	}
	k.m[key] = knownGoodEntry{addr: addr, at: now}
}

// forget drops the known-good recipient of domain at host when it is addr.
func (k *knownGood) forget(host, domain, addr string) {
	key := knownGoodKey{host, domain}
	k.mu.Lock()
	defer k.mu.Unlock()
	if e, ok := k.m[key]; ok && e.addr == addr {
		delete(k.m, key)
	}
}

func postmaster(domain string) string { return "postmaster@" + domain }

// readRefusals reads the ambiguous refusals of ts, addresses of domain, with
// the positive control (see above), at MX host host. welcome reports that
// postmaster or the known-good recipient was accepted and no known-good
// recipient was refused like a target: whatever the refusals mean, they
// are no block of the egress address.
func (e *Engine) readRefusals(c *smtpclient.Client, mailFrom, host, domain string, ts []*target) (welcome bool) {
	now := e.opts.Now()
	addrs := []string{postmaster(domain), e.catchAll.probeLocal(domain) + "@" + domain}
	good := e.knownGood.get(host, domain, now)
	for _, t := range ts {
		if good == t.addr.Rcpt() {
			e.knownGood.forget(host, domain, good) // refused now: known good no longer
			good = ""
		}
	}
	if good != "" {
		addrs = append(addrs, good)
	}
	rs, ok := e.askControl(c, mailFrom, addrs)
	if !ok {
		controls.none.Add(len(ts))
		return false
	}
	pm, random := rs[0], rs[1]
	accepted := pm.Class.Class == smtpclient.Accepted
	var kg *smtpclient.RcptResult
	if good != "" {
		kg = &rs[2]
		if kg.Class.Class == smtpclient.Accepted {
			accepted = true
			e.knownGood.put(host, domain, good, now)
		}
	}
	blocked := false
	for _, t := range ts {
		switch {
		case kg != nil && kg.Class.Class != smtpclient.Accepted && sameRefusal(kg.Reply, t.refusal):
			// A recipient this host took within the hour is refused
			// alike: the host refuses the prober, whatever postmaster
			// got (Exim's stock ACL accepts postmaster before a DNSBL
			// deny).
			t.r.Evidence.SMTP = SMTPPolicy
			t.aboutUs, blocked = true, true
			controls.prober.Inc()
		case accepted && sameRefusal(random.Reply, t.refusal):
			t.r.Evidence.SMTP = SMTPNoMailbox
			e.catchAll.put(domain, CatchAllNo, now)
			controls.mailbox.Inc()
		case accepted && random.Class.Class != smtpclient.Accepted:
			// The host says "no such mailbox" otherwise: this refusal
			// is something else, about the address or about the
			// prober (Exim's "Administrative prohibition", a DNSBL
			// deny its ACL puts after postmaster and the recipient
			// check). No verdict on the mailbox; the session asks
			// once more from another egress address.
			t.r.Evidence.SMTP = SMTPRejected
			t.unexplained = true
			controls.unexplained.Inc()
		default:
			controls.none.Inc()
		}
	}
	return accepted && !blocked
}

// sameRefusal reports whether a and b are the same refusal: the same code
// and enhanced code and, where the code names no cause (bare, x.0.0 or a
// generic one), the same words, addresses and numbers aside.
func sameRefusal(a, b smtpclient.Reply) bool {
	if a.Code != b.Code || a.Enhanced != b.Enhanced {
		return false
	}
	if specificCode(a.Enhanced) {
		return true
	}
	return words(a.Text()) == words(b.Text())
}

// words is text's words, lower case, without the addresses and the
// words with digits (a queue id, an IP address, a timestamp) servers put
// in one reply and not the next. Only the first KiB is read: a server's
// text is the server's to make long.
func words(text string) string {
	text = text[:min(len(text), 1024)]
	var b strings.Builder
	for _, f := range strings.FieldsFunc(text, func(r rune) bool {
		return r == ' ' || r == '\t' || r == '<' || r == '>' || r == '[' || r == ']' || r == '(' || r == ')' || r == ',' || r == ';' || r == ':'
	}) {
		if strings.ContainsAny(f, "@0123456789") {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strings.ToLower(strings.TrimRight(f, ".!")))
	}
	return b.String()
}

// askControl asks the session for addrs in the current transaction and,
// when the server's recipient limit cuts them, in new ones (RSET, MAIL:
// one round trip with PIPELINING), one transaction per cut, so that a host
// that takes one recipient per transaction can be asked too. ok is false
// when not every address got an answer that says something (a
// greylisting, the session ending).
func (e *Engine) askControl(c *smtpclient.Client, mailFrom string, addrs []string) (_ []smtpclient.RcptResult, ok bool) {
	rs, rest, err := c.RcptMany(addrs)
	rcptsSent.control.Add(len(addrs) - len(rest))
	for err == nil && len(rest) > 0 {
		if c.Reset() != nil || c.MailPipelined(mailFrom, false) != nil {
			return nil, false
		}
		var more []smtpclient.RcptResult
		n := len(rest)
		more, rest, err = c.RcptMany(rest)
		rcptsSent.control.Add(n - len(rest))
		if len(more) == 0 {
			return nil, false // not even one recipient in a new transaction
		}
		rs = append(rs, more...)
	}
	if err != nil || len(rest) > 0 || len(rs) != len(addrs) {
		return nil, false
	}
	for _, r := range rs {
		switch r.Class.Class {
		case smtpclient.Greylisted, smtpclient.TempFail, smtpclient.TooManyRecipients, smtpclient.ServiceUnavailable:
			return nil, false
		}
		if w, _ := smtpclient.ReadWording(r.Reply.Text()); w == smtpclient.WordingTooManyRecipients {
			return nil, false // a 552 "too many recipients": the transaction's, no answer
		}
	}
	return rs, true
}
