// Package world is the simulated mail world: the project's stand-in for the
// internet, used by every test, by `make demo`, by the benchmarks, and by
// users on their own through the mailworld command (most laptops and clouds
// block outbound port 25).
//
// A world is a list of mail hosts and a list of domains, read from a JSON
// file (see Load) or made by the generator (see Generate). Starting a world
// (see Start) brings up:
//
//  1. one authoritative DNS server (miekg/dns, UDP and TCP) that serves every
//     domain as a zone of its own, the zones of the hosts' names, the
//     reverse zone 127.in-addr.arpa for the hosts' addresses, and the DNS
//     block and allow lists (RFC 5782) of World.DNSBL (dns.go);
//  2. one SMTP server per host, listening on the host's loopback address
//     (any 127.x.y.z) at the world's SMTP port, behaving as the host and the
//     recipient's domain and mailbox say (smtp.go);
//  3. a session log that records, for every SMTP session, the client address
//     it came from and what it asked, so tests can see egress rotation and
//     per-address limits (log.go);
//  4. when Options asks for them, a registry: an RDAP server (RFC 9083) and
//     a WHOIS server (RFC 3912) serving the domains' registration dates
//     (rdap.go, whois.go).
//
// The generator also writes the verdict that a correct verifier should reach
// for every address it made (see Expectation), so benchmarks score accuracy
// as well as speed. Apart from that truth of SMTP, the world holds the truth
// of delivery: what a real send to each address produces (see Deliver,
// deliver.go), rendered as a sending platform's outcome stream
// (SendGridEvents, OutcomeLines), so benchmarks can feed outcomes back to a
// verifier and measure what it learns.
package world

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// Duration is a time.Duration that reads and writes itself in JSON as a Go
// duration string ("100ms", "1m30s").
type Duration time.Duration

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string, or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if err2 := json.Unmarshal(b, &n); err2 != nil {
			return fmt.Errorf("world: duration must be a string like \"100ms\": %w", err)
		}
		*d = Duration(n)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("world: bad duration %q: %w", s, err)
	}
	*d = Duration(v)
	return nil
}

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// HostMode is how a host treats a new TCP connection.
type HostMode string

// Host modes.
const (
	HostNormal HostMode = ""       // banner, then a normal session
	HostTarpit HostMode = "tarpit" // accepts TCP, never sends the banner
	HostRefuse HostMode = "refuse" // nothing listens: connections are refused
	HostBusy   HostMode = "busy"   // answers every connection with 421 4.7.0 and closes
	// HostDeferEHLO greets, then answers EHLO or HELO with 421 4.7.0 and
	// closes: Yahoo's "[TSS04] messages from … temporarily deferred" to
	// senders it does not trust yet.
	HostDeferEHLO HostMode = "defer_ehlo"
	// HostBlocked greets with 554 5.7.1 (RFC 5321 §3.1: no service for
	// this client) and answers every command but QUIT with 503.
	HostBlocked HostMode = "blocked"
)

// Reply styles of a host (Host.Replies).
const (
	// RepliesPlain: one line, with an enhanced status code (RFC 3463).
	RepliesPlain = ""
	// RepliesMultiline: the replies to RCPT and MAIL are two lines, the
	// enhanced code on each ("550-5.1.1 …" / "550 5.1.1 …"), as Gmail's.
	RepliesMultiline = "multiline"
	// RepliesBare: no enhanced status code anywhere ("550 No such user
	// here", "250 OK"), as servers that do not announce
	// ENHANCEDSTATUSCODES.
	RepliesBare = "bare"
)

// MAIL FROM policies of a host (Host.MailPolicy).
const (
	MailAcceptAll = ""
	// MailDefer answers 451 4.7.1 to every MAIL FROM: unknown senders are
	// deferred (greylisting at MAIL, reputation checks).
	MailDefer = "defer"
	// MailRefuseNull answers 550 5.7.1 to the null reverse-path <>.
	MailRefuseNull = "refuse_null"
	// MailRequireSPF answers 550 5.7.23 to a sender whose domain is not a
	// domain of the world with an SPF record (a TXT "v=spf1 …").
	MailRequireSPF = "require_spf"
)

// How a host ends a session early (Host.DropMode).
const (
	Drop421   = "421"   // 421 4.4.2 instead of the reply, then close
	DropClose = "close" // close the connection instead of replying
)

// Host is one mail server of the world, identified by its loopback address.
// Several names may point at one address only by listing them as Aliases.
type Host struct {
	// Name is the host's DNS name, without the trailing dot ("mx1.alpha.test").
	// Its A record points at IP.
	Name string `json:"name"`
	// IP is the host's loopback address: 127.x.y.z (not 127.0.0.1, which
	// is left to the prober and the tests), or ::1 for the one IPv6-only
	// host a world may have (its name gets an AAAA record and no A).
	IP string `json:"ip"`
	// IPv6, when set, is published as an AAAA record (nothing listens on it).
	IPv6 string `json:"ipv6,omitempty"`
	// Aliases are further names whose A record points at IP.
	Aliases []string `json:"aliases,omitempty"`
	// Mode is how the host treats a new connection.
	Mode HostMode `json:"mode,omitempty"`
	// Banner is the hostname in the 220 greeting; default Name.
	Banner string `json:"banner,omitempty"`
	// Provider names the real mailbox provider or gateway the host plays
	// ("google", "yahoo", "proofpoint", ...: Providers lists them). It
	// changes nothing in how the host answers, which its other fields say;
	// it tells Expect what a verifier that recognises the provider knows:
	// that an acceptance by a host that takes every recipient proves
	// nothing, or how the provider words "no such mailbox". Give the host a
	// name or greeting of that provider's, so a verifier can recognise it.
	Provider string `json:"provider,omitempty"`
	// Greeting is the whole text of the 220 greeting after the code, as a
	// real provider words it ("mx.google.com ESMTP a1b2 - gsmtp"); default
	// "<Banner> ESMTP mailworld".
	Greeting string `json:"greeting,omitempty"`
	// EHLOName is the hostname in the 250 reply to EHLO/HELO; default Name.
	EHLOName string `json:"ehlo_name,omitempty"`
	// PTR is the name the reverse zone gives IP; default Name; "-" for none.
	PTR string `json:"ptr,omitempty"`
	// TLS, when "1.0", "1.2" or "1.3", makes the host offer STARTTLS with
	// that version as the highest it accepts ("1.0": only TLS 1.0); empty
	// for no STARTTLS.
	TLS string `json:"tls,omitempty"`
	// TLSBroken makes the host offer STARTTLS, answer 220 to it, and then
	// break the handshake (garbage, then close).
	TLSBroken bool `json:"tls_broken,omitempty"`
	// NoEHLO makes the host answer EHLO with 502 5.5.1, as an RFC 821
	// server: the client must fall back to HELO.
	NoEHLO bool `json:"no_ehlo,omitempty"`
	// Replies is the host's reply style: RepliesPlain, RepliesMultiline or
	// RepliesBare.
	Replies string `json:"replies,omitempty"`
	// MailPolicy is what the host says to MAIL FROM: MailAcceptAll,
	// MailDefer, MailRefuseNull or MailRequireSPF.
	MailPolicy string `json:"mail_policy,omitempty"`
	// AcceptFirst makes the host accept, over its life, the first N RCPTs
	// for local parts it does not know (a random probe included) before it
	// tells the truth: an anti-harvesting server that looks like a
	// catch-all at first.
	AcceptFirst int `json:"accept_first,omitempty"`
	// DropAfterRcpts ends every session after this many RCPTs (counted
	// over the session), in the middle of a pipelined group if need be:
	// the next RCPT gets 421 4.4.2 (DropMode "421") or no answer at all
	// ("close"). 0: never.
	DropAfterRcpts int    `json:"drop_after_rcpts,omitempty"`
	DropMode       string `json:"drop_mode,omitempty"`
	// SMTPUTF8 makes the host advertise SMTPUTF8 (RFC 6531) and accept UTF-8
	// addresses; without it a UTF-8 address gets 553 5.6.7.
	SMTPUTF8 bool `json:"smtputf8,omitempty"`
	// MaxRcpts caps the RCPTs of one mail transaction (the others get
	// 452 4.5.3; RSET, EHLO and STARTTLS start a new count); 0 for no cap.
	MaxRcpts int `json:"max_rcpts,omitempty"`
	// BlockedClients are client addresses the host refuses by policy: every
	// RCPT from one of them gets BlockedReply, whatever the domain (a block
	// list of the host's own, which says nothing of the mailbox).
	BlockedClients []string `json:"blocked_clients,omitempty"`
	// BlockedReply is the reply line to a blocked client's RCPT; default
	// Postfix's check_client_access REJECT, "554 5.7.1 Client host
	// rejected: Access denied" (smtpd_check.c), whose words say the
	// refusal is about the client.
	BlockedReply string `json:"blocked_reply,omitempty"`
	// MaxConnsPerClient caps the concurrent sessions from one client address
	// (the others get 421 4.7.0 and are closed); 0 for no cap.
	MaxConnsPerClient int `json:"max_conns_per_client,omitempty"`
	// Latency is waited before every reply, the banner included (a slow
	// host), once per round trip: replies to pipelined commands (RFC 2920)
	// go out together after one wait, as over a real network.
	Latency Duration `json:"latency,omitempty"`
	// Jitter adds a uniformly drawn 0..Jitter to every Latency wait.
	Jitter Duration `json:"jitter,omitempty"`
	// CommandLatency overrides Latency for the replies to some commands,
	// keyed by upper-case verb ("BANNER", "EHLO", "STARTTLS", "MAIL", "RCPT",
	// "RSET", "QUIT", ...).
	CommandLatency map[string]Duration `json:"command_latency,omitempty"`
}

// Policy is how a domain's mail server answers RCPT TO for the domain.
type Policy string

// Domain policies.
const (
	// PolicyAccept accepts known mailboxes and answers 550 5.1.1 for others.
	PolicyAccept Policy = "accept"
	// PolicyCatchAll accepts every local part.
	PolicyCatchAll Policy = "catchall"
	// PolicyGreylist answers 450 4.2.0 to the first RCPT of every (client
	// address, recipient) pair, then behaves as PolicyAccept once
	// GreylistDelay has passed since that first attempt.
	PolicyGreylist Policy = "greylist"
	// PolicyReject answers 550 5.7.1 to every RCPT: the prober is blocked by
	// policy, which says nothing about the mailbox.
	PolicyReject Policy = "reject"
)

// MailboxState is the state of one known mailbox.
type MailboxState string

// Mailbox states.
const (
	MailboxOK       MailboxState = "ok"       // 250 2.1.5
	MailboxFull     MailboxState = "full"     // 552 5.2.2
	MailboxDisabled MailboxState = "disabled" // 550 5.2.1
	MailboxGreylist MailboxState = "greylist" // as PolicyGreylist, for this mailbox only
	// MailboxBadSyntax: 553 5.1.3, the server cannot take the address's
	// syntax (a local part it refuses to parse).
	MailboxBadSyntax MailboxState = "bad_syntax"
	// MailboxNullMX: 550 5.1.10, the recipient's domain publishes a null
	// MX (RFC 7505 §4.3), as a relay that checked it answers.
	MailboxNullMX MailboxState = "null_mx"
	// MailboxRestricted: 550 5.7.1, a mailbox that takes mail only from
	// senders it knows (a restricted distribution group): a refusal about
	// this recipient and this sender, not a block of the prober.
	MailboxRestricted MailboxState = "restricted"
	// MailboxOverQuota: 250 2.1.5 at RCPT, as MailboxOK, but over its
	// quota when mail is delivered: a server that checks quotas only at
	// delivery (a Postfix in front of Dovecot), or a mailbox that filled
	// up between verification and the send. Deliver: soft bounce 5.2.2
	// (4.2.2 at Google).
	MailboxOverQuota MailboxState = "over_quota"
)

// MX is one MX record of a domain.
type MX struct {
	Pref uint16 `json:"pref"`
	// Host is the exchange's name; "." makes the record a null MX (RFC 7505).
	Host string `json:"host"`
}

// Record is a free-form resource record of a domain's zone, in zone-file
// form: TXT, TLSA, CAA, CNAME, PTR and anything else miekg/dns can parse.
type Record struct {
	// Name is the owner, relative to the domain ("_dmarc", "_25._tcp.mx"),
	// "@" or "" for the apex, or absolute with a trailing dot.
	Name string `json:"name,omitempty"`
	Type string `json:"type"`
	// TTL in seconds; 0 takes the domain's TTL.
	TTL uint32 `json:"ttl,omitempty"`
	// Data is the RDATA in zone-file syntax, e.g. "\"v=spf1 -all\"" for TXT
	// or "0 issue \"ca.test\"" for CAA.
	Data string `json:"data"`
}

// DNSFault is how the DNS server misbehaves for a zone.
type DNSFault string

// DNS faults.
const (
	DNSFaultNone     DNSFault = ""
	DNSFaultServFail DNSFault = "servfail" // every query in the zone gets SERVFAIL
	DNSFaultDrop     DNSFault = "drop"     // every query in the zone goes unanswered
)

// Domain is one mail domain of the world, served as a DNS zone of its own.
type Domain struct {
	// Name is the domain, lower-case, without the trailing dot. A name in
	// Unicode is published in its A-label (punycode) form.
	Name string `json:"name"`
	// MX records; empty for none (the domain may still have A records, which
	// make an implicit MX, RFC 5321 §5.1).
	MX []MX `json:"mx,omitempty"`
	// A and AAAA records at the apex.
	A    []string `json:"a,omitempty"`
	AAAA []string `json:"aaaa,omitempty"`
	// NXDomain makes the domain not exist: its zone answers NXDOMAIN for the
	// apex and everything below. Used for expected domain_not_found addresses.
	NXDomain bool `json:"nxdomain,omitempty"`
	// Policy is how the domain's mail hosts answer RCPT; default accept.
	Policy Policy `json:"policy,omitempty"`
	// Mailboxes maps a known local part (lower-case) to its state.
	Mailboxes map[string]MailboxState `json:"mailboxes,omitempty"`
	// UnknownReply, when set, is the whole reply line to RCPT for a local
	// part the domain does not know, instead of "550 5.1.1 no such user":
	// "550 Unrouteable address" (Exim), "550 Invalid recipient:
	// <{addr}>" (OpenSMTPD; {addr} is replaced by the recipient as the
	// client gave it, {domain} by its domain). What it means is
	// UnknownSays, or the entry of Replies with its words, or what its
	// codes say (Expect).
	UnknownReply string `json:"unknown_reply,omitempty"`
	// UnknownSays is what UnknownReply means, for a reply of the world
	// file's own whose meaning Replies does not have: "no_mailbox",
	// "client", "nothing", "full", "disabled", "no_relay", "syntax",
	// "deferred" (Says). Empty: from Replies or the codes.
	UnknownSays Says `json:"unknown_says,omitempty"`
	// UnknownUser is what becomes of mail for a local part the domain does
	// not know once a host has accepted it: with PolicyCatchAll (every
	// local part accepted at RCPT, Expect risky/catch_all) only.
	// UnknownUserDeliver: a catch-all mailbox takes it; UnknownUserBounce:
	// accept-then-bounce, a non-delivery report (5.1.1) follows;
	// UnknownUserDrop: it is thrown away and the sender sees a delivery.
	// Empty: the provider's behaviour (UnknownUserDefault). It changes
	// nothing at SMTP time, only what Deliver says.
	UnknownUser UnknownUser `json:"unknown_user,omitempty"`
	// NoPostmaster makes the domain's hosts refuse postmaster@ the domain
	// as any local part they do not know, against RFC 5321 §4.5.1 (every
	// other domain's hosts accept it, unless they refuse everyone, as
	// PolicyReject).
	NoPostmaster bool `json:"no_postmaster,omitempty"`
	// GreylistDelay is how long a greylisted (client, recipient) pair waits
	// before it is accepted; default 1m.
	GreylistDelay Duration `json:"greylist_delay,omitempty"`
	// Records are further records of the zone (TXT for SPF and DMARC, TLSA,
	// CAA, CNAME ...).
	Records []Record `json:"records,omitempty"`
	// TTL of the zone's records and the SOA minimum (negative TTL), seconds;
	// default 300.
	TTL uint32 `json:"ttl,omitempty"`
	// DNSDelay is waited before answering any query of the zone.
	DNSDelay Duration `json:"dns_delay,omitempty"`
	// DNSFault makes the zone's queries fail.
	DNSFault DNSFault `json:"dns_fault,omitempty"`
	// Signed makes answers from the zone carry the AD bit, as a validating
	// resolver would set it for a DNSSEC-signed zone.
	Signed bool `json:"signed,omitempty"`
	// Registered is the domain's registration date, served by the world's
	// RDAP and WHOIS servers: an RFC 3339 date ("2009-03-14") or date-time
	// ("2009-03-14T10:00:00Z"). Empty: the registry does not know the
	// domain (RDAP 404, WHOIS "No match").
	Registered string `json:"registered,omitempty"`
}

// RegisteredAt returns Registered as a time, and false when it is empty or
// not a date.
func (d *Domain) RegisteredAt() (time.Time, bool) {
	return parseRegistered(d.Registered)
}

func parseRegistered(s string) (time.Time, bool) {
	if s == "" {
		return time.Time{}, false
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC(), true
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, true
	}
	return time.Time{}, false
}

// DNSBLZone is a DNS block or allow list (RFC 5782) served by the world's
// DNS server as a zone of its own: a listed address has an A record at
// <reversed address>.<zone> (RFC 5782 §2.1 for IPv4, §2.4 for IPv6) with
// the code it is listed with; any other query name of the zone is
// NXDOMAIN. Whether the zone is a block or an allow list is the client's
// configuration; the server answers both the same way.
type DNSBLZone struct {
	// Zone is the list's zone ("dnsbl.test"), lower-case, no trailing dot.
	Zone string `json:"zone"`
	// Listed maps a listed address (IPv4 or IPv6, as text) to the A record
	// answered for it: "127.0.0.2" for a plain listing, "127.0.5.1" for a
	// dnswl.org-style allow listing, "127.255.255.254" for an operator's
	// error code.
	Listed map[string]string `json:"listed,omitempty"`
}

// World is a whole simulated world.
type World struct {
	// SMTPPort is the port every host listens on; default 2525.
	SMTPPort int       `json:"smtp_port,omitempty"`
	Hosts    []*Host   `json:"hosts"`
	Domains  []*Domain `json:"domains"`
	// DNSBL are the DNS block and allow lists the DNS server serves.
	DNSBL []*DNSBLZone `json:"dnsbl,omitempty"`
	// ComplaintRate is the share, in [0, 1], of the deliveries to a
	// mailbox (a catch-all's included) that Deliver reports as a
	// complaint, drawn by address; default 0.
	ComplaintRate float64 `json:"complaint_rate,omitempty"`

	idx atomic.Pointer[index] // built on first use; see Reindex
}

// index finds domains and hosts in O(1).
type index struct {
	domains map[string]*Domain
	byIP    map[string]*Host
	byName  map[string]*Host
}

// Reindex rebuilds the lookup index behind Domain, HostByIP and HostByName.
// Call it after changing Hosts or Domains of a world already in use; Load,
// Parse and Generate return indexed worlds.
func (w *World) Reindex() {
	ix := &index{
		domains: make(map[string]*Domain, len(w.Domains)),
		byIP:    make(map[string]*Host, len(w.Hosts)),
		byName:  make(map[string]*Host, len(w.Hosts)),
	}
	for _, d := range w.Domains {
		ix.domains[strings.ToLower(strings.TrimSuffix(d.Name, "."))] = d
	}
	for _, h := range w.Hosts {
		ix.byIP[h.IP] = h
		ix.byName[strings.ToLower(strings.TrimSuffix(h.Name, "."))] = h
		for _, a := range h.Aliases {
			ix.byName[strings.ToLower(strings.TrimSuffix(a, "."))] = h
		}
	}
	w.idx.Store(ix)
}

func (w *World) index() *index {
	if ix := w.idx.Load(); ix != nil {
		return ix
	}
	w.Reindex()
	return w.idx.Load()
}

// DefaultSMTPPort is the SMTP port of a world that names none.
const DefaultSMTPPort = 2525

// Defaults fills the unset fields of w with their defaults.
func (w *World) Defaults() {
	if w.SMTPPort == 0 {
		w.SMTPPort = DefaultSMTPPort
	}
	for _, d := range w.Domains {
		d.Name = strings.ToLower(strings.TrimSuffix(d.Name, "."))
		if d.Policy == "" {
			d.Policy = PolicyAccept
		}
		if d.TTL == 0 {
			d.TTL = 300
		}
		if d.GreylistDelay == 0 {
			d.GreylistDelay = Duration(time.Minute)
		}
	}
	for _, z := range w.DNSBL {
		if z != nil {
			z.Zone = strings.ToLower(strings.TrimSuffix(z.Zone, "."))
		}
	}
	for _, h := range w.Hosts {
		h.Name = strings.ToLower(strings.TrimSuffix(h.Name, "."))
		if h.Banner == "" {
			h.Banner = h.Name
		}
		if h.EHLOName == "" {
			h.EHLOName = h.Name
		}
		if h.PTR == "" {
			h.PTR = h.Name
		}
	}
}

// Validate reports every problem of w at once.
func (w *World) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if w.SMTPPort < 0 || w.SMTPPort > 65535 {
		add("smtp_port %d out of range", w.SMTPPort)
	}
	if !(w.ComplaintRate >= 0 && w.ComplaintRate <= 1) {
		add("complaint_rate %v is not in [0, 1]", w.ComplaintRate)
	}
	ips := map[string]string{}
	for i, h := range w.Hosts {
		if h.Name == "" {
			add("hosts[%d]: name is empty", i)
		}
		a, err := netip.ParseAddr(h.IP)
		switch {
		case err != nil:
			add("hosts[%d] %s: bad ip %q", i, h.Name, h.IP)
		case a == netip.IPv6Loopback():
		case !a.Is4() || !a.IsLoopback():
			add("hosts[%d] %s: ip %s is not an IPv4 loopback address", i, h.Name, h.IP)
		case a == netip.AddrFrom4([4]byte{127, 0, 0, 1}):
			add("hosts[%d] %s: ip 127.0.0.1 is reserved for the prober", i, h.Name)
		}
		if prev, ok := ips[h.IP]; ok {
			add("hosts[%d] %s: ip %s already used by %s", i, h.Name, h.IP, prev)
		}
		ips[h.IP] = h.Name
		switch h.Mode {
		case HostNormal, HostTarpit, HostRefuse, HostBusy, HostDeferEHLO, HostBlocked:
		default:
			add("hosts[%d] %s: unknown mode %q", i, h.Name, h.Mode)
		}
		switch h.TLS {
		case "", "1.0", "1.2", "1.3":
		default:
			add("hosts[%d] %s: tls must be \"\", \"1.0\", \"1.2\" or \"1.3\", not %q", i, h.Name, h.TLS)
		}
		if h.TLSBroken && h.TLS == "" {
			add("hosts[%d] %s: tls_broken needs tls", i, h.Name)
		}
		switch h.Replies {
		case RepliesPlain, RepliesMultiline, RepliesBare:
		default:
			add("hosts[%d] %s: unknown replies %q", i, h.Name, h.Replies)
		}
		if _, ok := Providers[h.Provider]; h.Provider != "" && !ok {
			add("hosts[%d] %s: unknown provider %q", i, h.Name, h.Provider)
		}
		if strings.ContainsAny(h.Greeting, "\r\n") {
			add("hosts[%d] %s: greeting must be one line", i, h.Name)
		}
		switch h.MailPolicy {
		case MailAcceptAll, MailDefer, MailRefuseNull, MailRequireSPF:
		default:
			add("hosts[%d] %s: unknown mail_policy %q", i, h.Name, h.MailPolicy)
		}
		switch {
		case h.DropAfterRcpts < 0 || h.AcceptFirst < 0:
			add("hosts[%d] %s: drop_after_rcpts and accept_first must not be negative", i, h.Name)
		case h.DropAfterRcpts > 0 && h.DropMode != Drop421 && h.DropMode != DropClose:
			add("hosts[%d] %s: drop_mode must be %q or %q", i, h.Name, Drop421, DropClose)
		}
	}
	names := map[string]bool{}
	for i, d := range w.Domains {
		if d.Name == "" {
			add("domains[%d]: name is empty", i)
		}
		if names[d.Name] {
			add("domains[%d]: %s listed twice", i, d.Name)
		}
		names[d.Name] = true
		switch d.Policy {
		case PolicyAccept, PolicyCatchAll, PolicyGreylist, PolicyReject:
		default:
			add("domains[%d] %s: unknown policy %q", i, d.Name, d.Policy)
		}
		for lp, st := range d.Mailboxes {
			switch st {
			case MailboxOK, MailboxFull, MailboxDisabled, MailboxGreylist, MailboxBadSyntax, MailboxNullMX, MailboxRestricted, MailboxOverQuota:
			default:
				add("domains[%d] %s: mailbox %q has unknown state %q", i, d.Name, lp, st)
			}
		}
		if d.UnknownSays != "" && (!validSays(d.UnknownSays) || d.UnknownReply == "") {
			add("domains[%d] %s: unknown_says %q needs unknown_reply and must be one of no_mailbox, client, nothing, full, disabled, no_relay, syntax, deferred", i, d.Name, d.UnknownSays)
		}
		switch d.UnknownUser {
		case UnknownUserDefault:
		case UnknownUserDeliver, UnknownUserBounce, UnknownUserDrop:
			if d.Policy != PolicyCatchAll {
				add("domains[%d] %s: unknown_user %q needs policy %q: only a domain that accepts every local part takes mail for unknown users", i, d.Name, d.UnknownUser, PolicyCatchAll)
			}
		default:
			add("domains[%d] %s: unknown unknown_user %q", i, d.Name, d.UnknownUser)
		}
		switch d.DNSFault {
		case DNSFaultNone, DNSFaultServFail, DNSFaultDrop:
		default:
			add("domains[%d] %s: unknown dns_fault %q", i, d.Name, d.DNSFault)
		}
		for _, a := range d.A {
			if _, err := netip.ParseAddr(a); err != nil {
				add("domains[%d] %s: bad A %q", i, d.Name, a)
			}
		}
		if _, ok := d.RegisteredAt(); d.Registered != "" && !ok {
			add("domains[%d] %s: registered %q is not an RFC 3339 date or date-time", i, d.Name, d.Registered)
		}
	}
	zones := map[string]bool{}
	for i, z := range w.DNSBL {
		switch {
		case z == nil || z.Zone == "":
			add("dnsbl[%d]: zone is empty", i)
			continue
		case zones[z.Zone]:
			add("dnsbl[%d]: zone %s listed twice", i, z.Zone)
		case names[z.Zone]:
			add("dnsbl[%d]: zone %s is also a domain", i, z.Zone)
		}
		zones[z.Zone] = true
		for ip, code := range z.Listed {
			if _, err := netip.ParseAddr(ip); err != nil {
				add("dnsbl[%d] %s: bad listed address %q", i, z.Zone, ip)
			}
			if c, err := netip.ParseAddr(code); err != nil || !c.Is4() {
				add("dnsbl[%d] %s: code %q of %s is not an IPv4 address", i, z.Zone, code, ip)
			}
		}
	}
	return errors.Join(errs...)
}

// HostByIP returns the host listening on ip, or nil.
func (w *World) HostByIP(ip string) *Host { return w.index().byIP[ip] }

// HostByName returns the host named name (or with name as an alias), or nil.
func (w *World) HostByName(name string) *Host {
	return w.index().byName[strings.ToLower(strings.TrimSuffix(name, "."))]
}

// Domain returns the domain named name, or nil.
func (w *World) Domain(name string) *Domain {
	return w.index().domains[strings.ToLower(strings.TrimSuffix(name, "."))]
}

// Load reads a world from a JSON file, fills defaults and validates it.
func Load(path string) (*World, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("world: %w", err)
	}
	return Parse(b)
}

// Parse reads a world from JSON, fills defaults and validates it. Unknown
// fields are errors.
func Parse(b []byte) (*World, error) {
	var w World
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("world: cannot parse world: %w", err)
	}
	w.Defaults()
	if err := w.Validate(); err != nil {
		return nil, err
	}
	w.Reindex()
	return &w, nil
}

// Save writes w as indented JSON.
func (w *World) Save(path string) error {
	b, err := json.MarshalIndent(w, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Expectation is the verdict a correct verifier reaches for one address of
// the world, with the reason of spec §2.5 and the flags it should set.
type Expectation struct {
	Email    string `json:"email"`
	Status   string `json:"status"` // spec §2.3 verdict
	Reason   string `json:"reason"` // spec §2.3 checks.reason
	CatchAll bool   `json:"catch_all,omitempty"`
	Role     bool   `json:"role,omitempty"`
	// Group names the kind of server and mailbox the address was made
	// for ("google · known", "self-hosted greylisting · unknown"), so
	// accuracy can be told per row of a profile; empty in the default
	// profile.
	Group string `json:"group,omitempty"`
	// Meant is the address the person meant, when this one is a typing
	// slip of it whose domain takes no mail (ProfileTypos): what a
	// correct did_you_mean says. Empty for every other address, whose
	// correct did_you_mean is none.
	Meant string `json:"meant,omitempty"`
	// Delivery and DeliveryTruth are the truth of delivery, apart from
	// the verdict's truth of SMTP: the event a real send to the address
	// gets and why (World.Deliver: Delivery.Event and Delivery.Truth), so
	// reports can tell what became of the addresses of each verdict
	// ("of the addresses called risky/catch_all, 38 % hard-bounced").
	Delivery      string `json:"delivery,omitempty"`
	DeliveryTruth string `json:"delivery_truth,omitempty"`
}
