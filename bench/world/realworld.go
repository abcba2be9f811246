package world

import (
	"fmt"
	"strings"
	"time"
)

// Profiles of Generate (GenOptions.Profile).
const (
	// ProfileSynthetic makes the domains of GenOptions' behaviour
	// fractions, each with a mail host of its own.
	ProfileSynthetic = ""
	// ProfileRealWorld makes the mail of a customer's list as it is: half
	// the addresses at consumer mailbox providers, weighted by their
	// published shares of consumer mail, half at business domains, whose
	// MX providers are weighted by their published shares of domains'
	// MX records, the rest self-hosted servers that refuse unknown local
	// parts in their MTA's stock words (Exim, Postfix, OpenSMTPD, with
	// and without a postmaster) or show one odd behaviour of
	// probe/README.md's "Real servers" table (selfHosted). Hosts play the
	// providers (Host.Provider) with their real MX names, greetings and
	// replies. The behaviour fractions of GenOptions are not used.
	// bench/world/README.md ("The real-world profile") has the shares and
	// their sources, bench/RESULTS.md ("Real-world mix") the accuracy.
	ProfileRealWorld = "realworld"
	// ProfileFeedback is a small synthetic world for a benchmark of
	// learning from delivery outcomes (validate, send, report the
	// outcomes, validate again): 200 domains by default (2,000
	// addresses), a fifth of them catch-alls at RCPT that tell apart only
	// at delivery — true catch-alls, accept-then-bounce, dropping unknown
	// users — beside plain domains, greylisting, a policy block, dead
	// domains, and full, over-quota and disabled mailboxes (feedbackMix
	// has the shares). The behaviour fractions of GenOptions are replaced;
	// its addresses are labelled by behaviour (Expectation.Group).
	ProfileFeedback = "feedback"
)

// consumerShares are consumer mailbox providers' shares of the mail of a
// US consumer list: Mapp, Global Provider Report 2019 (170 million emails,
// August-September 2019): Gmail 50.1 %, Verizon Media (Yahoo, AOL) 22.6 %,
// Microsoft 12.4 %, Comcast 2.0 %, Apple 1.6 %, AT&T 1.1 %; the other
// 10.2 % are spread here over the other providers of the fingerprint table
// (an assumption: the report does not break them down). Within Verizon and
// Microsoft the split between their domains is an assumption too.
var consumerShares = []struct {
	domain, provider string
	share            float64
}{
	{"gmail.com", "google", 50.1},
	{"yahoo.com", "yahoo", 15.1}, {"aol.com", "yahoo", 7.5},
	{"hotmail.com", "outlook", 6.2}, {"outlook.com", "outlook", 4.4}, {"live.com", "outlook", 1.8},
	{"comcast.net", "", 2.0},
	{"icloud.com", "icloud", 1.6},
	{"att.net", "", 1.1},
	{"gmx.net", "gmx", 3.0}, {"web.de", "gmx", 2.0},
	{"yandex.ru", "yandex", 1.5}, {"mail.ru", "mailru", 1.5},
	{"proton.me", "proton", 1.0}, {"zohomail.com", "zoho", 0.6}, {"fastmail.com", "fastmail", 0.6},
}

// businessShares are MX providers' shares of domains: Tranco top 1M,
// March 2023, by MX domain (J. Schaumann, "MX diversity",
// netmeister.org/blog/mx-diversity.html): Google 41.1 %, Microsoft 19.6 %,
// Yandex 4.1 %, Proofpoint 3.3 %, Mimecast 2.7 %, Barracuda 1.2 %, Zoho
// 1.1 %, Cisco 0.8 %, Mail.ru 0.7 %; the remaining 25.4 % are self-hosted
// or smaller providers, played by selfHosted.
var businessShares = []struct {
	provider string
	share    float64
}{
	{"google", 41.1}, {"microsoft365", 19.6}, {"yandex", 4.1}, {"proofpoint", 3.3}, {"mimecast", 2.7},
	{"barracuda", 1.2}, {"zoho", 1.1}, {"cisco", 0.8}, {"mailru", 0.7}, {"", 25.4},
}

// selfHosted are the behaviours of the self-hosted servers, in shares of
// them (world/README.md, "The real-world profile", has the reasoning).
// Two fifths refuse an unknown local part the way their software does
// out of the box and show nothing else odd: split by the MTAs' shares of
// the MX servers whose banner names their software (Security Space, Mail
// (MX) Server Survey, 1 December 2023: Exim 55.7 %, Postfix 37.7 %,
// Sendmail 3.5 %, OpenSMTPD 0.1 %), in their stock wordings, with and
// without a postmaster for the domain (an assumption: no survey of
// postmaster compliance was published). The rest are an assumption too:
// each behaviour of the "Real servers" table that a list meets on small
// MTAs.
var selfHosted = []struct {
	name  string
	share float64
	make  func(g *generator, d *Domain, h *Host)
}{
	// The world's own 550 5.1.1, for the servers whose reply carries
	// 5.1.1 (Postfix's local recipient table, Sendmail's "User unknown").
	{"plain", 8, nil},
	{"Exim 550 Unknown user", 10, unknownReply("550 Unknown user", false)},
	{"Exim 550 Unknown user, no postmaster", 2, unknownReply("550 Unknown user", true)},
	{"Exim 550 Unrouteable address", 5, unknownReply("550 Unrouteable address", false)},
	{"Exim 550 Unrouteable address, no postmaster", 5, unknownReply("550 Unrouteable address", true)},
	{"Postfix virtual 550 5.1.1", 4, unknownReply(postfixVirtual, false)},
	{"Postfix virtual 550 5.1.1, no postmaster", 3, unknownReply(postfixVirtual, true)},
	{"Postfix access map 554 5.7.1 Access denied", 2, unknownReply("554 5.7.1 <{addr}>: Recipient address rejected: Access denied", false)},
	{"OpenSMTPD 550 Invalid recipient", 0.5, unknownReply("550 Invalid recipient: <{addr}>", false)},
	{"OpenSMTPD 550 Invalid recipient, no postmaster", 0.5, unknownReply("550 Invalid recipient: <{addr}>", true)},
	{"greylisting", 9, func(g *generator, d *Domain, _ *Host) {
		d.Policy, d.GreylistDelay = PolicyGreylist, g.o.GreylistDelay
	}},
	{"catch-all", 8, func(_ *generator, d *Domain, _ *Host) { d.Policy = PolicyCatchAll }},
	{"bare replies", 5, func(_ *generator, _ *Domain, h *Host) { h.Replies = RepliesBare }},
	{"multi-line replies", 4, func(_ *generator, _ *Domain, h *Host) { h.Replies = RepliesMultiline }},
	{"policy block 5.7.1", 3, func(_ *generator, d *Domain, _ *Host) { d.Policy = PolicyReject }},
	{"452 after 2 RCPTs", 3, func(_ *generator, _ *Domain, h *Host) { h.MaxRcpts = 2 }},
	{"421 after 3 RCPTs", 2, func(_ *generator, _ *Domain, h *Host) { h.DropAfterRcpts, h.DropMode = 3, Drop421 }},
	{"TLS 1.0 only", 3, func(_ *generator, _ *Domain, h *Host) { h.TLS = "1.0" }},
	{"broken STARTTLS", 2, func(_ *generator, _ *Domain, h *Host) { h.TLS, h.TLSBroken = "1.2", true }},
	{"HELO only", 2, func(_ *generator, _ *Domain, h *Host) { h.NoEHLO = true }},
	{"slow EHLO", 2, func(_ *generator, _ *Domain, h *Host) {
		h.CommandLatency = map[string]Duration{"EHLO": Duration(2 * time.Second)}
	}},
	{"451 at MAIL", 2, func(_ *generator, _ *Domain, h *Host) { h.MailPolicy = MailDefer }},
	{"554 greeting", 2, func(_ *generator, _ *Domain, h *Host) { h.Mode = HostBlocked }},
	{"421 at EHLO", 1, func(_ *generator, _ *Domain, h *Host) { h.Mode = HostDeferEHLO }},
	{"null sender refused", 1, func(_ *generator, _ *Domain, h *Host) { h.MailPolicy = MailRefuseNull }},
	{"550 5.7.1 user unknown", 1, func(_ *generator, d *Domain, _ *Host) { d.UnknownReply = "550 5.7.1 User unknown" }},
	{"bare 550 user unknown", 1, func(_ *generator, d *Domain, _ *Host) { d.UnknownReply = "550 No such user here" }},
	{"connection refused", 2, func(_ *generator, _ *Domain, h *Host) { h.Mode = HostRefuse }},
	{"tarpit", 1, func(_ *generator, _ *Domain, h *Host) { h.Mode = HostTarpit }},
	{"null MX", 2, nil},
	{"NXDOMAIN", 2, nil},
	{"SERVFAIL", 1, nil},
	{"implicit MX", 1, nil},
}

// postfixVirtual is Postfix's refusal of a local part its virtual mailbox
// table does not have.
const postfixVirtual = "550 5.1.1 <{addr}>: Recipient address rejected: User unknown in virtual mailbox table"

// unknownReply makes a self-hosted domain refuse unknown local parts with
// line, and postmaster@ it as any of them when noPostmaster.
func unknownReply(line string, noPostmaster bool) func(*generator, *Domain, *Host) {
	return func(_ *generator, d *Domain, _ *Host) {
		d.UnknownReply, d.NoPostmaster = line, noPostmaster
	}
}

// selfHostedDelivery are the self-hosted servers whose truth shows only
// at delivery, made by GenOptions.AcceptThenBounce and DropUnknown in
// place of a behaviour drawn from selfHosted.
var selfHostedDelivery = [...]struct {
	name  string
	share float64
	make  func(g *generator, d *Domain, h *Host)
}{
	{"accept-then-bounce", 0, func(_ *generator, d *Domain, _ *Host) {
		d.Policy, d.UnknownUser = PolicyCatchAll, UnknownUserBounce
	}},
	{"catch-all dropping unknown", 0, func(_ *generator, d *Domain, _ *Host) {
		d.Policy, d.UnknownUser = PolicyCatchAll, UnknownUserDrop
	}},
}

// generateRealWorld is Generate for ProfileRealWorld.
func generateRealWorld(g *generator) (*World, []Expectation, error) {
	o := g.o
	business := (o.Domains + 1) / 2
	consumerAddrs := (o.Domains - business) * o.AddressesPerDomain
	made := map[string]*Host{} // by name
	// host makes (once) a provider's host named name.
	host := func(provider, name string, mod func(*Host)) *Host {
		if h := made[name]; h != nil {
			return h
		}
		h := &Host{Name: name, IP: g.nextIP(), Latency: o.Latency, Jitter: o.Jitter, Provider: provider, TLS: "1.3"}
		if len(o.CommandLatency) > 0 {
			h.CommandLatency = o.CommandLatency
		}
		if mod != nil {
			mod(h)
		}
		g.w.Hosts = append(g.w.Hosts, h)
		made[name] = h
		return h
	}
	// alias adds name to a provider's host, for the per-customer MX names
	// gateways and Microsoft 365 give (every customer its own name, a few
	// addresses behind them).
	alias := func(h *Host, name string) string {
		h.Aliases = append(h.Aliases, name)
		return name
	}
	newDomain := func(name string) *Domain {
		d := &Domain{Name: name, Policy: PolicyAccept, Mailboxes: map[string]MailboxState{}}
		g.w.Domains = append(g.w.Domains, d)
		return d
	}
	mxOf := func(d *Domain, names ...string) {
		for i, n := range names {
			d.MX = append(d.MX, MX{Pref: uint16(10 * (i + 1)), Host: n})
		}
	}
	google := func(h *Host) {
		h.Replies = RepliesMultiline
		h.Greeting = "mx.google.com ESMTP " + fmt.Sprintf("%08x", g.rng.Uint32()) + " - gsmtp"
	}
	microsoft := func(h *Host) {
		h.TLS = "1.2"
		h.Greeting = strings.ToUpper(fmt.Sprintf("bn8nam11ft%03d", g.rng.IntN(1000))) +
			".mail.protection.outlook.com Microsoft ESMTP MAIL Service ready"
	}

	// --- consumer mailboxes
	consumer := func(domain, provider string) (*Domain, string) {
		d := newDomain(domain)
		variant := provider
		switch provider {
		case "google":
			for i, n := range []string{"gmail-smtp-in.l.google.com", "alt1.gmail-smtp-in.l.google.com", "alt2.gmail-smtp-in.l.google.com"} {
				host("google", n, google)
				d.MX = append(d.MX, MX{Pref: uint16(5 + 5*i), Host: n})
			}
		case "yahoo":
			// Yahoo takes every recipient at RCPT (probe/README.md).
			d.Policy = PolicyCatchAll
			if domain == "aol.com" {
				mxOf(d, host("yahoo", "mx-aol.mail.gm0.yahoodns.net", nil).Name)
			} else {
				for _, n := range []string{"mta5.am0.yahoodns.net", "mta6.am0.yahoodns.net", "mta7.am0.yahoodns.net"} {
					host("yahoo", n, nil)
					d.MX = append(d.MX, MX{Pref: 1, Host: n})
				}
			}
		case "outlook":
			d.UnknownReply = "550 5.5.0 Requested action not taken: mailbox unavailable (S2017062302)"
			mxOf(d, host("outlook", strings.ReplaceAll(domain, ".", "-")+".olc.protection.outlook.com", microsoft).Name)
		case "icloud":
			host("icloud", "mx01.mail.icloud.com", nil)
			host("icloud", "mx02.mail.icloud.com", nil)
			d.MX = []MX{{Pref: 10, Host: "mx01.mail.icloud.com"}, {Pref: 10, Host: "mx02.mail.icloud.com"}}
		case "gmx":
			d.UnknownReply = "550 Requested action not taken: mailbox unavailable"
			set := func(h *Host) { h.Greeting = "gmx.net (mxgmx117) Nemesis ESMTP Service ready" }
			if domain == "web.de" {
				mxOf(d, host("gmx", "mx-ha02.web.de", set).Name, host("gmx", "mx-ha03.web.de", set).Name)
			} else {
				mxOf(d, host("gmx", "mx00.gmx.net", set).Name, host("gmx", "mx01.gmx.net", set).Name)
			}
		case "yandex":
			d.UnknownReply = "550 5.7.1 No such user!"
			mxOf(d, host("yandex", "mx.yandex.ru", nil).Name)
		case "mailru":
			mxOf(d, host("mailru", "mxs.mail.ru", nil).Name)
		case "proton":
			mxOf(d, host("proton", "mail.protonmail.ch", nil).Name, host("proton", "mailsec.protonmail.ch", nil).Name)
		case "zoho":
			mxOf(d, host("zoho", "mx.zoho.com", nil).Name, host("zoho", "mx2.zoho.com", nil).Name)
		case "fastmail":
			mxOf(d, host("fastmail", "in1-smtp.messagingengine.com", nil).Name, host("fastmail", "in2-smtp.messagingengine.com", nil).Name)
		default: // an ISP's own servers
			variant = "isp"
			mxOf(d, host("", "mx1."+domain, nil).Name, host("", "mx2."+domain, nil).Name)
		}
		g.auth(d)
		return d, variant
	}
	for i, c := range consumerShares {
		d, variant := consumer(c.domain, c.provider)
		n := int(c.share/100*float64(consumerAddrs) + 0.5)
		if i == 0 {
			// gmail.com takes what rounding left over.
			sum := 0.0
			for _, c := range consumerShares[1:] {
				sum += float64(int(c.share/100*float64(consumerAddrs) + 0.5))
			}
			n = max(consumerAddrs-int(sum), 0)
		}
		known := n * 7 / 10 // a list's consumer addresses: 70 % still exist
		g.addresses(d, n, known, false, variant+" ("+c.domain+")")
	}

	// --- business domains
	var cut []float64
	total := 0.0
	for _, b := range businessShares {
		total += b.share
		cut = append(cut, total)
	}
	var selfCut []float64
	selfTotal := 0.0
	for _, s := range selfHosted {
		selfTotal += s.share
		selfCut = append(selfCut, selfTotal)
	}
	pick := func(cuts []float64, total float64) int {
		r := g.rng.Float64() * total
		for i, c := range cuts {
			if r < c {
				return i
			}
		}
		return len(cuts) - 1
	}
	selfMade := 0
	for i := range business {
		name := fmt.Sprintf("%s%d.%s", nameWords[i%len(nameWords)], i, o.TLD)
		d := newDomain(name)
		dashed := strings.ReplaceAll(name, ".", "-")
		id := fmt.Sprintf("%08d", 100000+i)
		provider := businessShares[pick(cut, total)].provider
		variant := provider
		// gateways and Microsoft 365: the customer's choice, which the
		// providers do not publish; the shares are assumptions.
		choice := g.rng.Float64()
		switch provider {
		case "google":
			if choice < 0.3 {
				mxOf(d, host("google", "smtp.google.com", google).Name)
				variant = "google (smtp.google.com)"
			} else {
				for j, n := range []string{"aspmx.l.google.com", "alt1.aspmx.l.google.com", "alt2.aspmx.l.google.com"} {
					host("google", n, google)
					d.MX = append(d.MX, MX{Pref: uint16([]int{1, 5, 5}[j]), Host: n})
				}
				variant = "google (aspmx)"
			}
			if g.rng.Float64() < 0.03 {
				d.Policy = PolicyCatchAll // a Workspace catch-all route
				variant += " catch-all"
			}
		case "microsoft365":
			h := host("microsoft365", fmt.Sprintf("edge-%d.mail.protection.outlook.com", g.rng.IntN(3)), microsoft)
			mxOf(d, alias(h, dashed+".mail.protection.outlook.com"))
			if choice < 0.8 {
				// Directory-based edge blocking, the default for an
				// authoritative domain.
				d.UnknownReply = "550 5.4.1 Recipient address rejected: Access denied. AS(201806281)"
				variant = "microsoft365 (edge blocking)"
			} else {
				d.Policy = PolicyCatchAll
				variant = "microsoft365 (no edge blocking)"
			}
		case "proofpoint", "mimecast", "barracuda", "cisco":
			var names []string
			switch provider {
			case "proofpoint":
				a := host(provider, "mx0a.pphosted.com", nil)
				b := host(provider, "mx0b.pphosted.com", nil)
				names = []string{alias(a, "mx0a-"+id+".pphosted.com"), alias(b, "mx0b-"+id+".pphosted.com")}
			case "mimecast":
				names = []string{host(provider, "us-smtp-inbound-1.mimecast.com", nil).Name, host(provider, "us-smtp-inbound-2.mimecast.com", nil).Name}
				d.UnknownReply = "550 Invalid Recipient"
			case "barracuda":
				a := host(provider, "ess1.ess.barracudanetworks.com", nil)
				b := host(provider, "ess2.ess.barracudanetworks.com", nil)
				names = []string{alias(a, "d"+id+"a.ess.barracudanetworks.com"), alias(b, "d"+id+"b.ess.barracudanetworks.com")}
				d.UnknownReply = "550 cuda_nsu 5.1.1 User unknown"
			case "cisco":
				a := host(provider, "mx1.iphmx.com", nil)
				b := host(provider, "mx2.iphmx.com", nil)
				names = []string{alias(a, "mx1.hc"+id+".iphmx.com"), alias(b, "mx2.hc"+id+".iphmx.com")}
			}
			mxOf(d, names...)
			if choice < 0.7 {
				variant += " (checks recipients)"
			} else {
				d.Policy, d.UnknownReply = PolicyCatchAll, ""
				variant += " (accepts any address)"
			}
		case "yandex":
			d.UnknownReply = "550 5.7.1 No such user!"
			mxOf(d, host("yandex", "mx.yandex.net", nil).Name)
		case "zoho":
			mxOf(d, host("zoho", "mx.zoho.com", nil).Name, host("zoho", "mx2.zoho.com", nil).Name)
		case "mailru":
			mxOf(d, host("mailru", "emx.mail.ru", nil).Name)
		default:
			// Every behaviour once, then by share: a small world still
			// meets each.
			s := selfHosted[pick(selfCut, selfTotal)]
			if selfMade < len(selfHosted) {
				s = selfHosted[selfMade]
			} else if s.make != nil || s.name == "plain" {
				// GenOptions.AcceptThenBounce and DropUnknown, from a
				// stream of their own: at zero the world is as before.
				switch r := g.delivery.Float64(); {
				case r < o.AcceptThenBounce:
					s = selfHostedDelivery[0]
				case r < o.AcceptThenBounce+o.DropUnknown:
					s = selfHostedDelivery[1]
				}
			}
			selfMade++
			variant = "self-hosted " + s.name
			switch s.name {
			case "null MX":
				d.MX = []MX{{Pref: 0, Host: "."}}
			case "NXDOMAIN":
				d.NXDomain = true
			case "SERVFAIL":
				d.DNSFault = DNSFaultServFail
			case "implicit MX":
				d.A = []string{g.newHost("mail." + name).IP}
			default:
				h := g.newHost("mx." + name)
				mxOf(d, h.Name)
				if s.make != nil {
					s.make(g, d, h)
				}
			}
		}
		g.auth(d)
		g.addresses(d, o.AddressesPerDomain, o.MailboxesPerDomain, o.RoleMailbox, variant)
	}
	return g.finish()
}
