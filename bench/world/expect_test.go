package world

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// refusalCase is a domain of its own, on a host of its own, refusing
// unknown local parts in some way, and the verdict a careful verifier
// reaches for one of its addresses.
type refusalCase struct {
	name  string
	host  func(*Host)
	dom   func(*Domain)
	local string
	// status, reason and catchAll are what Expect must say.
	status, reason string
	catchAll       bool
	// wire, when set, is the reply line the host must send to RCPT of
	// the address (what Expect relies on).
	wire string
}

func unknownIs(line string, noPostmaster bool) func(*Domain) {
	return func(d *Domain) { d.UnknownReply, d.NoPostmaster = line, noPostmaster }
}

func provider(p string) func(*Host) { return func(h *Host) { h.Provider = p } }

var refusalCases = []refusalCase{
	// The stock wordings of Exim, OpenSMTPD and Postfix say no such
	// mailbox: invalid whatever postmaster does.
	{name: "exim-unrouteable", dom: unknownIs("550 Unrouteable address", false), local: "zed",
		status: StatusInvalid, reason: ReasonMailboxNotFound, wire: "550 Unrouteable address"},
	{name: "exim-unrouteable-np", dom: unknownIs("550 Unrouteable address", true), local: "zed",
		status: StatusInvalid, reason: ReasonMailboxNotFound, wire: "550 Unrouteable address"},
	{name: "exim-unknown-user-np", dom: unknownIs("550 Unknown user", true), local: "zed",
		status: StatusInvalid, reason: ReasonMailboxNotFound, wire: "550 Unknown user"},
	{name: "opensmtpd-np", dom: unknownIs("550 Invalid recipient: <{addr}>", true), local: "zed",
		status: StatusInvalid, reason: ReasonMailboxNotFound, wire: "550 Invalid recipient: <zed@opensmtpd-np.test>"},
	{name: "opensmtpd-literal-np", dom: unknownIs("550 Invalid recipient: <zed@opensmtpd-literal-np.test>", true), local: "zed",
		status: StatusInvalid, reason: ReasonMailboxNotFound},
	{name: "postfix-virtual-np", dom: unknownIs(postfixVirtual, true), local: "zed",
		status: StatusInvalid, reason: ReasonMailboxNotFound,
		wire: "550 5.1.1 <zed@postfix-virtual-np.test>: Recipient address rejected: User unknown in virtual mailbox table"},
	{name: "cpanel-np", dom: unknownIs("550 No such user here", true), local: "zed",
		status: StatusInvalid, reason: ReasonMailboxNotFound},
	{name: "misused-571-np", dom: unknownIs("550 5.7.1 User unknown", true), local: "zed",
		status: StatusInvalid, reason: ReasonMailboxNotFound},
	{name: "bare-default-np", host: func(h *Host) { h.Replies = RepliesBare }, dom: unknownIs("", true), local: "zed",
		status: StatusInvalid, reason: ReasonMailboxNotFound, wire: "550 no such user"},
	// A refusal that says nothing: postmaster accepted, the refusal is
	// about the local part; postmaster refused alike, nothing is known.
	{name: "access-denied", dom: unknownIs("550 5.7.1 Access denied", false), local: "zed",
		status: StatusInvalid, reason: ReasonMailboxNotFound, wire: "550 5.7.1 Access denied"},
	{name: "access-denied-np", dom: unknownIs("550 5.7.1 Access denied", true), local: "zed",
		status: StatusUnknown, reason: ReasonSMTPRejected, wire: "550 5.7.1 Access denied"},
	{name: "postfix-access-np", dom: unknownIs("554 5.7.1 <{addr}>: Recipient address rejected: Access denied", true), local: "zed",
		status: StatusUnknown, reason: ReasonSMTPRejected},
	{name: "postfix-access", dom: unknownIs("554 5.7.1 <{addr}>: Recipient address rejected: Access denied", false), local: "zed",
		status: StatusInvalid, reason: ReasonMailboxNotFound},
	{name: "bare-access-denied", host: func(h *Host) { h.Replies = RepliesBare }, dom: unknownIs("550 5.7.1 Access denied", false), local: "zed",
		status: StatusInvalid, reason: ReasonMailboxNotFound, wire: "550 Access denied"},
	{name: "bare-access-denied-np", host: func(h *Host) { h.Replies = RepliesBare }, dom: unknownIs("550 5.7.1 Access denied", true), local: "zed",
		status: StatusUnknown, reason: ReasonSMTPRejected, wire: "550 Access denied"},
	{name: "bare-554-np", dom: unknownIs("554 Recipient address rejected", true), local: "zed",
		status: StatusUnknown, reason: ReasonSMTPRejected},
	{name: "opensmtpd-virtual", dom: unknownIs("524 5.2.4 Mailing list expansion problem", false), local: "zed",
		status: StatusInvalid, reason: ReasonMailboxNotFound},
	// Postmaster can be asked in a transaction of its own, and after
	// greylisting.
	{name: "one-rcpt-access-denied", host: func(h *Host) { h.MaxRcpts = 1 }, dom: unknownIs("550 5.7.1 Access denied", false), local: "zed",
		status: StatusInvalid, reason: ReasonMailboxNotFound},
	{name: "greylist-access-denied", dom: func(d *Domain) {
		d.UnknownReply, d.Policy = "550 5.7.1 Access denied", PolicyGreylist
	}, local: "zed", status: StatusInvalid, reason: ReasonMailboxNotFound},
	// A postmaster mailbox of the domain's own counts as postmaster.
	{name: "own-postmaster", dom: func(d *Domain) {
		d.UnknownReply, d.NoPostmaster, d.Mailboxes["postmaster"] = "550 5.7.1 Access denied", true, MailboxOK
	}, local: "zed", status: StatusInvalid, reason: ReasonMailboxNotFound},
	// Words about the client: nothing is known of the mailbox, postmaster
	// or not.
	{name: "rbl", dom: unknownIs("554 5.7.1 Service unavailable; Client host [127.0.0.1] blocked using zen.spamhaus.org", false), local: "zed",
		status: StatusUnknown, reason: ReasonSMTPRejected},
	{name: "sender-auth", dom: unknownIs("550 5.7.26 Unauthenticated email is not accepted", false), local: "zed",
		status: StatusUnknown, reason: ReasonSMTPRejected},
	// The file says what its own wording means.
	{name: "says-no-mailbox-np", dom: func(d *Domain) {
		d.UnknownReply, d.UnknownSays, d.NoPostmaster = "550 Go away", SaysNoMailbox, true
	}, local: "zed", status: StatusInvalid, reason: ReasonMailboxNotFound},
	{name: "says-client", dom: func(d *Domain) { d.UnknownReply, d.UnknownSays = "550 Go away", SaysClient }, local: "zed",
		status: StatusUnknown, reason: ReasonSMTPRejected},
	// The codes alone.
	{name: "bare-552", dom: unknownIs("552 Over quota", true), local: "zed", status: StatusRisky, reason: ReasonSMTPRejected},
	{name: "deferred", dom: unknownIs("450 4.7.1 Try again later", false), local: "zed", status: StatusUnknown, reason: ReasonTimeout},
	{name: "no-relay", dom: unknownIs("550 5.1.2 Relay access denied", false), local: "zed", status: StatusInvalid, reason: ReasonSMTPRejected},
	// Providers' wordings: some mean no such mailbox only from the
	// provider's hosts; others say it in any server's mouth.
	{name: "gmx", host: provider("gmx"), dom: unknownIs("550 Requested action not taken: mailbox unavailable", true), local: "zed",
		status: StatusInvalid, reason: ReasonMailboxNotFound},
	{name: "gmx-words-np", dom: unknownIs("550 Requested action not taken: mailbox unavailable", true), local: "zed",
		status: StatusUnknown, reason: ReasonSMTPRejected},
	{name: "gmx-words", dom: unknownIs("550 Requested action not taken: mailbox unavailable", false), local: "zed",
		status: StatusInvalid, reason: ReasonMailboxNotFound},
	{name: "m365-5110", host: provider("microsoft365"), dom: unknownIs("550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup", true), local: "zed",
		status: StatusInvalid, reason: ReasonMailboxNotFound},
	{name: "plain-5110", dom: unknownIs("550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup", true), local: "zed",
		status: StatusInvalid, reason: ReasonSMTPRejected},
	{name: "yandex-words-np", dom: unknownIs("550 5.7.1 No such user!", true), local: "zed", status: StatusInvalid, reason: ReasonMailboxNotFound},
	{name: "yahoo-552-elsewhere", dom: unknownIs("552 1 Requested mail action aborted, mailbox not found", true), local: "zed",
		status: StatusInvalid, reason: ReasonMailboxNotFound},
	{name: "yahoo-dd-np", dom: unknownIs("554 delivery error: dd This user doesn't have a yahoo.com account (zed@x) [0] - mta1234.mail.bf1.yahoo.com", true), local: "zed",
		status: StatusInvalid, reason: ReasonMailboxNotFound},
	{name: "yahoo-off", host: provider("yahoo"), dom: unknownIs("554 delivery error: dd Sorry your message to zed@x cannot be delivered. This mailbox is disabled (554.30)", false), local: "zed",
		status: StatusInvalid, reason: ReasonSMTPRejected},
	// A gateway proves a mailbox once it has refused a local part as no
	// such mailbox.
	{name: "gateway-words-np", host: provider("mimecast"), dom: unknownIs("550 5.7.1 Invalid recipient", true), local: "ann",
		status: StatusValid, reason: ReasonOK},
	{name: "gateway-nothing", host: provider("mimecast"), dom: unknownIs("550 5.7.1 Access denied", false), local: "ann",
		status: StatusValid, reason: ReasonOK},
	{name: "gateway-nothing-np", host: provider("mimecast"), dom: unknownIs("550 5.7.1 Access denied", true), local: "ann",
		status: StatusRisky, reason: ReasonCatchAll, catchAll: true},
	{name: "gateway-nothing-np-zed", host: provider("mimecast"), dom: unknownIs("550 5.7.1 Access denied", true), local: "zed",
		status: StatusUnknown, reason: ReasonSMTPRejected},
	{name: "gateway-rbl", host: provider("proofpoint"), dom: unknownIs("554 5.7.1 Service unavailable; Client host [127.0.0.1] blocked using zen.spamhaus.org", false), local: "ann",
		status: StatusRisky, reason: ReasonCatchAll, catchAll: true},
}

// refusalWorld is a world of the cases, each domain <name>.test on its
// own host mx.<name>.test with the mailbox ann.
func refusalWorld(cases []refusalCase) ([]*Host, []*Domain) {
	var hosts []*Host
	var domains []*Domain
	for _, c := range cases {
		h := &Host{Name: "mx." + c.name + ".test"}
		if c.host != nil {
			c.host(h)
		}
		d := &Domain{Name: c.name + ".test", MX: []MX{{10, h.Name}}, Mailboxes: map[string]MailboxState{"ann": MailboxOK}}
		if c.dom != nil {
			c.dom(d)
		}
		hosts, domains = append(hosts, h), append(domains, d)
	}
	return hosts, domains
}

// TestExpectReadsWhatRefusalsSay: a refusal of an unknown local part is
// read by what it says — its words where the software that sends them
// documents them, else its codes —, and one that says nothing against
// postmaster@ the domain. Each host is asked over SMTP too: it sends the
// reply, and accepts or refuses postmaster, as Expect assumes.
func TestExpectReadsWhatRefusalsSay(t *testing.T) {
	hosts, domains := refusalWorld(refusalCases)
	tw := startWorld(t, hosts, domains)
	for i, c := range refusalCases {
		d := tw.w.Domains[i]
		e := tw.w.Expect(c.local + "@" + d.Name)
		if e.Status != c.status || e.Reason != c.reason || e.CatchAll != c.catchAll {
			t.Errorf("%s: Expect %s/%s catch-all %v, want %s/%s %v", c.name, e.Status, e.Reason, e.CatchAll, c.status, c.reason, c.catchAll)
		}
		if d.Policy == PolicyGreylist {
			continue // the SMTP side of greylisting is TestWorldAgreesWithExpect's
		}
		rc := tw.greeted(t, tw.w.Hosts[i].IP, clientA)
		rc.expect("MAIL FROM:<probe@verifyd.test>", "250")
		if c.wire != "" {
			if got := strings.TrimRight(rc.cmd("RCPT TO:<"+c.local+"@"+d.Name+">"), "\r\n"); got != c.wire {
				t.Errorf("%s: RCPT answered %q, want %q", c.name, got, c.wire)
			}
		}
		if tw.w.Hosts[i].MaxRcpts == 1 {
			rc.expect("RSET", "250")
			rc.expect("MAIL FROM:<probe@verifyd.test>", "250")
		}
		pm := rc.cmd("RCPT TO:<postmaster@" + d.Name + ">")
		if accepted := strings.HasPrefix(pm, "250"); accepted != postmasterAccepted(d) {
			t.Errorf("%s: postmaster answered %q; Expect assumes accepted %v", c.name, pm, postmasterAccepted(d))
		}
		rc.expect("QUIT", "221")
	}
}

// TestExpectWithoutPostmaster: the outside testing of issue 35 — Exim's
// and OpenSMTPD's bare wordings on domains without postmaster are no such
// mailbox; "550 5.7.1 Access denied" is no such mailbox where postmaster
// is accepted and tells nothing where it is not.
func TestExpectWithoutPostmaster(t *testing.T) {
	for _, c := range []struct {
		reply        string
		noPostmaster bool
		status       string
		reason       string
	}{
		{"550 Unrouteable address", true, StatusInvalid, ReasonMailboxNotFound},
		{"550 Unknown user", true, StatusInvalid, ReasonMailboxNotFound},
		{"550 Invalid recipient: <{addr}>", true, StatusInvalid, ReasonMailboxNotFound},
		{"550 Invalid recipient: <zed@x.test>", true, StatusInvalid, ReasonMailboxNotFound},
		{postfixVirtual, true, StatusInvalid, ReasonMailboxNotFound},
		{"550 5.7.1 Access denied", false, StatusInvalid, ReasonMailboxNotFound},
		{"550 5.7.1 Access denied", true, StatusUnknown, ReasonSMTPRejected},
	} {
		w := &World{Hosts: []*Host{{Name: "mx.x.test", IP: "127.9.1.1"}},
			Domains: []*Domain{{Name: "x.test", MX: []MX{{10, "mx.x.test"}}, UnknownReply: c.reply, NoPostmaster: c.noPostmaster,
				Mailboxes: map[string]MailboxState{"ann": MailboxOK}}}}
		w.Defaults()
		if err := w.Validate(); err != nil {
			t.Fatal(err)
		}
		if e := w.Expect("zed@x.test"); e.Status != c.status || e.Reason != c.reason {
			t.Errorf("%q, no postmaster %v: %s/%s, want %s/%s", c.reply, c.noPostmaster, e.Status, e.Reason, c.status, c.reason)
		}
		if e := w.Expect("ann@x.test"); e.Status != StatusValid {
			t.Errorf("%q, no postmaster %v: ann %s/%s, want valid", c.reply, c.noPostmaster, e.Status, e.Reason)
		}
	}
}

// TestRepliesKnowTheirMeaning: every reply of Replies, given as a
// domain's unknown reply on a host of its provider, means what the entry
// says (with its placeholders filled in as a server fills them); each
// names its source and a provider the world knows.
func TestRepliesKnowTheirMeaning(t *testing.T) {
	for _, r := range Replies {
		if r.Source == "" || !validSays(r.Says) {
			t.Errorf("%q: source %q, says %q", r.Line, r.Source, r.Says)
		}
		if _, ok := Providers[r.Provider]; r.Provider != "" && !ok {
			t.Errorf("%q: unknown provider %q", r.Line, r.Provider)
		}
		h := &Host{Provider: r.Provider}
		for _, line := range []string{r.Line, strings.NewReplacer("{addr}", "Zed.Q@Example.COM", "{domain}", "example.com", "{ip}", "192.0.2.1",
			"{list}", "zen.spamhaus.org", "{server}", "mta7.mail.gq1.yahoo.com").Replace(r.Line)} {
			if got := unknownSays(&Domain{UnknownReply: line}, h); got != r.Says {
				t.Errorf("%q: says %q, want %q", line, got, r.Says)
			}
		}
		if r.Provider != "" {
			if got, want := unknownSays(&Domain{UnknownReply: r.Line}, &Host{}), codesSay(r.Line); got != want {
				t.Errorf("%q from a host of no provider: says %q, want its codes' %q", r.Line, got, want)
			}
		}
	}
	// The words decide, not the code before them nor their case.
	if got := unknownSays(&Domain{UnknownReply: "550 5.7.1 invalid RECIPIENT"}, &Host{}); got != SaysNoMailbox {
		t.Errorf("Mimecast's words after 5.7.1: %q", got)
	}
	// A temporary refusal is never read by its words.
	if got := unknownSays(&Domain{UnknownReply: "450 Unknown user"}, &Host{}); got != SaysDeferred {
		t.Errorf("450 Unknown user: %q", got)
	}
	// Words are matched whole: a reply that merely contains known words
	// is not that reply.
	if got := unknownSays(&Domain{UnknownReply: "550 Unknown user or bad password"}, &Host{}); got != SaysNothing {
		t.Errorf("550 Unknown user or bad password: %q", got)
	}
}

// TestExpectIsTheWorldsOwn: the world's expectation calls nothing of the
// engine's (no package of the module it depends on is probe/ or below),
// and does not read the provider table the engine's test compares with
// (ProviderFacts.NoMailbox and Wordings): emptied, the real-world mix's
// expectations are the same.
func TestExpectIsTheWorldsOwn(t *testing.T) {
	const module = "github.com/verifyd/verifyd/"
	seen := map[string]bool{}
	var walk func(dir, path string)
	walk = func(dir, path string) {
		if seen[path] {
			return
		}
		seen[path] = true
		if strings.HasPrefix(path, module+"probe") {
			t.Errorf("the world depends on %s", path)
			return
		}
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, im := range af.Imports {
				p, _ := strconv.Unquote(im.Path.Value)
				if strings.HasPrefix(p, module) {
					walk(filepath.Join("..", "..", strings.TrimPrefix(p, module)), p)
				}
			}
		}
	}
	walk(".", module+"bench/world")
	if _, err := os.Stat(filepath.Join("..", "..", "probe")); err != nil {
		t.Fatalf("the module root is not two folders up: %v", err)
	}

	o := GenOptions{Profile: ProfileRealWorld, Domains: 400, Seed: 5, RoleMailbox: true}
	_, before, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	saved := Providers
	t.Cleanup(func() { Providers = saved })
	emptied := map[string]ProviderFacts{}
	for name, pf := range saved {
		emptied[name] = ProviderFacts{AcceptsAll: pf.AcceptsAll, Gateway: pf.Gateway}
	}
	Providers = emptied
	_, after, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(before, after) {
		t.Error("Expect reads ProviderFacts.NoMailbox or Wordings")
	}
}

// TestRealWorldStockWordings: the real-world mix has the stock wordings
// with and without postmaster, each expected as its words say.
func TestRealWorldStockWordings(t *testing.T) {
	w, exp, err := Generate(GenOptions{Profile: ProfileRealWorld, Domains: 1000, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range exp {
		group, state, _ := strings.Cut(e.Group, " · ")
		if state != "unknown" || !strings.HasPrefix(group, "self-hosted ") {
			continue
		}
		if prev, ok := got[group]; ok && prev != e.Status+"/"+e.Reason {
			t.Errorf("%s: %s and %s/%s", group, prev, e.Status, e.Reason)
		}
		got[group] = e.Status + "/" + e.Reason
		d := w.Domain(e.Email[strings.LastIndexByte(e.Email, '@')+1:])
		if np := strings.HasSuffix(group, ", no postmaster"); np != d.NoPostmaster {
			t.Errorf("%s: %s has no_postmaster %v", group, d.Name, d.NoPostmaster)
		}
	}
	for _, g := range []string{"Exim 550 Unknown user", "Exim 550 Unknown user, no postmaster", "Exim 550 Unrouteable address",
		"Exim 550 Unrouteable address, no postmaster", "Postfix virtual 550 5.1.1", "Postfix virtual 550 5.1.1, no postmaster",
		"OpenSMTPD 550 Invalid recipient", "OpenSMTPD 550 Invalid recipient, no postmaster", "Postfix access map 554 5.7.1 Access denied",
		"bare 550 user unknown", "550 5.7.1 user unknown", "plain"} {
		if s := got["self-hosted "+g]; s != StatusInvalid+"/"+ReasonMailboxNotFound {
			t.Errorf("self-hosted %s · unknown: %q, want invalid/mailbox_not_found", g, s)
		}
	}
}
