package probe

import (
	"strings"

	"github.com/verifyd/verifyd/probe/smtpclient"
)

// Recipients is how a provider's MX answers RCPT TO, which decides what an
// acceptance proves.
type Recipients uint8

// How providers answer RCPT.
const (
	// PerMailbox: the MX looks every recipient up in the provider's own
	// directory and refuses unknown ones at RCPT. An acceptance means a
	// mailbox, unless the domain's random probe is accepted too.
	PerMailbox Recipients = iota
	// AcceptsAll: the MX is known to accept every recipient at RCPT and
	// refuse unknown ones later, after DATA or by a bounce. That is a
	// belief about the provider, not evidence from the server: the random
	// probe is still sent. An acceptance proves a mailbox only once the
	// server has refused the random probe as no such mailbox (it checks
	// recipients after all); otherwise the verdict is risky/catch_all.
	AcceptsAll
	// Gateway: a filtering gateway in front of the customer's own servers,
	// whose recipient check is the customer's choice (a directory sync, or
	// none). An acceptance proves a mailbox only once the gateway has shown
	// that it checks recipients, by refusing the random probe; otherwise
	// the verdict is risky/catch_all.
	Gateway
)

// String returns the kind's name, as documented.
func (r Recipients) String() string {
	switch r {
	case AcceptsAll:
		return "accepts_all"
	case Gateway:
		return "gateway"
	}
	return "per_mailbox"
}

// ReplyRule reads one reply of a provider that says "no such mailbox" in a
// way RFC 3463 does not: a reply to RCPT with exactly this code and
// enhanced code (zero for none) means Class. A rule with Text matches the
// code and those words of the reply's text instead of the enhanced code:
// the provider's own wording for an account it does not have.
type ReplyRule struct {
	Code     int
	Enhanced smtpclient.Enhanced
	// Text, lower case, is looked for in the reply's lines.
	Text  string
	Class smtpclient.Class
}

// matches reports whether r is the reply the rule reads.
func (rule *ReplyRule) matches(r smtpclient.Reply) bool {
	if rule.Code != r.Code {
		return false
	}
	if rule.Text == "" {
		return rule.Enhanced == r.Enhanced
	}
	return containsFold(r.Text(), rule.Text)
}

// containsFold reports whether s contains the lower-case ASCII word w,
// ignoring the case of s.
func containsFold(s, w string) bool {
	for i := 0; i+len(w) <= len(s); i++ {
		j := 0
		for ; j < len(w); j++ {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != w[j] {
				break
			}
		}
		if j == len(w) {
			return true
		}
	}
	return false
}

// Provider is a large mailbox provider or email security gateway, as the
// engine recognises it. probe/README.md prints the table with its sources;
// TestProviderTableDocumented keeps the two in step.
type Provider struct {
	// Name is the provider's label in metrics and logs: lower case, stable.
	Name string
	// MX are the host-name suffixes of the provider's MX hosts, lower case
	// without a trailing dot: "google.com" matches aspmx.l.google.com and
	// google.com itself, never evilgoogle.com.
	MX []string
	// Banner are lower-case words looked for in the 220 greeting and the
	// first line of the EHLO reply, for hosts whose names say nothing (a
	// customer's own name CNAMEd to the provider, an on-premises gateway).
	// They only name the provider: no verdict is read from a server's text.
	Banner []string
	// Recipients is how the provider answers RCPT.
	Recipients Recipients
	// Replies are the provider's own ways of saying "no such mailbox".
	Replies []ReplyRule
	// RecipientPolicy: the provider's 5.7.x to a RCPT refuses that
	// recipient, not the prober (Yandex says "550 5.7.1 No such user!").
	// The verdict is still read from the code (unknown / smtp_rejected),
	// but the egress address does not cool for the host: the next
	// recipient, of this domain or another the host serves, is asked as
	// usual.
	RecipientPolicy bool
}

// classify applies p's reply rules to a RCPT reply the generic classifier
// read as cls. A rule makes the class certain (not Weak): the provider is
// known to mean it; ruled says one applied. The rules are read whatever
// p.Recipients says: a provider that accepts every recipient may still
// refuse one, in its own words, and that refusal is evidence.
func (p *Provider) classify(r smtpclient.Reply, cls smtpclient.Classification) (_ smtpclient.Classification, ruled bool) {
	if p == nil {
		return cls, false
	}
	for i := range p.Replies {
		if rule := &p.Replies[i]; rule.matches(r) {
			return smtpclient.Classification{Class: rule.Class}, true
		}
	}
	return cls, false
}

// name is p's metric and log label: "other" for an MX no fingerprint
// matches.
func (p *Provider) name() string {
	if p == nil {
		return ProviderOther
	}
	return p.Name
}

// ProviderOther and ProviderNone are the provider labels of a session with
// an MX no fingerprint matches, and of a result no session was made for.
const (
	ProviderOther = "other"
	ProviderNone  = "none"
)

func enh(class, subject, detail int) smtpclient.Enhanced {
	return smtpclient.Enhanced{Class: class, Subject: subject, Detail: detail}
}

// providers is the fingerprint table. A session's provider is found from
// the MX host's name (the longest matching suffix), else from the host names
// the server gives in its greeting and EHLO reply (the same suffixes), else
// from a word of those lines (Banner, in table order). Sources are in
// probe/README.md ("Providers").
var providers = []Provider{
	{
		Name: "google",
		// aspmx.l.google.com and alt1-4, smtp.google.com (Workspace
		// since 2023), gmail-smtp-in.l.google.com, aspmx2-5.googlemail.com.
		MX: []string{"google.com", "googlemail.com"},
		// "220 mx.google.com ESMTP <id> - gsmtp".
		Banner: []string{"gsmtp"},
		// Gmail and Workspace refuse unknown recipients at RCPT with
		// 550-5.1.1 (multi-line) and disabled accounts with 550 5.2.1.
		Recipients: PerMailbox,
	},
	{
		// Outlook.com, Hotmail, Live, MSN: the consumer service.
		Name:       "outlook",
		MX:         []string{"olc.protection.outlook.com", "hotmail.com"},
		Recipients: PerMailbox,
		Replies: []ReplyRule{
			// "550 5.5.0 Requested action not taken: mailbox
			// unavailable": 5.5.0 is a protocol status in RFC 3463,
			// used here for an unknown recipient.
			{Code: 550, Enhanced: enh(5, 5, 0), Class: smtpclient.NoMailbox},
		},
	},
	{
		// Exchange Online: a tenant's MX is <tenant>.mail.protection.outlook.com.
		Name: "microsoft365",
		// <domain-dashed>.mail.protection.outlook.com; *.mail.eo.outlook.com
		// (older tenants); *.mx.microsoft (tenants with DANE). The
		// greeting's host is <node>.mail.protection.outlook.com too.
		MX: []string{"mail.protection.outlook.com", "protection.outlook.com", "eo.outlook.com", "mx.microsoft",
			"protection.partner.outlook.cn"},
		// With directory-based edge blocking (the default for an
		// authoritative domain) an unknown recipient gets 550 5.4.1
		// "Recipient address rejected: Access denied"; without it, every
		// recipient is accepted and the random probe shows it. A
		// recipient the directory lookup misses later is 550 5.1.10
		// "RESOLVER.ADR.RecipientNotFound", not RFC 7505's null MX.
		Recipients: PerMailbox,
		Replies: []ReplyRule{
			{Code: 550, Enhanced: enh(5, 4, 1), Class: smtpclient.NoMailbox},
			{Code: 550, Enhanced: enh(5, 1, 10), Class: smtpclient.NoMailbox},
		},
	},
	{
		// Yahoo Mail, AOL, and domains hosted by Yahoo.
		Name: "yahoo",
		// mta5-7.am0.yahoodns.net, mx-aol.mail.gm0.yahoodns.net; the
		// greeting's host is mta<n>.mail.<dc>.yahoo.com.
		MX: []string{"yahoodns.net", "yahoo.com", "aol.com"},
		// Yahoo answers 250 to every RCPT and refuses an unknown
		// recipient after DATA ("554 delivery error: dd This user doesn't
		// have a yahoo.com account"). When it does refuse at RCPT it
		// says "552 1 Requested mail action aborted, mailbox not found":
		// a bare 552 (exceeded storage, RFC 5321 §4.2.3) said of a
		// mailbox that does not exist; and a server of its that checks
		// recipients at RCPT uses the DATA wording there, a bare 554
		// (transaction failed) whose text says which: no such account,
		// or "This mailbox is disabled (554.30)".
		Recipients: AcceptsAll,
		Replies: []ReplyRule{
			{Code: 552, Class: smtpclient.NoMailbox},
			{Code: 554, Text: "this user doesn't have a", Class: smtpclient.NoMailbox},
			{Code: 554, Text: "this mailbox is disabled", Class: smtpclient.Disabled},
		},
	},
	{
		Name:       "icloud",
		MX:         []string{"mail.icloud.com", "icloud.com"},
		Recipients: PerMailbox,
	},
	{
		Name:       "proofpoint",
		MX:         []string{"pphosted.com", "ppe-hosted.com", "proofpoint.com"},
		Banner:     []string{"proofpoint", "pphosted"},
		Recipients: Gateway,
	},
	{
		Name:       "mimecast",
		MX:         []string{"mimecast.com", "mimecast.co.za", "mimecast-offshore.com"},
		Banner:     []string{"mimecast"},
		Recipients: Gateway,
	},
	{
		Name:       "barracuda",
		MX:         []string{"barracudanetworks.com", "cuda-inc.com"},
		Banner:     []string{"barracuda"},
		Recipients: Gateway,
	},
	{
		Name:       "cisco",
		MX:         []string{"iphmx.com", "etd.cisco.com"},
		Banner:     []string{"ironport"},
		Recipients: Gateway,
	},
	{
		// SolarWinds SpamExperts (N-able Mail Assure).
		Name:       "spamexperts",
		MX:         []string{"antispamcloud.com"},
		Recipients: Gateway,
	},
	{
		Name:       "zoho",
		MX:         []string{"zoho.com", "zoho.eu", "zoho.in", "zohomail.com"},
		Recipients: PerMailbox,
	},
	{
		Name:       "fastmail",
		MX:         []string{"messagingengine.com"},
		Recipients: PerMailbox,
	},
	{
		Name:       "proton",
		MX:         []string{"protonmail.ch"},
		Recipients: PerMailbox,
	},
	{
		Name:       "yandex",
		MX:         []string{"yandex.net", "yandex.ru"},
		Recipients: PerMailbox,
		// "550 5.7.1 No such user!" to unknown recipients.
		RecipientPolicy: true,
	},
	{
		Name:       "mailru",
		MX:         []string{"mail.ru"},
		Recipients: PerMailbox,
	},
	{
		// GMX and WEB.DE (United Internet): "gmx.net (mxgmx117) Nemesis
		// ESMTP Service ready".
		Name:       "gmx",
		MX:         []string{"gmx.net", "gmx.com", "web.de"},
		Banner:     []string{"nemesis esmtp"},
		Recipients: PerMailbox,
	},
}

// providerIndex is the engine's index of providers.
var providerIndex = newProviderTable(providers)

// providerTable finds a host's provider.
type providerTable struct {
	bySuffix map[string]*Provider
	banner   []bannerWord
}

type bannerWord struct {
	word string
	p    *Provider
}

func newProviderTable(ps []Provider) *providerTable {
	t := &providerTable{bySuffix: map[string]*Provider{}}
	for i := range ps {
		p := &ps[i]
		for _, s := range p.MX {
			if _, dup := t.bySuffix[s]; !dup {
				t.bySuffix[s] = p
			}
		}
		for _, w := range p.Banner {
			t.banner = append(t.banner, bannerWord{w, p})
		}
	}
	return t
}

// byName returns the provider of that name, or nil.
func (t *providerTable) byName(name string) *Provider {
	for _, p := range t.bySuffix {
		if p.Name == name {
			return p
		}
	}
	for _, w := range t.banner {
		if w.p.Name == name {
			return w.p
		}
	}
	return nil
}

// byMX returns the provider whose MX suffix matches host, the longest
// suffix first, or nil. host is an MX name as DNS gave it.
func (t *providerTable) byMX(host string) *Provider {
	host = strings.ToLower(strings.TrimSuffix(host, ".")) // no copy when already lower case
	for s := host; s != ""; {
		if p := t.bySuffix[s]; p != nil {
			return p
		}
		i := strings.IndexByte(s, '.')
		if i < 0 {
			break
		}
		s = s[i+1:]
	}
	return nil
}

// byBanner returns the provider of the host names a server gives itself in
// its greeting and EHLO reply, or of a word of those lines, or nil.
func (t *providerTable) byBanner(greeting, bannerHost, ehloHost string) *Provider {
	if p := t.byMX(bannerHost); p != nil {
		return p
	}
	if p := t.byMX(ehloHost); p != nil {
		return p
	}
	if greeting == "" && ehloHost == "" {
		return nil
	}
	g, e := strings.ToLower(greeting), strings.ToLower(ehloHost)
	for _, w := range t.banner {
		if strings.Contains(g, w.word) || strings.Contains(e, w.word) {
			return w.p
		}
	}
	return nil
}

// ProviderOfMX names the provider whose host mxHost is (a label of
// verifyd_probe_provider_results_total: "google", "microsoft", …), or
// ProviderOther.
func ProviderOfMX(mxHost string) string { return providerIndex.byMX(mxHost).name() }
