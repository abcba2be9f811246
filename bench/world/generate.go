package world

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"strings"
	"time"
)

// GenOptions says what world Generate makes. Fractions are of the domains
// (of the hosts for STARTTLS), each in [0, 1]; the domain behaviours are
// exclusive and must not add up to more than 1. A zero GenOptions is valid
// and makes 1,000 well-behaved domains.
type GenOptions struct {
	// Domains is how many domains to make. Default 1000.
	Domains int
	// Seed makes the world reproducible: the same options and seed give the
	// same world.
	Seed uint64
	// AddressesPerDomain is how many expected addresses to write per domain.
	// Default 10.
	AddressesPerDomain int
	// MailboxesPerDomain is how many of those exist; the rest are unknown
	// local parts. Default 6. One known mailbox per domain is a role address
	// (info@, sales@, ...) when RoleMailbox is set.
	MailboxesPerDomain int
	// RoleMailbox makes one known mailbox per domain a role address.
	RoleMailbox bool

	// Domain behaviours (exclusive fractions).
	CatchAll   float64 // every local part accepted
	Greylist   float64 // 450 4.2.0 first, accepted after GreylistDelay
	Reject     float64 // 550 5.7.1 to the prober
	Tarpit     float64 // host never sends a banner
	Refuse     float64 // nothing listens at the host
	Busy       float64 // host answers 421 4.7.0
	NullMX     float64 // "MX 0 ." (RFC 7505)
	NoMX       float64 // neither MX nor A
	ImplicitMX float64 // no MX, an A record pointing at a host
	NXDomain   float64 // the domain does not exist
	ServFail   float64 // the domain's zone answers SERVFAIL

	// Delivery truths (Deliver), which verification cannot see: catch-all
	// domains (every local part accepted at RCPT, expected risky/catch_all)
	// whose mail for unknown local parts bounces after acceptance
	// (AcceptThenBounce: Domain.UnknownUser bounce) or is thrown away
	// (DropUnknown: drop). Exclusive with the behaviours above. In
	// ProfileRealWorld they are fractions of the self-hosted business
	// domains that have a mail host of their own (past the first of each
	// behaviour).
	AcceptThenBounce float64
	DropUnknown      float64

	// MailboxFull, MailboxDisabled and MailboxOverQuota are fractions of
	// known mailboxes (MailboxOverQuota: accepted at RCPT, over quota at
	// delivery).
	MailboxFull      float64
	MailboxDisabled  float64
	MailboxOverQuota float64
	// ComplaintRate is the world's World.ComplaintRate.
	ComplaintRate float64

	// STARTTLS is the fraction of hosts offering STARTTLS (one in five of
	// them with TLS 1.2 at most, the others 1.3).
	STARTTLS float64
	// Auth is the fraction of domains publishing the full set of
	// authentication records (SPF, DKIM, DMARC, MTA-STS, TLS-RPT, BIMI, CAA,
	// TLSA in a signed zone, the svc trust record) and having a
	// registration date (Domain.Registered) for the RDAP and WHOIS servers.
	Auth float64
	// DNSBL and DNSWL are the fractions of hosts listed on the generated
	// block list (zone "dnsbl.<TLD>", code 127.0.0.2) and allow list (zone
	// "dnswl.<TLD>", code 127.0.5.1). The two zones exist whenever Auth,
	// DNSBL or DNSWL is set, so a verifier configured with them gets clean
	// NXDOMAIN answers for the hosts not listed.
	DNSBL float64
	DNSWL float64

	// Latency is waited before every SMTP reply, plus 0..Jitter.
	Latency Duration
	Jitter  Duration
	// CommandLatency overrides Latency per verb on every host.
	CommandLatency map[string]Duration
	// GreylistDelay of greylisting domains. Default 2s, short enough for a
	// real-time probe to retry within its budget.
	GreylistDelay Duration

	// DisposableDomains are made as accepting domains whose addresses are
	// expected disposable (pass names the verifier's lists hold).
	DisposableDomains []string
	// Spamtraps are known mailboxes (full addresses) expected spamtrap.
	Spamtraps []string

	// SMTPPort of the world. Default 2525.
	SMTPPort int
	// FirstIP is the first host address; the generator counts up from it,
	// skipping .0 and .255. Default 127.1.0.1.
	FirstIP string
	// TLD of the generated names. Default "test" (RFC 2606).
	TLD string
	// Profile is ProfileSynthetic (the behaviour fractions above) or
	// ProfileRealWorld (realworld.go).
	Profile string
}

func (o *GenOptions) defaults() {
	if o.Domains == 0 {
		o.Domains = 1000
	}
	if o.AddressesPerDomain == 0 {
		o.AddressesPerDomain = 10
	}
	if o.MailboxesPerDomain == 0 {
		o.MailboxesPerDomain = 6
	}
	if o.GreylistDelay == 0 {
		o.GreylistDelay = Duration(2 * time.Second)
	}
	if o.SMTPPort == 0 {
		o.SMTPPort = DefaultSMTPPort
	}
	if o.FirstIP == "" {
		o.FirstIP = "127.1.0.1"
	}
	if o.TLD == "" {
		o.TLD = "test"
	}
}

func (o *GenOptions) validate() error {
	var errs []error
	if o.Domains < 0 || o.AddressesPerDomain < 0 || o.MailboxesPerDomain < 0 {
		errs = append(errs, errors.New("counts must not be negative"))
	}
	if o.MailboxesPerDomain > o.AddressesPerDomain {
		errs = append(errs, fmt.Errorf("mailboxes per domain (%d) exceed addresses per domain (%d)", o.MailboxesPerDomain, o.AddressesPerDomain))
	}
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"catch-all", o.CatchAll}, {"greylist", o.Greylist}, {"reject", o.Reject},
		{"tarpit", o.Tarpit}, {"refuse", o.Refuse}, {"busy", o.Busy},
		{"null MX", o.NullMX}, {"no MX", o.NoMX}, {"implicit MX", o.ImplicitMX},
		{"NXDOMAIN", o.NXDomain}, {"SERVFAIL", o.ServFail},
		{"accept-then-bounce", o.AcceptThenBounce}, {"drop unknown", o.DropUnknown},
		{"mailbox full", o.MailboxFull}, {"mailbox disabled", o.MailboxDisabled},
		{"mailbox over quota", o.MailboxOverQuota}, {"complaint rate", o.ComplaintRate},
		{"STARTTLS", o.STARTTLS}, {"auth", o.Auth}, {"DNSBL", o.DNSBL}, {"DNSWL", o.DNSWL},
	} {
		if f.v < 0 || f.v > 1 {
			errs = append(errs, fmt.Errorf("%s fraction %v is not in [0, 1]", f.name, f.v))
		}
	}
	sum := o.CatchAll + o.Greylist + o.Reject + o.Tarpit + o.Refuse + o.Busy +
		o.NullMX + o.NoMX + o.ImplicitMX + o.NXDomain + o.ServFail + o.AcceptThenBounce + o.DropUnknown
	if sum > 1.0000001 {
		errs = append(errs, fmt.Errorf("domain behaviour fractions add up to %.3f, more than 1", sum))
	}
	if m := o.MailboxFull + o.MailboxDisabled + o.MailboxOverQuota; m > 1.0000001 {
		errs = append(errs, fmt.Errorf("mailbox state fractions add up to %.3f, more than 1", m))
	}
	switch o.Profile {
	case ProfileSynthetic, ProfileRealWorld, ProfileFeedback, ProfileTypos:
	default:
		errs = append(errs, fmt.Errorf("profile %q is not %q, %q, %q or %q", o.Profile, ProfileSynthetic, ProfileRealWorld, ProfileFeedback, ProfileTypos))
	}
	if _, err := netip.ParseAddr(o.FirstIP); err != nil {
		errs = append(errs, fmt.Errorf("first IP %q: %w", o.FirstIP, err))
	}
	return errors.Join(errs...)
}

// kind is a generated domain's behaviour.
type kind uint8

const (
	kindNormal kind = iota
	kindCatchAll
	kindGreylist
	kindReject
	kindTarpit
	kindRefuse
	kindBusy
	kindNullMX
	kindNoMX
	kindImplicitMX
	kindNXDomain
	kindServFail
	kindAcceptThenBounce
	kindDropUnknown
)

// kindNames label a generated domain's addresses in ProfileFeedback
// (Expectation.Group).
var kindNames = [...]string{
	kindNormal: "plain", kindCatchAll: "catch-all", kindGreylist: "greylisting",
	kindReject: "policy block 5.7.1", kindTarpit: "tarpit", kindRefuse: "connection refused",
	kindBusy: "busy 421", kindNullMX: "null MX", kindNoMX: "no MX", kindImplicitMX: "implicit MX",
	kindNXDomain: "NXDOMAIN", kindServFail: "SERVFAIL",
	kindAcceptThenBounce: "accept-then-bounce", kindDropUnknown: "catch-all dropping unknown",
}

var nameWords = []string{
	"acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "wonka",
	"cyberdyne", "tyrell", "soylent", "gringotts", "oscorp", "aperture", "vandelay",
	"dunder", "pied", "massive", "nakatomi", "monarch",
}

var roleLocals = []string{"info", "sales", "support", "admin", "contact", "office", "billing", "hr"}

var firstNames = []string{"ada", "alan", "grace", "linus", "ken", "dennis", "barbara", "edsger", "donald", "margaret", "radia", "john", "frances", "leslie", "tim", "vint"}

// Generate makes a world by o, and the expected verdict of every address it
// made, in domain order.
func Generate(o GenOptions) (*World, []Expectation, error) {
	if o.Profile == ProfileFeedback {
		feedbackMix(&o)
	}
	o.defaults()
	if err := o.validate(); err != nil {
		return nil, nil, fmt.Errorf("world: %w", err)
	}
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	// A second stream for what later versions added (registration dates,
	// list entries), so that a seed keeps giving the same behaviours,
	// mailboxes and addresses as before.
	extra := rand.New(rand.NewPCG(o.Seed^0x5bd1e9955bd1e995, o.Seed+1))
	// A third for the delivery truths, which a seed's worlds gained last.
	delivery := rand.New(rand.NewPCG(o.Seed^0x2545f4914f6cdd1d, o.Seed+2))
	n := o.Domains + len(o.DisposableDomains)
	w := &World{SMTPPort: o.SMTPPort, ComplaintRate: o.ComplaintRate}
	if o.Profile == ProfileRealWorld || o.Profile == ProfileTypos {
		g := &generator{o: o, rng: rng, extra: extra, delivery: delivery, w: w}
		g.ip, _ = netip.ParseAddr(o.FirstIP)
		if o.Profile == ProfileTypos {
			return generateTypos(g)
		}
		return generateRealWorld(g)
	}
	w.Domains = make([]*Domain, 0, n)
	w.Hosts = make([]*Host, 0, n)

	// Assign behaviours: shuffle the domain indices, then cut the shuffled
	// order by the cumulative fractions, so counts are exact.
	kinds := make([]kind, o.Domains)
	perm := rng.Perm(o.Domains)
	at := 0
	for _, f := range []struct {
		k kind
		v float64
	}{
		{kindCatchAll, o.CatchAll}, {kindGreylist, o.Greylist}, {kindReject, o.Reject},
		{kindTarpit, o.Tarpit}, {kindRefuse, o.Refuse}, {kindBusy, o.Busy},
		{kindNullMX, o.NullMX}, {kindNoMX, o.NoMX}, {kindImplicitMX, o.ImplicitMX},
		{kindNXDomain, o.NXDomain}, {kindServFail, o.ServFail},
		{kindAcceptThenBounce, o.AcceptThenBounce}, {kindDropUnknown, o.DropUnknown},
	} {
		c := int(f.v*float64(o.Domains) + 0.5)
		for i := 0; i < c && at < o.Domains; i++ {
			kinds[perm[at]] = f.k
			at++
		}
	}

	g := &generator{o: o, rng: rng, extra: extra, delivery: delivery, w: w}
	g.ip, _ = netip.ParseAddr(o.FirstIP)
	newHost := g.newHost
	addDomain := func(name string, k kind) {
		d := &Domain{Name: name, Policy: PolicyAccept, Mailboxes: map[string]MailboxState{}}
		w.Domains = append(w.Domains, d)
		switch k {
		case kindNullMX:
			d.MX = []MX{{Pref: 0, Host: "."}}
		case kindNoMX:
		case kindNXDomain:
			d.NXDomain = true
		case kindServFail:
			d.DNSFault = DNSFaultServFail
		case kindImplicitMX:
			h := newHost("mail." + name)
			d.A = []string{h.IP}
		default:
			h := newHost("mx." + name)
			d.MX = []MX{{Pref: 10, Host: h.Name}}
			switch k {
			case kindTarpit:
				h.Mode = HostTarpit
			case kindRefuse:
				h.Mode = HostRefuse
			case kindBusy:
				h.Mode = HostBusy
			case kindCatchAll:
				d.Policy = PolicyCatchAll
			case kindGreylist:
				d.Policy = PolicyGreylist
				d.GreylistDelay = o.GreylistDelay
			case kindReject:
				d.Policy = PolicyReject
			case kindAcceptThenBounce:
				d.Policy, d.UnknownUser = PolicyCatchAll, UnknownUserBounce
			case kindDropUnknown:
				d.Policy, d.UnknownUser = PolicyCatchAll, UnknownUserDrop
			}
		}
		g.auth(d)
		group := ""
		if o.Profile == ProfileFeedback {
			group = kindNames[k]
		}
		g.addresses(d, o.AddressesPerDomain, o.MailboxesPerDomain, o.RoleMailbox, group)
	}

	for i := 0; i < o.Domains; i++ {
		name := fmt.Sprintf("%s%d.%s", nameWords[i%len(nameWords)], i, o.TLD)
		addDomain(name, kinds[i])
	}
	for _, name := range o.DisposableDomains {
		addDomain(strings.ToLower(name), kindNormal)
	}
	return g.finish()
}

// generator holds what Generate and its profiles share while they make a
// world.
type generator struct {
	o          GenOptions
	rng, extra *rand.Rand
	delivery   *rand.Rand // the delivery truths' draws (realworld.go)
	w          *World
	ip         netip.Addr
	exp        []Expectation
	seen       map[*Domain]map[string]bool // local parts made, per domain
}

// nextIP returns the next free host address, skipping .0 and .255.
func (g *generator) nextIP() string {
	s := g.ip.String()
	for {
		g.ip = g.ip.Next()
		b := g.ip.As4()
		if b[3] != 0 && b[3] != 255 {
			break
		}
	}
	return s
}

// newHost adds a host named name with the world's latency and, by
// GenOptions.STARTTLS, STARTTLS.
func (g *generator) newHost(name string) *Host {
	o := g.o
	h := &Host{Name: name, IP: g.nextIP(), Latency: o.Latency, Jitter: o.Jitter}
	if len(o.CommandLatency) > 0 {
		h.CommandLatency = o.CommandLatency
	}
	if g.rng.Float64() < o.STARTTLS {
		h.TLS = "1.3"
		if g.rng.IntN(5) == 0 {
			h.TLS = "1.2"
		}
	}
	g.w.Hosts = append(g.w.Hosts, h)
	return h
}

// auth gives d, by GenOptions.Auth, the authentication records and a
// registration date.
func (g *generator) auth(d *Domain) {
	if g.rng.Float64() < g.o.Auth && !d.NXDomain {
		addAuthRecords(d, g.rng)
		d.Registered = randomRegistration(g.extra)
	}
}

// addresses makes n addresses of d, the first mailboxes of them known (the
// first a role address with role), the others unknown local parts, and
// writes their expectations, labelled with group.
func (g *generator) addresses(d *Domain, n, mailboxes int, role bool, group string) {
	o, rng := g.o, g.rng
	locals := make([]string, 0, n)
	seen := g.seenOf(d)
	for len(locals) < n {
		var lp string
		switch {
		case len(locals) == 0 && role && mailboxes > 0:
			lp = roleLocals[rng.IntN(len(roleLocals))]
		case len(locals) < mailboxes:
			f := firstNames[rng.IntN(len(firstNames))]
			// A large domain (a consumer provider's) draws from a larger
			// space of names.
			space := 1
			if mailboxes > 1000 {
				space = 100
			}
			if rng.IntN(2) == 0 {
				lp = fmt.Sprintf("%s.%s%d", f, nameWords[rng.IntN(len(nameWords))], rng.IntN(100*space))
			} else {
				lp = fmt.Sprintf("%s%d", f, rng.IntN(1000*space))
			}
		default:
			lp = fmt.Sprintf("nobody-%08x", rng.Uint32())
		}
		if seen[lp] {
			continue
		}
		seen[lp] = true
		if len(locals) < mailboxes {
			st := MailboxOK
			switch r := rng.Float64(); {
			case r < o.MailboxFull:
				st = MailboxFull
			case r < o.MailboxFull+o.MailboxDisabled:
				st = MailboxDisabled
			case r < o.MailboxFull+o.MailboxDisabled+o.MailboxOverQuota:
				st = MailboxOverQuota
			}
			d.Mailboxes[lp] = st
		}
		locals = append(locals, lp)
	}
	for i, lp := range locals {
		e := Expectation{Email: lp + "@" + d.Name, Group: group}
		e.Role = i == 0 && role && mailboxes > 0
		g.exp = append(g.exp, e)
	}
}

// seenOf returns the local parts made for d so far.
func (g *generator) seenOf(d *Domain) map[string]bool {
	if g.seen == nil {
		g.seen = map[*Domain]map[string]bool{}
	}
	if g.seen[d] == nil {
		g.seen[d] = map[string]bool{}
	}
	return g.seen[d]
}

// finish adds the DNS lists, validates the world and writes every
// expectation: the world's verdict, refined by what only the generator
// knows (role, disposable, spamtrap).
func (g *generator) finish() (*World, []Expectation, error) {
	o, w, extra, exp := g.o, g.w, g.extra, g.exp
	spamtraps := map[string]bool{}
	for _, s := range o.Spamtraps {
		spamtraps[strings.ToLower(s)] = true
	}
	for t := range spamtraps {
		at := strings.LastIndexByte(t, '@')
		if at < 0 {
			continue
		}
		if d := w.Domain(t[at+1:]); d != nil {
			d.Mailboxes[t[:at]] = MailboxOK
		}
	}
	if o.Auth > 0 || o.DNSBL > 0 || o.DNSWL > 0 {
		bl := &DNSBLZone{Zone: GenDNSBLZonePrefix + o.TLD, Listed: map[string]string{}}
		wl := &DNSBLZone{Zone: GenDNSWLZonePrefix + o.TLD, Listed: map[string]string{}}
		for _, h := range w.Hosts {
			if extra.Float64() < o.DNSBL {
				bl.Listed[h.IP] = GenDNSBLCode
			}
			if extra.Float64() < o.DNSWL {
				wl.Listed[h.IP] = GenDNSWLCode
			}
		}
		w.DNSBL = []*DNSBLZone{bl, wl}
	}
	w.Defaults()
	if err := w.Validate(); err != nil {
		return nil, nil, err
	}
	w.Reindex()

	disposable := map[string]bool{}
	for _, d := range o.DisposableDomains {
		disposable[strings.ToLower(d)] = true
	}
	for i := range exp {
		e := w.Expect(exp[i].Email)
		e.Role, e.Group, e.Meant = exp[i].Role, exp[i].Group, exp[i].Meant
		if e.Group != "" {
			e.Group += " · " + w.mailboxLabel(e.Email, e.Role)
		}
		dom := e.Email[strings.LastIndexByte(e.Email, '@')+1:]
		switch {
		case spamtraps[strings.ToLower(e.Email)]:
			e.Status, e.Reason = StatusSpamtrap, ""
		case disposable[dom]:
			e.Status, e.Reason = StatusDisposable, ReasonDisposable
		case e.Role && e.Status == StatusValid:
			e.Reason = ReasonRoleBased
		}
		exp[i] = e
	}
	for t := range spamtraps {
		e := w.Expect(t)
		e.Status, e.Reason = StatusSpamtrap, ""
		exp = append(exp, e)
	}
	return w, exp, nil
}

// The DNS lists of a generated world: zones (prefix + TLD) and the codes
// listed hosts get.
const (
	GenDNSBLZonePrefix = "dnsbl."
	GenDNSWLZonePrefix = "dnswl."
	GenDNSBLCode       = "127.0.0.2"
	GenDNSWLCode       = "127.0.5.1"
)

// randomRegistration draws a registration date between 1995 and 2025.
func randomRegistration(rng *rand.Rand) string {
	start := time.Date(1995, 1, 1, 0, 0, 0, 0, time.UTC)
	return start.AddDate(0, 0, rng.IntN(30*365)).Format(time.DateOnly)
}

// addAuthRecords gives d the full set of authentication records, with some
// variety in their postures.
func addAuthRecords(d *Domain, rng *rand.Rand) {
	spf := []string{"-all", "~all", "?all"}[rng.IntN(3)]
	policy := []string{"reject", "quarantine", "none"}[rng.IntN(3)]
	txt := func(name, v string) Record { return Record{Name: name, Type: "TXT", Data: quoteTXT(v)} }
	d.Records = append(d.Records,
		txt("@", "v=spf1 mx "+spf),
		txt("_dmarc", "v=DMARC1; p="+policy+"; rua=mailto:dmarc@"+d.Name),
		txt("default._domainkey", "v=DKIM1; k=ed25519; p=11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="),
		txt("_mta-sts", "v=STSv1; id=20260101T000000"),
		txt("_smtp._tls", "v=TLSRPTv1; rua=mailto:tlsrpt@"+d.Name),
		txt("default._bimi", "v=BIMI1; l=https://"+d.Name+"/logo.svg; a=https://"+d.Name+"/vmc.pem"),
		txt("_svc-trust", "v=SVC1; k=key1; l=3"),
		Record{Name: "@", Type: "CAA", Data: `0 issue "ca.test"`},
	)
	if len(d.MX) > 0 && d.MX[0].Host != "." {
		d.Records = append(d.Records, Record{
			Name: "_25._tcp." + d.MX[0].Host + ".", Type: "TLSA",
			Data: "3 1 1 0000000000000000000000000000000000000000000000000000000000000000",
		})
		d.Signed = true
	}
}

// quoteTXT writes v as TXT RDATA, split into 255-octet strings.
func quoteTXT(v string) string {
	var b strings.Builder
	for len(v) > 0 {
		n := min(len(v), 255)
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteByte('"')
		for _, c := range []byte(v[:n]) {
			if c == '"' || c == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(c)
		}
		b.WriteByte('"')
		v = v[n:]
	}
	return b.String()
}

// WriteExpectations writes one JSON object per line.
func WriteExpectations(path string, exp []Expectation) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	enc := json.NewEncoder(bw)
	for i := range exp {
		if err := enc.Encode(&exp[i]); err != nil {
			f.Close()
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadExpectations reads what WriteExpectations wrote.
func ReadExpectations(path string) ([]Expectation, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var exp []Expectation
	dec := json.NewDecoder(bufio.NewReader(f))
	for dec.More() {
		var e Expectation
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("world: %s: %w", path, err)
		}
		exp = append(exp, e)
	}
	return exp, nil
}

// mailboxLabel says what email is to its domain, for Expectation.Group:
// role, known, full, disabled, over_quota or unknown.
func (w *World) mailboxLabel(email string, role bool) string {
	at := strings.LastIndexByte(email, '@')
	d := w.Domain(email[at+1:])
	if d == nil {
		return "unknown"
	}
	switch st, ok := d.Mailboxes[strings.ToLower(email[:at])]; {
	case !ok:
		return "unknown"
	case st == MailboxFull || st == MailboxDisabled || st == MailboxOverQuota:
		return string(st)
	case role:
		return "role"
	}
	return "known"
}
